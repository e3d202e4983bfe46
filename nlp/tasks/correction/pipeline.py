"""The text-correction pipeline: each text's corrections, in Taskflow's shape, with offsets.

    fix = nlp.pipeline("text-correction", model="runs/correction-csc/model")
    fix("他再也不会这扬。")
    # {"source": "他再也不会这扬。", "target": "他再也不会这样。",
    #  "errors": [{"position": 6, "correction": {"扬": "样"}, "start": 6, "end": 7, "score": 0.68}]}

`position` (PaddleNLP Taskflow's key) and `start`/`end` are offsets into the text given, in
Python string indices (code points: an emoji is one, or several for a sequence joined by ZWJ),
so `text[start:end]` is the wrong character. What is never changed: anything but a Chinese
character (digits, Latin letters, punctuation, full-width forms, emoji), a character the
tokenizer cannot read ([UNK]: a rare character is more likely a name than a typo), and every
occurrence of a term in `protected` (names, brand names: "张爱文,拼多多"). A character is changed
to the model's best character when that is another Chinese character with probability at least
`threshold`; with `same_sound`, only when the two characters share a toneless pinyin reading
(pypinyin, heteronyms included): fewer false alarms, and no similar-shape error fixed. Long texts
run as overlapping windows; each character takes the prediction of the
window where it is most central. Per batch the pipeline keeps each position's best id and two
probabilities, never the vocabulary-sized scores.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from nlp._common import ConfigError
from nlp._extras import require
from nlp.tasks.base_pipeline import Pipeline, as_batch, check_unicode
from nlp.tasks.char_windows import CharacterRows, TokenCache
from nlp.tasks.correction.heads import ErnieForSpellingCorrection
from nlp.tasks.correction.resources import is_chinese_char
from nlp.tasks.model_io import MODEL_INPUTS
from nlp.tasks.ner.preprocess import visible_characters

__all__ = ["TextCorrectionPipeline", "DEFAULT_THRESHOLD", "protected_positions", "parse_protected", "readings",
           "reduce_scores"]

# the probability a correction needs: the lowest at which the shipped model changes no correct
# sentence of csc-synthetic's dev split (benchmarks/correction.py --split dev --sweep ...; never
# chosen on SIGHAN). A false alarm costs a user more than a miss; lower it to recall more errors
# (at 0.2 the dev F1 is best, and 1.8% of SIGHAN-15's correct sentences get changed)
DEFAULT_THRESHOLD = 0.9
_SEPARATORS = re.compile(r"[,，、;；\s]+")


def parse_protected(protected: str | Sequence[str] | None) -> list[str]:
    """The protected terms: a list of strings, or one string of them separated by commas, 、,
    semicolons or white space."""
    if protected is None:
        return []
    if not isinstance(protected, (str, Sequence)):
        raise TypeError(f"protected must be a string of terms separated by commas, or a list of strings; "
                        f"got {type(protected).__name__} {protected!r}")
    terms = _SEPARATORS.split(protected) if isinstance(protected, str) else list(protected)
    for t in terms:
        if not isinstance(t, str):
            raise TypeError(f"protected terms must be strings, got {type(t).__name__} {t!r}")
    return [t for t in terms if t]


@functools.lru_cache(maxsize=65536)
def readings(char: str) -> frozenset[str]:
    """The toneless pinyin readings of a character (pypinyin, heteronyms included)."""
    from pypinyin import Style, pinyin

    return frozenset(pinyin(char, style=Style.NORMAL, heteronym=True)[0])


def protected_positions(text: str, terms: Sequence[str]) -> set[int]:
    """The offsets of `text` inside an occurrence of any of `terms` (overlapping ones too)."""
    out: set[int] = set()
    for term in terms:
        start = text.find(term)
        while start >= 0:
            out.update(range(start, start + len(term)))
            start = text.find(term, start + 1)
    return out


def reduce_scores(logits: np.ndarray, input_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(best id, its probability, the input token's probability) per position of (..., T, V)
    logits: what a correction decision needs, O(T) instead of O(T x V)."""
    logits = logits.astype(np.float32, copy=False)
    top = logits.max(-1, keepdims=True)
    z = np.log(np.exp(logits - top).sum(-1))  # (..., T): log of the partition, shifted by top
    best = logits.argmax(-1)
    own = np.take_along_axis(logits, input_ids[..., None], -1)[..., 0]
    return best, np.exp(-z), np.exp(own - top[..., 0] - z)


