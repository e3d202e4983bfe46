"""Text ranking (reranking): a cross-encoder scores how relevant each passage is to a query."""

from nlp.tasks.ranking.heads import ErnieForTextRanking
from nlp.tasks.ranking.mining import BM25, mine_negatives
from nlp.tasks.ranking.pipeline import TextRankingPipeline

__all__ = ["ErnieForTextRanking", "TextRankingPipeline", "BM25", "mine_negatives"]
