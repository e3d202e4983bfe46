"""Sentence embeddings and similarity pipelines.

    emb = nlp.pipeline("feature-extraction", model="runs/embed/model")
    emb(["今天天气很好", "明天会下雨吗"])          # (2, H) float32, L2-normalised
    sim = nlp.pipeline("sentence-similarity", model="runs/embed/model")
    sim("今天天气很好", ["天气不错", "我饿了"])       # [0.83, 0.12]: cosine per target
    sim.search("天气怎么样", corpus, top_k=5)       # [{"corpus_id", "score", "text"}, ...]
    rr = nlp.pipeline("text-ranking", model="runs/rerank-titles")
    sim.search("天气怎么样", corpus, top_k=5, rerank=rr, rerank_top_k=20)  # retrieve 20, rerank, keep 5
    index = sim.index(corpus); index.save("idx/")  # search a saved index later: sim.search(q, EmbeddingIndex.load("idx/"))
    emb.lexical_weights("今天天气很好", as_tokens=True)  # {"天": 0.21, ...}: a model with lexical weights

Long texts are cut into overlapping windows of `max_length` tokens; a text's vector is the mean
of its windows' pooled vectors weighted by their token counts (mean pooling over the whole
text where windows do not overlap), then normalised. An index keeps a row per window of a long
text instead, and a search scores the text by the mean of its best window's score and its
windows' mean score (`windows="max+mean"`; `windows="max"`: the best window alone, MaxP). A
text with no tokens (blank, or only characters the tokenizer drops: NUL, ZWSP, BOM, U+FE0F, a
lone combining mark) is an error naming it (an embedding of nothing would be the [CLS]/[SEP]
vector, the same for all of them: a silently wrong answer); `[]` gives an empty (0, H) array.

A model trained with lexical weights (config.json `lexical_weights: true`, heads.py) also gives
each text a sparse vector, {token id: weight}: per window the largest weight of each distinct
token, and over a long text's windows their mean weighted by token counts, as for its vector.
Its similarity pipeline then scores by the hybrid score the model was trained on, cosine +
lexical score (`scoring="hybrid"`, the default for it); `scoring="dense"` and
`scoring="lexical"` use one part alone. A model with bigram weights (`lexical_bigrams: true`)
adds each pair of adjacent tokens to the sparse vector under its bigram key (metrics.py);
`lexical_weights(as_tokens=True)` shows such a pair as its two tokens joined by a space.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nlp._common import ConfigError, DataError, atomic_write, did_you_mean
from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
from nlp.tasks.base_pipeline import MODEL_INPUTS, Pipeline, as_batch, check_unicode
from nlp.tasks.embedding.collate import TextGroupCollator
from nlp.tasks.embedding.prompts import PASSAGE, QUERY, Prompts, insert_prompt, prompt_ids
from nlp.tasks.embedding.rerank import check_rerank_weight, reranked_hits
from nlp.tasks.embedding.metrics import (SparseVector, lexical_pair_scores, lexical_scores, lexical_terms,
                                         pooled_sparse_vector, sparse_vector, split_key)

__all__ = ["FeatureExtractionPipeline", "SentenceSimilarityPipeline", "EmbeddingIndex", "SCORINGS", "WINDOW_SCORES"]

SCORINGS = ("hybrid", "dense", "lexical")
# How a text of several windows scores: "max+mean", the mean of its best window's score and of
# its windows' mean score (inews-titles dev MRR 0.8772 against 0.8642 for "max" and 0.8211 for
# the mean alone: docs/embeddings.md); "max", its best window's (MaxP). Equal for a short text.
WINDOW_SCORES = ("max+mean", "max")


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class FeatureExtractionPipeline(Pipeline):
    """Texts -> sentence vectors, (N, H) float32, normalised unless `normalize=False`."""

    task = "feature-extraction"
    head_class = ErnieForSentenceEmbedding
    on_tokenless = "error"  # the [CLS] [SEP] vector is no embedding of the text

    def _make_collator(self, multiple: int | None) -> Any:
        return TextGroupCollator(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    @property
    def prompts(self) -> Prompts:
        """The prompts the model declares (config.json `prompts`, `default_prompt_name`)."""
        return Prompts.from_config(self.config.extra)

    @property
    def has_lexical_weights(self) -> bool:
        """Whether the model gives lexical weights (a `token_weights` output)."""
        return bool(self.config.extra.get("lexical_weights", False))

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        if "token_weights" in out:
            pairs = out["bigram_weights"][j, :length] if "bigram_weights" in out else None
            return out["sentence_embedding"][j], out["token_weights"][j, :length], pairs
        return out["sentence_embedding"][j]

    def __call__(self, texts: str | Sequence[str], *, normalize: bool = True, truncate: bool = False,
                 stride: int | None = None, as_lists: bool = False, prompt_name: str | None = None) -> Any:
        """A (H,) vector for one text, (N, H) for a list (lists of floats with `as_lists`).

        `truncate`: embed only the first window of a long text (TEI's `truncate`); otherwise
        every window counts. `stride`: tokens shared by consecutive windows (default a quarter).
        `prompt_name`: which of the model's prompts goes before each text (prompts.py; None:
        its default one, if any)."""
        batch, single = as_batch(texts, "text")
        vectors, _ = self._encode(batch, single, truncate=truncate, stride=stride, normalize=normalize,
                                  prompt=self.prompts.text(prompt_name))
        out = vectors[0] if single else vectors
        return out.tolist() if as_lists else out

    def lexical_weights(self, texts: str | Sequence[str], *, truncate: bool = False, stride: int | None = None,
                        as_tokens: bool = False) -> Any:
        """Each text's sparse vector as a dict {key: weight} (token ids, and bigram keys for a
        model with them; with `as_tokens`, {token or "token token": weight}), heaviest first; one
        dict for one text. Needs a model with lexical weights."""
        self._need_lexical_weights()
        return self.encode(texts, truncate=truncate, stride=stride, as_tokens=as_tokens)[1]

    def encode(self, texts: str | Sequence[str], *, normalize: bool = True, truncate: bool = False,
               stride: int | None = None, as_tokens: bool = False,
               prompt_name: str | None = None) -> tuple[Any, Any]:
        """(vectors, lexical weights) in one pass: what `__call__` and `lexical_weights` give,
        the weights None for a model without them."""
        batch, single = as_batch(texts, "text")
        vectors, sparse = self._encode(batch, single, truncate=truncate, stride=stride, normalize=normalize,
                                       prompt=self.prompts.text(prompt_name))
        weights = None if sparse is None else [self._weights_dict(v, as_tokens) for v in sparse]
        if single:
            return vectors[0], None if weights is None else weights[0]
        return vectors, weights

    def _weights_dict(self, vector: SparseVector, as_tokens: bool) -> dict[Any, float]:
        ids, weights = vector
        order = np.argsort(-weights, kind="stable")
        keys: list[Any] = [int(i) for i in ids[order]]
        if as_tokens:  # one tokenizer call for every id of every key
            parts = [split_key(k) for k in keys]
            tokens = iter(self.tokenizer.convert_ids_to_tokens([i for part in parts for i in part]))
            keys = [" ".join(next(tokens) for _ in part) for part in parts]
        return {k: float(w) for k, w in zip(keys, weights[order])}

    def _need_lexical_weights(self) -> None:
        if not self.has_lexical_weights:
            raise ConfigError("this model has no lexical weights (its config.json lacks lexical_weights: true); "
                              "fine-tune one with model.config.lexical_weights=true (recipes/embedding-titles.yaml), "
                              "or use the sentence vectors alone")

    def _encode(self, texts: list[str], single: bool, *, truncate: bool, stride: int | None,
                normalize: bool = False, prompt: str = "") -> tuple[np.ndarray, list[SparseVector] | None]:
        """(N, H) pooled vectors (L2-normalised with `normalize`), and each text's sparse vector
        for a model with lexical weights (else None); `prompt` goes before every text."""
        windows = self._windows(texts, single, truncate=truncate, stride=stride, prompt=prompt)
        hidden = self.config.hidden_size
        sums = np.zeros((len(texts), hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        parts: list[list[tuple[np.ndarray, np.ndarray, float]]] = [[] for _ in texts]
        for ids, owner, vec, terms in windows:
            w = float(len(ids))
            sums[owner] += w * np.asarray(vec, dtype=np.float64)
            weights[owner] += w
            if terms is not None:
                parts[owner].append((*terms, w))
        vectors = (sums / np.maximum(weights, 1.0)[:, None]).astype(np.float32)
        if normalize:
            vectors = _normalise(vectors)
        if not self.has_lexical_weights:
            return vectors, None
        return vectors, [pooled_sparse_vector(p) for p in parts]

    def _windows(self, texts: list[str], single: bool, *, truncate: bool, stride: int | None,
                 prompt: str = "") -> list[tuple[list[int], int, np.ndarray, SparseVector | None]]:
        """Each window of each text, in text order: (token ids, the text's index, its pooled
        vector, its `lexical_terms` (keys, weights) or None). A text shorter than `max_length`
        is one window. `prompt` is put before the text, so its first window tokenizes it as
        the model was trained; every later window gets the prompt's tokens after its first
        special token (the windows are cut that much shorter to make room)."""
        check_unicode(texts, "text", single)
        self.check_tokens(texts, "text", single)
        if not texts:
            return []
        prompt_tokens = prompt_ids(self.tokenizer, prompt) if prompt and not truncate else []
        max_length = self.max_length - len(prompt_tokens)
        room = max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}"
                              + (f" and a prompt of {len(prompt_tokens)} tokens" if prompt_tokens else ""))
        if truncate:  # tokenize what the first window keeps, not the whole of a long text
            texts = self.kept_prefixes(texts, room)
        enc = self.tokenizer([prompt + t for t in texts], truncation=True, max_length=max_length, stride=stride,
                             return_overflowing_tokens=not truncate)
        n_rows = len(enc["input_ids"])
        owner = enc["overflow_to_sample_mapping"] if not truncate else list(range(n_rows))
        rows = [{k: enc[k][r] for k in MODEL_INPUTS if k in enc} for r in range(n_rows)]
        for r in range(1, n_rows) if prompt_tokens else ():
            if owner[r] == owner[r - 1]:  # a later window of the same text
                rows[r] = insert_prompt(rows[r], prompt_tokens)
        outputs = self._forward(rows)
        # padding is the pipeline's, so a row's tokens are all attended
        windows = []
        for row, text, out in zip(rows, owner, outputs):
            if isinstance(out, tuple):  # (vector, token weights, bigram weights or None)
                windows.append((row["input_ids"], int(text), out[0], lexical_terms(row["input_ids"], *out[1:])))
            else:
                windows.append((row["input_ids"], int(text), out, None))
        return windows


class EmbeddingIndex:
    """Normalised vectors of a corpus with its texts (and their sparse vectors, from a model with
    lexical weights), searchable and saved to a directory: ``vectors.npy`` + ``texts.json``
    (+ ``lexical.npz``: CSR arrays `indptr`, `ids`, `weights`; + ``owners.npy``); plain numpy
    and JSON, loaded without pickle.

    A row is a text, or with `owners` a window of one: `owners[r]` is the text of row r (texts in
    order, each with at least one row), and a text scores as the mean of its best window's score
    and its windows' mean score (`windows="max+mean"`, the default): a long document is found by
    the passage that answers the query, and ranks higher the more of it is about the query;
    `windows="max"` scores its best window alone (MaxP)."""

    def __init__(self, vectors: np.ndarray, texts: Sequence[str], lexical: Sequence[SparseVector] | None = None,
                 owners: Sequence[int] | np.ndarray | None = None) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        self.texts = list(texts)
        self.owners = None if owners is None else np.asarray(owners, dtype=np.int64)
        rows = len(self.texts) if self.owners is None else len(self.owners)
        if vectors.ndim != 2 or len(vectors) != rows:
            raise DataError(f"an index needs (rows, H) vectors for {rows} rows ({len(self.texts)} texts), "
                            f"got {vectors.shape}")
        if self.owners is not None:
            o = self.owners
            if o.ndim != 1 or (len(o) and (o[0] != 0 or o[-1] != len(self.texts) - 1 or np.any(np.diff(o) < 0)
                                           or np.any(np.diff(o) > 1))) or (not len(o) and self.texts):
                raise DataError(f"an index's owners must give each of its {len(self.texts)} texts one or more rows, "
                                "in text order")
            self._starts = np.flatnonzero(np.r_[True, np.diff(o) > 0]) if len(o) else o
            self._windows = np.diff(np.r_[self._starts, len(o)])  # rows (windows) of each text
        if lexical is not None and len(lexical) != rows:
            raise DataError(f"an index needs one sparse vector per row, got {len(lexical)} for {rows}")
        self.vectors = _normalise(vectors)
        self.lexical = None if lexical is None else list(lexical)

    def __len__(self) -> int:
        return len(self.texts)

    def save(self, directory: str | os.PathLike) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_write(directory / "vectors.npy", "wb") as f:
            np.save(f, self.vectors, allow_pickle=False)
        if self.lexical is not None:
            indptr = np.cumsum([0] + [len(ids) for ids, _ in self.lexical]).astype(np.int64)
            ids = np.concatenate([i for i, _ in self.lexical] or [np.zeros(0, np.int64)]).astype(np.int64)
            weights = np.concatenate([w for _, w in self.lexical] or [np.zeros(0, np.float32)]).astype(np.float32)
            with atomic_write(directory / "lexical.npz", "wb") as f:
                np.savez(f, indptr=indptr, ids=ids, weights=weights)
        if self.owners is not None:
            with atomic_write(directory / "owners.npy", "wb") as f:
                np.save(f, self.owners, allow_pickle=False)
        for name, kept in (("lexical.npz", self.lexical), ("owners.npy", self.owners)):
            if kept is None and (directory / name).is_file():
                (directory / name).unlink()  # an earlier index's, saved here by this class: stale now
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
            owners = np.load(directory / "owners.npy", allow_pickle=False) if (directory / "owners.npy").is_file() else None
        except (ValueError, OSError) as err:
            raise DataError(f"{directory}: unreadable embedding index ({err})") from None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DataError(f"{directory}/texts.json must be a JSON list of strings")
        if owners is not None and (owners.ndim != 1 or not np.issubdtype(owners.dtype, np.integer)):
            raise DataError(f"{directory}/owners.npy must be a 1-D array of integers, got {owners.dtype} {owners.shape}")
        rows = len(texts) if owners is None else len(owners)
        lexical = _load_lexical(directory / "lexical.npz", rows) if (directory / "lexical.npz").is_file() else None
        try:
            return cls(vectors, texts, lexical, owners)
        except DataError as err:
            raise DataError(f"{directory}: {err}") from None

    def search(self, queries: np.ndarray, top_k: int, *, query_lexical: Sequence[SparseVector] | None = None,
               scoring: str = "dense", windows: str = "max+mean") -> list[list[tuple[int, float]]]:
        """Per query, the (text, score) of the `top_k` best texts, best first. `scoring`:
        "dense" (cosine), "lexical" (lexical score) or "hybrid" (their sum); the last two need
        the queries' sparse vectors and an index that holds the corpus's. A text of several
        rows (windows) scores by `windows` (WINDOW_SCORES): "max+mean", (best row + mean of its
        rows) / 2, or "max", its best row."""
        if scoring not in SCORINGS:
            raise ConfigError(f"scoring={scoring!r} is not one of {SCORINGS}")
        _check_windows(windows)
        if not len(self.texts):
            return [[] for _ in range(len(queries))]
        if scoring == "lexical":
            scores = np.zeros((len(queries), len(self.vectors)), dtype=np.float32)
        else:
            scores = _normalise(np.asarray(queries, dtype=np.float32)) @ self.vectors.T  # (Q, rows)
        if scoring != "dense":
            if self.lexical is None:
                raise ConfigError(f"scoring={scoring!r} needs an index with lexical weights; this one has vectors "
                                  "only (it was made with a model without them): use scoring='dense', or index the "
                                  "corpus again with a model that has lexical weights")
            if query_lexical is None:
                raise ConfigError(f"scoring={scoring!r} needs the queries' sparse vectors (query_lexical)")
            scores = scores + lexical_scores(query_lexical, self.lexical)
        if self.owners is not None:  # (Q, rows) -> (Q, texts)
            best = np.maximum.reduceat(scores, self._starts, axis=1)
            if windows == "max":
                scores = best
            else:
                scores = (best + np.add.reduceat(scores, self._starts, axis=1) / self._windows) / 2
        k = min(top_k, scores.shape[1])
        out = []
        for row in scores:
            best = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            best = best[np.argsort(-row[best], kind="stable")]
            out.append([(int(i), float(row[i])) for i in best])
        return out


def _check_windows(windows: str) -> None:
    if windows not in WINDOW_SCORES:
        raise ConfigError(f"windows={windows!r}: choose one of {', '.join(WINDOW_SCORES)} (how a long text's windows "
                          f"score it).{did_you_mean(str(windows), WINDOW_SCORES)}")


def _load_lexical(path: Path, n_texts: int) -> list[SparseVector]:
    """The sparse vectors of a saved index's lexical.npz, checked against its rows."""
    try:
        with np.load(path, allow_pickle=False) as data:
            indptr, ids, weights = (np.asarray(data[k]) for k in ("indptr", "ids", "weights"))
    except (ValueError, OSError, KeyError) as err:
        raise DataError(f"{path}: unreadable lexical weights ({err})") from None
    if (indptr.ndim != 1 or len(indptr) != n_texts + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0)
            or indptr[-1] != len(ids) or ids.shape != weights.shape or ids.ndim != 1
            or (len(ids) and ids.min() < 0) or not np.isfinite(weights).all()):
        raise DataError(f"{path}: the lexical weights do not fit the index's {n_texts} rows (indptr of "
                        f"{len(indptr)} entries for {len(ids)} ids and {len(weights)} weights); save the index again")
    ids, weights = ids.astype(np.int64), weights.astype(np.float32)
    return [(ids[a:b], weights[a:b]) for a, b in zip(indptr[:-1], indptr[1:])]


