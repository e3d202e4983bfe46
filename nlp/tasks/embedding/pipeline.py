"""Sentence embeddings and similarity pipelines.

    emb = nlp.pipeline("feature-extraction", model="runs/embed/model")
    emb(["今天天气很好", "明天会下雨吗"])          # (2, H) float32, L2-normalised
    sim = nlp.pipeline("sentence-similarity", model="runs/embed/model")
    sim("今天天气很好", ["天气不错", "我饿了"])       # [0.83, 0.12]: cosine per target
    sim.search("天气怎么样", corpus, top_k=5)       # [{"corpus_id", "score", "text"}, ...]
    index = sim.index(corpus); index.save("idx/")  # search a saved index later: sim.search(q, EmbeddingIndex.load("idx/"))

Long texts are cut into overlapping windows of `max_length` tokens; a text's vector is the mean
of its windows' pooled vectors weighted by their token counts (mean pooling over the whole
text where windows do not overlap), then normalised. A blank text is an error naming it (an
embedding of nothing would be the [CLS]/[SEP] vector, a silently wrong answer); `[]` gives an
empty (0, H) array.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nlp._common import ConfigError, DataError, atomic_write
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
from nlp.tasks.base_pipeline import MODEL_INPUTS, Pipeline, as_batch, check_unicode
from nlp.tasks.embedding.collate import TextGroupCollator

__all__ = ["FeatureExtractionPipeline", "SentenceSimilarityPipeline", "EmbeddingIndex"]

def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class FeatureExtractionPipeline(Pipeline):
    """Texts -> sentence vectors, (N, H) float32, normalised unless `normalize=False`."""

    task = "feature-extraction"
    head_class = ErnieForSentenceEmbedding

    def _make_collator(self, multiple: int | None) -> Any:
        return TextGroupCollator(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return out["sentence_embedding"][j]

    def __call__(self, texts: str | Sequence[str], *, normalize: bool = True, truncate: bool = False,
                 stride: int | None = None, as_lists: bool = False) -> Any:
        """A (H,) vector for one text, (N, H) for a list (lists of floats with `as_lists`).

        `truncate`: embed only the first window of a long text (TEI's `truncate`); otherwise
        every window counts. `stride`: tokens shared by consecutive windows (default a quarter)."""
        batch, single = as_batch(texts, "text")
        check_unicode(batch, "text", single)
        for i, text in enumerate(batch):
            if not text.strip():
                raise DataError(f"{'text' if single else f'text {i}'} is blank; an embedding needs some text "
                                "(drop blank texts before embedding them)")
        vectors = self._embed(batch, truncate=truncate, stride=stride)
        if normalize:
            vectors = _normalise(vectors)
        out = vectors[0] if single else vectors
        return out.tolist() if as_lists else out

    def _embed(self, texts: list[str], *, truncate: bool, stride: int | None) -> np.ndarray:
        hidden = self.config.hidden_size
        if not texts:
            return np.zeros((0, hidden), dtype=np.float32)
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}")
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length, stride=stride,
                             return_overflowing_tokens=not truncate)
        n_rows = len(enc["input_ids"])
        owner = enc["overflow_to_sample_mapping"] if not truncate else list(range(n_rows))
        rows = [{k: enc[k][r] for k in MODEL_INPUTS if k in enc} for r in range(n_rows)]
        pooled = self._forward(rows)
        sums = np.zeros((len(texts), hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        for r, vec in enumerate(pooled):
            w = float(sum(rows[r].get("attention_mask", [1] * len(rows[r]["input_ids"]))))
            sums[owner[r]] += w * np.asarray(vec, dtype=np.float64)
            weights[owner[r]] += w
        return (sums / weights[:, None]).astype(np.float32)


class EmbeddingIndex:
    """Normalised vectors of a corpus with its texts, searchable by cosine and saved to a
    directory (``vectors.npy`` + ``texts.json``: plain numpy and JSON, loaded without pickle)."""

    def __init__(self, vectors: np.ndarray, texts: Sequence[str]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise DataError(f"an index needs (N, H) vectors for N texts, got {vectors.shape} for {len(texts)}")
        self.vectors = _normalise(vectors)
        self.texts = list(texts)

    def __len__(self) -> int:
        return len(self.texts)

    def save(self, directory: str | os.PathLike) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_write(directory / "vectors.npy", "wb") as f:
            np.save(f, self.vectors, allow_pickle=False)
        with atomic_write(directory / "texts.json", "w", encoding="utf-8") as f:
            json.dump(self.texts, f, ensure_ascii=False)
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "EmbeddingIndex":
        directory = Path(directory)
        for name in ("vectors.npy", "texts.json"):
            if not (directory / name).is_file():
                raise DataError(f"{directory} is not an embedding index: {name} is missing "
                                "(make one with SentenceSimilarityPipeline.index(corpus).save(dir))")
        try:
            vectors = np.load(directory / "vectors.npy", allow_pickle=False)
            texts = json.loads((directory / "texts.json").read_text(encoding="utf-8"))
        except (ValueError, OSError) as err:
            raise DataError(f"{directory}: unreadable embedding index ({err})") from None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DataError(f"{directory}/texts.json must be a JSON list of strings")
        return cls(vectors, texts)

    def search(self, queries: np.ndarray, top_k: int) -> list[list[tuple[int, float]]]:
        """Per query vector, the (corpus row, cosine) of the `top_k` best rows, best first."""
        if not len(self.texts):
            return [[] for _ in range(len(queries))]
        scores = _normalise(np.asarray(queries, dtype=np.float32)) @ self.vectors.T  # (Q, N)
        k = min(top_k, scores.shape[1])
        out = []
        for row in scores:
            best = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            best = best[np.argsort(-row[best], kind="stable")]
            out.append([(int(i), float(row[i])) for i in best])
        return out


class SentenceSimilarityPipeline(FeatureExtractionPipeline):
    """Cosine similarity of a source text with target texts, and top-k search over a corpus."""

    task = "sentence-similarity"

    def __call__(self, source: str | Sequence[str], targets: str | Sequence[str] | None = None,
                 **kwargs: Any) -> Any:
        """`sim(source, [t1, t2])` -> [cos, cos]; `sim([a1, a2], [b1, b2])` -> pairwise
        [cos(a1, b1), cos(a2, b2)]; `sim(a, b)` -> one float."""
        if targets is None:
            raise TypeError("sentence similarity needs targets: sim(source, targets)")
        sources, single_source = as_batch(source, "source")
        target_list, single_target = as_batch(targets, "target")
        if not (single_source or len(sources) == len(target_list)):
            raise DataError(f"{len(sources)} sources but {len(target_list)} targets; give one source, "
                            "or as many sources as targets (pairs)")
        if not target_list:
            return []
        a = FeatureExtractionPipeline.__call__(self, sources, **kwargs)  # one source: (1, H), broadcast
        b = FeatureExtractionPipeline.__call__(self, target_list, **kwargs)
        scores = (_normalise(a) * _normalise(b)).sum(-1)
        return float(scores[0]) if single_source and single_target else scores.astype(float).tolist()

    def index(self, corpus: Sequence[str], **kwargs: Any) -> EmbeddingIndex:
        """An `EmbeddingIndex` of `corpus` (save it with `.save(dir)`)."""
        texts, _ = as_batch(corpus, "corpus text")
        return EmbeddingIndex(FeatureExtractionPipeline.__call__(self, texts, **kwargs), texts)

    def search(self, query: str | Sequence[str], corpus: Sequence[str] | EmbeddingIndex | str | os.PathLike,
               top_k: int = 10, **kwargs: Any) -> Any:
        """The `top_k` corpus texts closest to the query by cosine: [{"corpus_id", "score",
        "text"}, ...], best first (a list of such lists for a list of queries). `corpus`: texts,
        an `EmbeddingIndex`, or the directory of a saved one."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k must be a positive int, got {top_k!r}")
        if isinstance(corpus, (str, os.PathLike)):
            corpus = EmbeddingIndex.load(corpus)
        elif not isinstance(corpus, EmbeddingIndex):
            corpus = self.index(corpus, **kwargs)
        queries, single = as_batch(query, "query")
        if not queries:
            return []
        hits = corpus.search(FeatureExtractionPipeline.__call__(self, queries, **kwargs), top_k)
        results = [[{"corpus_id": i, "score": s, "text": corpus.texts[i]} for i, s in row] for row in hits]
        return results[0] if single else results