class TextCorrectionPipeline(Pipeline):
    """Spelling corrections per text ({"source", "target", "errors"}), over texts of any length."""

    task = "text-correction"
    head_class = ErnieForSpellingCorrection

    def __call__(self, texts: str | Sequence[str], *, threshold: float = DEFAULT_THRESHOLD,
                 protected: str | Sequence[str] | None = None, same_sound: bool = False,
                 stride: int | None = None) -> dict | list[dict]:
        batch, single = as_batch(texts, "text")
        check_unicode(batch, "text", single)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if not isinstance(same_sound, bool):  # "no" would read as true
            raise TypeError(f"same_sound must be True or False; got {same_sound!r}")
        terms = parse_protected(protected)
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}")
        visible = [visible_characters(t) for t in batch]
        best = [_Best(len(offsets)) for offsets, _ in visible]
        todo = [i for i, (offsets, _) in enumerate(visible) if offsets]
        if todo:
            self._score_characters([visible[i][1] for i in todo], [best[i] for i in todo], stride)
        if same_sound:
            require("pypinyin", "same_sound=True (the readings of characters)", extra="correction")
        results = [self._corrections(text, offsets, seen, threshold, terms, same_sound)
                   for text, (offsets, _), seen in zip(batch, visible, best)]
        return results[0] if single else results

    def _corrections(self, text: str, offsets: list[int], seen: _Best, threshold: float,
                     terms: list[str], same_sound: bool) -> dict[str, Any]:
        chars = list(text)
        errors = []
        fenced = protected_positions(text, terms) if terms else set()
        change = (seen.centrality >= 0) & (seen.best != seen.input_id) & (seen.p_best >= threshold)
        for j in np.flatnonzero(change).tolist():
            at = offsets[j]
            wrong, right = text[at], self._chinese[int(seen.best[j])]
            if not right or not is_chinese_char(wrong) or at in fenced or seen.input_id[j] == self._unk:
                continue
            if same_sound and not readings(wrong) & readings(right):
                continue
            chars[at] = right
            errors.append({"position": at, "correction": {wrong: right}, "start": at, "end": at + 1,
                           "score": float(seen.p_best[j])})
        return {"source": text, "target": "".join(chars), "errors": errors}

    def _score_characters(self, words: list[list[str]], best: list[_Best], stride: int) -> None:
        rows = CharacterRows.of(self.tokenizer, words, max_length=self.max_length, stride=stride,
                                cache=self._token_cache)
        windows = rows.windows()
        keep = [r for r, w in enumerate(windows) if len(w.positions)]
        if not keep:
            return
        reduced = self._forward([rows.features[r] for r in keep])
        for (ids, top, p_top, _), r in zip(reduced, keep):
            w = windows[r]
            best[rows.text[r]].update(w.chars, w.centrality, ids[w.positions], top[w.positions], p_top[w.positions])

    def _forward(self, features: list[dict[str, list]]) -> list[Any]:
        """Per feature (input ids, best ids, best probabilities, input probabilities), each of the
        row's length: every batch's vocabulary-sized logits are reduced before the next runs."""
        outs: list[Any] = [None] * len(features)
        order = sorted(range(len(features)), key=lambda i: self._length(features[i]))
        for i in range(0, len(order), self.batch_size):
            chosen = order[i:i + self.batch_size]
            chunk = [{k: features[r][k] for k in MODEL_INPUTS if k in features[r]} for r in chosen]
            batch = {k: v.numpy().astype(np.int64, copy=False) for k, v in self._collate(chunk).items()}
            ids = batch["input_ids"]
            top, p_top, p_own = reduce_scores(self.backend(batch)["logits"], ids)
            for j, r in enumerate(chosen):
                n = self._length(features[r])
                outs[r] = (ids[j, :n], top[j, :n], p_top[j, :n], p_own[j, :n])
        return outs

    @functools.cached_property
    def _chinese(self) -> list[str]:
        """Per token id, its character where the token is one Chinese character, else ""."""
        out = [""] * max(self.tokenizer.vocab_size, self.config.vocab_size)
        for token, i in self.tokenizer.get_vocab().items():
            if i < len(out) and is_chinese_char(token):
                out[i] = token
        return out

    @functools.cached_property
    def _unk(self) -> int:
        return self.tokenizer.unk_token_id

    @functools.cached_property
    def _token_cache(self) -> TokenCache:
        return TokenCache(self.tokenizer)


class _Best:
    """Per character of one text, what the most central window said: the input token id, the
    best token id and its probability (centrality -1: no window saw the character)."""

    __slots__ = ("centrality", "input_id", "best", "p_best")

    def __init__(self, n: int) -> None:
        self.centrality = np.full(n, -1, dtype=np.int64)
        self.input_id = np.full(n, -1, dtype=np.int64)
        self.best = np.full(n, -1, dtype=np.int64)
        self.p_best = np.zeros(n, dtype=np.float32)

    def update(self, chars: np.ndarray, centrality: np.ndarray, input_ids: np.ndarray, best: np.ndarray,
               p_best: np.ndarray) -> None:
        better = centrality > self.centrality[chars]
        c = chars[better]
        self.centrality[c], self.input_id[c] = centrality[better], input_ids[better]
        self.best[c], self.p_best[c] = best[better], p_best[better]