class SentenceSimilarityPipeline(FeatureExtractionPipeline):
    """Similarity of a source text with target texts, and top-k search over a corpus: by cosine,
    or for a model with lexical weights by the hybrid score (cosine + lexical score)."""

    task = "sentence-similarity"

    def _scoring(self, scoring: str | None) -> str:
        if scoring is None:
            return "hybrid" if self.has_lexical_weights else "dense"
        if scoring not in SCORINGS:
            raise ConfigError(f"scoring={scoring!r} is not one of {SCORINGS}")
        if scoring != "dense":
            self._need_lexical_weights()
        return scoring

    def _texts(self, texts: list[str], single: bool, scoring: str, *, truncate: bool = False,
               stride: int | None = None, prompt: str = "") -> tuple[np.ndarray, list[SparseVector] | None]:
        vectors, sparse = self._encode(texts, single, truncate=truncate, stride=stride, normalize=True, prompt=prompt)
        return vectors, (sparse if scoring != "dense" else None)

    def __call__(self, source: str | Sequence[str], targets: str | Sequence[str] | None = None, *,
                 scoring: str | None = None, truncate: bool = False, stride: int | None = None) -> Any:
        """`sim(source, [t1, t2])` -> [score, score]; `sim([a1, a2], [b1, b2])` -> pairwise
        [score(a1, b1), score(a2, b2)]; `sim(a, b)` -> one float. The score is the cosine, or
        with lexical weights cosine + lexical score (`scoring`: "hybrid", "dense", "lexical")."""
        if targets is None:
            raise TypeError("sentence similarity needs targets: sim(source, targets)")
        scoring = self._scoring(scoring)
        sources, single_source = as_batch(source, "source")
        target_list, single_target = as_batch(targets, "target")
        if not (single_source or len(sources) == len(target_list)):
            raise DataError(f"{len(sources)} sources but {len(target_list)} targets; give one source, "
                            "or as many sources as targets (pairs)")
        if not target_list:
            return []
        prompt = self.prompts.text(None)  # a symmetric comparison: both sides get the default prompt
        a, a_sparse = self._texts(sources, single_source, scoring, truncate=truncate, stride=stride, prompt=prompt)
        b, b_sparse = self._texts(target_list, single_target, scoring, truncate=truncate, stride=stride, prompt=prompt)
        scores = np.zeros(len(target_list)) if scoring == "lexical" else (a * b).sum(-1)  # one source: broadcast
        if scoring != "dense":
            firsts = a_sparse * len(target_list) if single_source else a_sparse
            scores = scores + lexical_pair_scores(firsts, b_sparse)
        return float(scores[0]) if single_source and single_target else scores.astype(float).tolist()

    def index(self, corpus: Sequence[str], *, truncate: bool = False, stride: int | None = None) -> EmbeddingIndex:
        """An `EmbeddingIndex` of `corpus` (with its sparse vectors for a model with lexical
        weights; save it with `.save(dir)`). A text longer than `max_length` tokens keeps a row
        per window and is searched by its best one; `truncate=True` keeps its first window only."""
        texts, _ = as_batch(corpus, "corpus text")
        windows = self._windows(texts, False, truncate=truncate, stride=stride, prompt=self.prompts.for_role(PASSAGE))
        hidden = self.config.hidden_size
        vectors = np.stack([w[2] for w in windows]) if windows else np.zeros((0, hidden), dtype=np.float32)
        sparse = None
        if self.has_lexical_weights:
            sparse = [sparse_vector(*terms) for _, _, _, terms in windows]
        owners = [w[1] for w in windows]
        one_row_each = len(owners) == len(texts)  # no long text: one row per text, no owners file
        return EmbeddingIndex(vectors, texts, sparse, None if one_row_each else owners)

    def search(self, query: str | Sequence[str], corpus: Sequence[str] | EmbeddingIndex | str | os.PathLike,
               top_k: int = 10, *, scoring: str | None = None, truncate: bool = False,
               stride: int | None = None, windows: str = "max+mean", rerank: Any = None,
               rerank_top_k: int | None = None, rerank_weight: float | None = None) -> Any:
        """The `top_k` corpus texts closest to the query: [{"corpus_id", "score", "text"}, ...],
        best first (a list of such lists for a list of queries). `corpus`: texts, an
        `EmbeddingIndex`, or the directory of a saved one. `windows`: how a long text's windows
        score it, "max+mean" (the mean of its best window's score and its windows' mean) or
        "max" (its best window's); see EmbeddingIndex.

        `rerank`: retrieve then rerank. The `rerank_top_k` best texts (default: max(top_k, 20))
        are scored again by `rerank`, a callable (query, passages) -> [{"index", "score"}, ...]
        best first (a text-ranking pipeline: nlp.pipeline("text-ranking", model=...)), and the
        `top_k` best by its score are returned; each hit keeps its first-stage score as
        "retrieval_score". A text below the first `rerank_top_k` is never returned.
        `rerank_weight`: order them instead by the first-stage and reranker scores fused,
        z(retrieval) + rerank_weight * z(rerank) over each query's candidates ("score" is the
        fused score, "rerank_score" the reranker's, a text-ranking pipeline's logit): a reranker
        weaker than its first stage alone can still add to it (rerank.py; choose the weight on a
        dev split)."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"top_k must be a positive int, got {top_k!r}")
        if rerank is not None:
            if not callable(rerank):
                raise ConfigError(f"rerank must be a callable (query, passages) -> ranking, such as "
                                  f"nlp.pipeline('text-ranking', model=...); got {type(rerank).__name__}")
            depth = max(top_k, 20) if rerank_top_k is None else rerank_top_k
            if isinstance(depth, bool) or not isinstance(depth, int) or depth < top_k:
                raise ConfigError(f"rerank_top_k must be an int >= top_k ({top_k}), got {rerank_top_k!r}")
            weight = check_rerank_weight(rerank_weight)
            hits = self.search(query, corpus, depth, scoring=scoring, truncate=truncate, stride=stride,
                               windows=windows)
            return reranked_hits(rerank, query, hits, top_k, weight)
        for name, value in (("rerank_top_k", rerank_top_k), ("rerank_weight", rerank_weight)):
            if value is not None:
                raise ConfigError(f"{name} is given without rerank; pass rerank=a text-ranking pipeline")
        scoring = self._scoring(scoring)
        _check_windows(windows)  # before the corpus is indexed
        if isinstance(corpus, (str, os.PathLike)):
            corpus = EmbeddingIndex.load(corpus)
        elif not isinstance(corpus, EmbeddingIndex):
            corpus = self.index(corpus, truncate=truncate, stride=stride)
        queries, single = as_batch(query, "query")
        if not queries:
            return []
        vectors, sparse = self._texts(queries, single, scoring, truncate=truncate, stride=stride,
                                      prompt=self.prompts.for_role(QUERY))
        hits = corpus.search(vectors, top_k, query_lexical=sparse, scoring=scoring, windows=windows)
        results = [[{"corpus_id": i, "score": s, "text": corpus.texts[i]} for i, s in row] for row in hits]
        return results[0] if single else results
