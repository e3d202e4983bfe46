"""Sentence embeddings and similarity: the `feature-extraction` and `sentence-similarity` tasks.

`heads` (ErnieForSentenceEmbedding: pooling, InfoNCE / CoSENT / SimCSE), `data` (the reader),
`builtin` (the xinhua-idioms and inews-titles retrieval benchmarks), `metrics` (Spearman,
recall@k, MRR), `collate`, `pipeline` (FeatureExtractionPipeline, SentenceSimilarityPipeline,
EmbeddingIndex), `serving` (POST /predict and TEI's /embed, /similarity), `spec`. docs/embeddings.md.
"""

from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding, SentenceEmbeddingOutput
from nlp.tasks.embedding.pipeline import EmbeddingIndex, FeatureExtractionPipeline, SentenceSimilarityPipeline

__all__ = ["ErnieForSentenceEmbedding", "SentenceEmbeddingOutput", "FeatureExtractionPipeline",
           "SentenceSimilarityPipeline", "EmbeddingIndex"]
