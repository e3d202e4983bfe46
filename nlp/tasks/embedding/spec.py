"""The sentence embedding task: vectors for retrieval, similarity, deduplication and clustering."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks.datasets import register_dataset
from nlp.tasks.embedding.builtin import builtin_datasets
from nlp.tasks.embedding.collate import TextGroupCollator
from nlp.tasks.embedding.data import read_embedding
from nlp.tasks.embedding.heads import DEFAULT_TEMPERATURE, ErnieForSentenceEmbedding
from nlp.tasks.embedding.metrics import lexical_terms, retrieval_metrics, sparse_vector, sts_metrics
from nlp.tasks.embedding.pipeline import FeatureExtractionPipeline, SentenceSimilarityPipeline
from nlp.tasks.embedding.prompts import PASSAGE, QUERY, Prompts, insert_prompt, prompt_ids
from nlp.tasks.embedding.serving import EmbedAdapter, EmbeddingPredictAdapter, EmbedSparseAdapter, SimilarityAdapter
from nlp.tasks.model_io import MODEL_INPUTS
from nlp.tasks.spec import TaskSpec

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["EmbeddingSpec", "SentenceSimilaritySpec", "FEATURE_EXTRACTION", "SENTENCE_SIMILARITY",
           "dataset_kind"]


def dataset_kind(ds: datasets.Dataset) -> str:
    """"scored" (pairs with a score), "retrieval" (query, positive[, negatives]) or "text"."""
    if "score" in ds.column_names:
        return "scored"
    return "text" if len(ds) and len(ds[0]["texts"]) == 1 else "retrieval"


class EmbeddingSpec(TaskSpec):
    name = "feature-extraction"
    aliases = ("sentence-embedding", "text-embedding", "embedding")
    extra = "embedding"
    # 6 layers of multilingual-e5-small with lexical weights, recipes/embedding-zh.yaml (its card)
    default_model = "e5-small-zh-embedding"
    requires = {"train": ("scipy",)}  # sparse lexical scores in the retrieval metrics
    head = ErnieForSentenceEmbedding
    pipeline_class = FeatureExtractionPipeline
    architecture_suffix = "ForSentenceEmbedding"
    label_column = "texts"  # the positives are the answers; a split of plain texts has none
    label_keys = ("labels",)
    has_label_set = False
    packable = False  # the texts of an example are encoded side by side, not packed
    export_outputs = {"sentence_embedding": ("batch", "hidden")}
    distill_losses = {"sentence_embedding": "mse"}  # a vector, regressed
    export_agreement = "cosine"  # an argmax of a vector means nothing
    serving = EmbeddingPredictAdapter()
    result_field = "embedding"
    result_fields = ("embedding", "lexical_weights")  # the weights: a model with lexical weights only
    reader = staticmethod(read_embedding)
    preprocess = None
    metric = staticmethod(retrieval_metrics)

    def distill_ranking(self, config: Any) -> tuple[str, float]:
        """A query's cosines to the batch's other texts, at the model's contrastive temperature."""
        return "sentence_embedding", float(config.extra.get("contrastive_temperature", DEFAULT_TEMPERATURE))

    def teacher_features(self, features: list[dict], teacher_config: Any, tokenizer: Any) -> list[dict]:
        """Each text with the prompt of its role that the teacher declares (prompts.py), as the
        pipelines embed with it: a retrieval record's query its "query" prompt and every other
        text its "passage" prompt; both texts of a scored pair and a plain text the default one;
        a text the prompt makes longer than the teacher's positions cut at its end. Training
        feeds no prompts, so a teacher that needs them (e5) would otherwise give its vectors of
        text it was never trained on."""
        prompts = Prompts.from_config(teacher_config.extra)
        if not prompts.prompts:
            return features
        ids = {role: prompt_ids(tokenizer, text) if text else []
               for role, text in ((QUERY, prompts.for_role(QUERY)), (PASSAGE, prompts.for_role(PASSAGE)),
                                  (None, prompts.text(None)))}
        limit = teacher_config.max_sequence_length
        out = []
        for f in features:
            per_text = {k: f[k] for k in MODEL_INPUTS if k in f}
            if not isinstance(f["input_ids"][0], (list, tuple)):  # one text
                out.append({**f, **insert_prompt(per_text, ids[None], limit)})
                continue
            k = len(f["input_ids"])
            roles = [None] * k if "labels" in f or k == 1 else [QUERY] + [PASSAGE] * (k - 1)
            rows = [insert_prompt({key: v[i] for key, v in per_text.items()}, ids[role], limit)
                    for i, role in enumerate(roles)]
            out.append({**f, **{key: [r[key] for r in rows] for key in per_text}})
        return out

    def model_outputs(self, config: Any) -> dict[str, tuple[str, ...]]:
        outputs = dict(self.export_outputs)
        if config.extra.get("lexical_weights", False):
            outputs["token_weights"] = ("batch", "sequence")  # each token's lexical weight
        if config.extra.get("lexical_bigrams", False):
            outputs["bigram_weights"] = ("batch", "sequence")  # each pair (t, t + 1)'s lexical weight
        return outputs

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        return read_embedding(path, **dict(data.reader))

    def has_labels(self, ds: datasets.Dataset) -> bool:
        return dataset_kind(ds) != "text"

    def trains_on(self, ds: datasets.Dataset) -> bool:
        return True  # plain text trains too (unsupervised SimCSE)

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        kind = dataset_kind(ds)
        texts = ds["texts"]
        lines = [f"{len(ds)} {kind} records, {len(texts[0]) if texts else 0} texts each"]
        if texts:
            lines.append(f"  characters per text: {np.mean([len(t) for row in texts for t in row]):.1f} on average")
        if kind == "scored":
            scores = np.asarray(ds["score"], dtype=np.float64)
            lines.append(f"  scores: {scores.min():g} .. {scores.max():g}")
        return lines

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        return [t for row in ds["texts"] for t in row]

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        groups = columns["texts"]
        sizes = {len(g) for g in groups}
        if len(sizes) > 1:
            raise DataError(f"records have {sorted(sizes)} texts; every record of a split needs the same number")
        flat = [t for g in groups for t in g]
        enc = tokenizer(flat, truncation=True, max_length=data.max_length)
        k = sizes.pop() if sizes else 1
        out: dict[str, list] = {}
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            if key in enc:
                out[key] = [enc[key][i * k:(i + 1) * k] for i in range(len(groups))]
        if "score" in columns:
            out["labels"] = [float(s) for s in columns["score"]]
        return out

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> TextGroupCollator:
        return TextGroupCollator(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        weights = getattr(outputs, "token_weights", None)  # an exported model's outputs: only what it has
        if weights is None:
            return outputs.sentence_embedding  # (B, K, H)
        # a model with lexical weights: the tokens and their (token, bigram) weights too, (B, K, T) each
        pairs = getattr(outputs, "bigram_weights", None)
        kept = (outputs.sentence_embedding, batch["input_ids"], weights)
        return kept if pairs is None else (*kept, pairs)

    def loss_units(self, model: Any):
        return _examples_in

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        lexical = bool(len(predictions)) and isinstance(predictions[0], tuple)
        emb = np.stack([np.asarray(p[0] if lexical else p, dtype=np.float32) for p in predictions])  # (N, K, H)
        if emb.ndim != 3 or emb.shape[1] < 2:
            raise DataError("scoring embeddings needs records of two or more texts (pairs or retrieval triples)")
        sparse = None
        if lexical:  # the sparse vectors of each record's first two texts
            sparse = tuple([sparse_vector(*lexical_terms(*(t[k] for t in p[1:]))) for p in predictions]
                           for k in (0, 1))
        if examples is not None and "score" in examples.column_names:
            return sts_metrics(emb[:, 0], emb[:, 1], examples["score"], lexical=sparse)
        # every query searches the split's positives (hard negatives are not part of the corpus)
        return retrieval_metrics(emb[:, 0], emb[:, 1], np.arange(len(emb)), lexical=sparse)

    def predict(self, pipe: Any, records: list[dict[str, Any]], *, top_k: int = 1) -> list[dict[str, Any]]:
        vectors, weights = FeatureExtractionPipeline.encode(pipe, [r["text"] for r in records], as_tokens=True)
        if weights is None:
            return [{"embedding": v} for v in vectors.tolist()]
        # a model with lexical weights: each text's tokens and weights too, heaviest first
        return [{"embedding": v, "lexical_weights": w} for v, w in zip(vectors.tolist(), weights)]

    def serving_routes(self) -> dict[str, Any]:
        from nlp.tasks.embedding.serving import InferenceRootAdapter
        from nlp.tasks.embedding.serving_openai import OpenAIEmbeddingsAdapter

        return {"/predict": self.serving, "/embed": EmbedAdapter(), "/similarity": SimilarityAdapter(),
                "/embed_sparse": EmbedSparseAdapter(), "/v1/embeddings": OpenAIEmbeddingsAdapter(),
                "/": InferenceRootAdapter()}


class SentenceSimilaritySpec(EmbeddingSpec):
    """The same model and training; the pipeline scores pairs and searches a corpus."""

    name = "sentence-similarity"
    aliases = ("semantic-similarity", "text-similarity")
    pipeline_class = SentenceSimilarityPipeline
    input_fields = ("text", "text_pair")
    result_field = "score"
    result_fields = ("score",)

    def predict(self, pipe: Any, records: list[dict[str, Any]], *, top_k: int = 1) -> list[dict[str, Any]]:
        scores = pipe([r["text"] for r in records], [r["text_pair"] for r in records])
        return [{"score": s} for s in scores]


def _examples_in(batch: Any) -> int:
    return len(batch["input_ids"])


for _dataset in builtin_datasets():
    register_dataset(_dataset)

FEATURE_EXTRACTION = EmbeddingSpec()
SENTENCE_SIMILARITY = SentenceSimilaritySpec()
