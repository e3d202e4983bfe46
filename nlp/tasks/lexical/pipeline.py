"""The lexical pipelines: words, POS and entities with character offsets, over texts of any length.

    lac = nlp.pipeline("lexical-analysis")          # the shipped ernie-tiny-zh-lexical
    lac("江泽民在北京发表讲话")
    # {"words": [{"word": "江", "start": 0, "end": 1, "pos": "nr"}, ...],
    #  "entities": [{"type": "PER", "text": "江泽民", "start": 0, "end": 3}, {"type": "LOC", ...}]}
    nlp.pipeline("pos-tagging")("...")          # [{"word", "start", "end", "pos"}, ...]
    nlp.pipeline("word-segmentation")("...")    # [{"word", "start", "end"}, ...]

How a text is read: each character that is not white space is fed to the model as a word of its
own (the NER alignment, nlp/tasks/ner/preprocess.py); a text longer than one window runs as
overlapping windows (`stride` tokens shared), all windows of all texts batched together, and each
character takes its scores from the window where it has the most context on both sides. The
whole text is then decoded at once (Viterbi under the B/I/E/S x POS constraints, or the model's
CRF), so a word is never cut where two windows meet and no character is lost or doubled.

Offsets index the text as given: ``text[w["start"]:w["end"]] == w["word"]``. White space is in
no word and ends the word before it; every other character (emoji, Latin, digits, full-width
forms, zero-width characters) is in exactly one word (`nlp.tasks.lexical.tags.words_from_tags`),
except in a text with no tokens at all (only characters the tokenizer drops, as ZWSP or NUL),
which has no words, as a blank text has none.
User dictionaries: nlp/tasks/lexical/userdict.py. A model directory that holds a word lexicon
(lexicon.tsv, nlp/tasks/lexical/lexicon.py) is decoded with it (`lexicon=False`: without;
`lexicon=PATH` or a `WordLexicon`: another one).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlp._common import ConfigError
from nlp.tasks.base_pipeline import Pipeline, as_batch, check_unicode
from nlp.tasks.char_windows import CharacterRows, TokenCache
from nlp.tasks.lexical.heads import ErnieForLexicalAnalysis
from nlp.tasks.lexical.lexicon import LEXICON_FILE, WordLexicon
from nlp.tasks.lexical.lexicon_decode import LexicalTagIndex, decode_with_lexicon
from nlp.tasks.lexical.tags import (
    POSITIONS,
    SYMBOL_POS,
    Word,
    entities_from_words,
    words_from_tag_ids,
    words_from_tags,
)
from nlp.tasks.lexical.userdict import UserDictionary, UserDictSource
from nlp.tasks.ner.crf import crf_scores
from nlp.tasks.ner.heads import decode_constrained_rows, decode_tags
from nlp.tasks.ner.preprocess import visible_characters
from nlp.tasks.unreadable import UnreadableSymbols, pin_rows

__all__ = ["LexicalAnalysisPipeline", "PosTaggingPipeline", "SegmentationPipeline"]

_DECODE_TEXTS = 64  # texts decoded together (padded to the longest of them) by the general decoder


class LexicalAnalysisPipeline(Pipeline):
    """Per text ``{"words": [{"word", "start", "end", "pos"}], "entities": [{"type", "text", "start", "end"}]}``."""

    task = "lexical-analysis"
    head_class = ErnieForLexicalAnalysis

    def __init__(self, model: Any, tokenizer: Any = None, *, user_dict: UserDictSource = None,
                 lexicon: WordLexicon | str | os.PathLike | bool | None = None, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        id2label = self.config.id2label or {}
        names = [id2label.get(i) for i in range(self.config.num_labels)]
        bad = [n for n in names if not isinstance(n, str) or n[:2] not in {f"{p}-" for p in POSITIONS} or len(n) < 3]
        if bad:
            raise ConfigError(f"{self.task!r} needs a model whose labels are B-/I-/E-/S-POS tags (a lexical-analysis "
                              f"model); this one has {names[:6]}... (e.g. {bad[0]!r})")
        self._names = names
        self._pos_of = [n[2:] for n in names]  # label id -> POS
        self._label_ids = {(n[0], n[2:]): i for i, n in enumerate(names)}  # (B/I/E/S, POS) -> label id
        self.user_dict = UserDictionary.load(user_dict)
        self.user_dict.require_tags(dict.fromkeys(self._pos_of))
        self.lexicon = self._load_lexicon(lexicon, model, tokenizer)
        self._lexicon_tags = LexicalTagIndex.of(self._names) if self.lexicon is not None else None

    def _load_lexicon(self, lexicon: Any, model: Any, tokenizer: Any) -> WordLexicon | None:
        """`lexicon`: None (the model directory's lexicon.tsv, if it holds one), False (none), a
        path, or a WordLexicon."""
        if lexicon is None:
            home = next((Path(d) for d in (model, tokenizer) if isinstance(d, (str, os.PathLike))), None)
            lexicon = home / LEXICON_FILE if home is not None and (home / LEXICON_FILE).is_file() else False
        if lexicon is False:
            return None
        if isinstance(lexicon, (str, os.PathLike)):
            lexicon = WordLexicon.load(lexicon)
        if not isinstance(lexicon, WordLexicon):
            raise ConfigError(f"lexicon must be a path to a lexicon.tsv, a WordLexicon, False or None; "
                              f"got {type(lexicon).__name__} {lexicon!r:.60}")
        if crf_scores(self.backend.decoding) is not None:
            raise ConfigError("a word lexicon adds its bonus in the constrained decoding of a model without a CRF; "
                              "this model decodes with its CRF. Pass lexicon=False")
        if LexicalTagIndex.of(self._names) is None:
            raise ConfigError("a word lexicon needs B-, I-, E- and S- tags for every POS of the model's labels")
        return lexicon

    def add_word(self, word: str, pos: str | None = None) -> None:
        """Add a user word (kept whole; `pos` forces its part of speech)."""
        self.user_dict.add(word, pos)

    def __call__(self, texts: str | Sequence[str], *, stride: int | None = None) -> Any:
        batch, single = as_batch(texts, "text")
        check_unicode(batch, "text", single)
        results = [self._shape(text, words) for text, words in zip(batch, self.analyse(batch, stride=stride))]
        return results[0] if single else results

    def _shape(self, text: str, words: list[Word]) -> Any:
        return {"words": [{"word": text[s:e], "start": s, "end": e, "pos": p} for s, e, p in words],
                "entities": [{"type": t, "text": text[s:e], "start": s, "end": e}
                             for t, s, e in entities_from_words(words)]}

    # ------------------------------------------------------------------ the analysis

    def analyse(self, texts: list[str], *, stride: int | None = None) -> list[list[Word]]:
        """The words ``(start, end, pos)`` of each text, user dictionary applied."""
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if isinstance(stride, bool) or not isinstance(stride, int) or not 0 <= stride < room:
            raise ConfigError(f"stride={stride!r} must be an int in [0, {room}) for max_length={self.max_length}")
        visible = [visible_characters(t) for t in texts]  # (offsets, characters): each one a word
        emissions = self._emissions([characters for _, characters in visible], stride)
        self._pin_symbols(emissions, visible)
        tags = self._decode(emissions, visible)
        out = []
        for text, (positions, _), em, ids in zip(texts, visible, emissions, tags):
            if len(positions) == len(text) and em[1].all():  # no white space, every character tagged
                words = words_from_tag_ids(np.asarray(ids, dtype=np.int64), self._names)
            else:
                words = words_from_tags(text, self._char_tags(len(text), positions, em[1], ids))
            if len(self.user_dict):
                words = self._apply_user_dict(text, words, positions, em)
            if not em[1].any():  # no tokens (as a blank text): no words, not a guess per character
                words = []
            out.append(words)
        return out

    def _pin_symbols(self, emissions: list[tuple[np.ndarray, np.ndarray]],
                     visible: list[tuple[list[int], list[str]]]) -> None:
        """An unreadable symbol is a word of its own, of POS w (nlp/tasks/unreadable.py): its
        scores pinned to S-w, for a label set that has it."""
        label = self._label_ids.get(("S", SYMBOL_POS))
        if label is None:
            return
        for (scores, _), (_, characters) in zip(emissions, visible):
            where = self._symbols.mask(characters)
            if where is not None:
                pin_rows(scores, where, label)

    def _char_tags(self, n: int, positions: list[int], tagged: np.ndarray, ids: list[int]) -> list[str | None]:
        """One tag name (or None: untagged, or white space) per character of a text of `n`."""
        per_char: list[str | None] = [None] * n
        where = positions if tagged.all() else [positions[j] for j in np.flatnonzero(tagged).tolist()]
        for i, tag in zip(where, ids):
            per_char[i] = self._names[tag]
        return per_char

    def _emissions(self, texts: list[list[str]], stride: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, (scores (n_chars, L), tagged (n_chars,) bool): each character's logits from
        the window where it is most central; `tagged` False where no window has a token for it."""
        L = self.config.num_labels
        out = [(np.zeros((len(t), L), np.float32), np.zeros(len(t), bool)) for t in texts]
        todo = [k for k, t in enumerate(texts) if t]
        if not todo:
            return out
        batch = CharacterRows.of(self.tokenizer, [texts[k] for k in todo], max_length=self.max_length,
                                 stride=stride, cache=self._token_cache)
        windows = batch.windows()
        rows = [r for r, w in enumerate(windows) if len(w.positions)]
        if not rows:
            return out
        logits = self._forward([batch.features[r] for r in rows])
        centrality = [np.full(len(texts[k]), -1, dtype=np.int64) for k in todo]  # of the window each char came from
        for lg, r in zip(logits, rows):
            k, window = batch.text[r], windows[r]
            scores, tagged = out[todo[k]]
            better = window.centrality > centrality[k][window.chars]  # strictly: the first window wins ties
            chars = window.chars[better]
            centrality[k][chars] = window.centrality[better]
            scores[chars] = lg[window.positions[better]]
            tagged[chars] = True
        return out

    def _decode(self, emissions: list[tuple[np.ndarray, np.ndarray]],
                visible: list[tuple[list[int], list[str]]]) -> list[list[int]]:
        """The best well-formed tag ids of each text's tagged characters: with a word lexicon by
        `decode_with_lexicon`; else without a CRF all texts at once in O(T*K)
        (`decode_constrained_rows`), else (or where that does not apply) texts of similar length
        padded together through `decode_tags`."""
        if self.lexicon is not None:
            return self._decode_with_lexicon(emissions, visible)
        if crf_scores(self.backend.decoding) is None:
            rows = [em if tagged.all() else em[tagged] for em, tagged in emissions]
            paths = decode_constrained_rows(rows, self.config.id2label)
            if paths is not None:
                return paths
        return self._decode_padded(emissions)

    def _decode_with_lexicon(self, emissions: list[tuple[np.ndarray, np.ndarray]],
                             visible: list[tuple[list[int], list[str]]]) -> list[list[int]]:
        """Each text's tagged characters decoded with the lexicon's bonus on the words it finds in
        them (a word only where its characters stand side by side in the text)."""
        rows, matches = [], []
        fold = self.tokenizer.input_fold  # the lexicon's words are written as the model reads them
        for (em, tagged), (positions, characters) in zip(emissions, visible):
            if not tagged.all():
                keep = np.flatnonzero(tagged)
                em, positions, characters = em[keep], [positions[j] for j in keep], [characters[j] for j in keep]
            if fold is not None:
                characters = "".join(characters).translate(fold)
            starts, ends, bonus = self.lexicon.find(characters)
            if len(starts) and positions and positions[-1] - positions[0] != len(positions) - 1:  # a gap somewhere
                at = np.asarray(positions)
                whole = at[ends - 1] - at[starts] == ends - 1 - starts
                starts, ends, bonus = starts[whole], ends[whole], bonus[whole]
            rows.append(np.asarray(em, dtype=np.float32))
            matches.append((starts, ends, bonus))
        if not rows:
            return []
        logp = torch.log_softmax(torch.from_numpy(np.concatenate(rows)), -1).numpy()  # every row at once
        return decode_with_lexicon(logp, [len(r) for r in rows], matches, self._lexicon_tags)

    def _decode_padded(self, emissions: list[tuple[np.ndarray, np.ndarray]]) -> list[list[int]]:
        crf = crf_scores(self.backend.decoding)
        out: list[list[int]] = [[] for _ in emissions]
        order = sorted((k for k, (_, m) in enumerate(emissions) if m.any()), key=lambda k: len(emissions[k][0]))
        for i in range(0, len(order), _DECODE_TEXTS):
            group = order[i:i + _DECODE_TEXTS]
            T = max(len(emissions[k][0]) for k in group)
            scores = torch.zeros((len(group), T, self.config.num_labels))
            mask = torch.zeros((len(group), T), dtype=torch.bool)
            for j, k in enumerate(group):
                em, tagged = emissions[k]
                scores[j, :len(em)] = torch.from_numpy(em)
                mask[j, :len(em)] = torch.from_numpy(tagged)
            for k, path in zip(group, decode_tags(scores, mask, self.config.id2label, crf=crf)):
                out[k] = path
        return out

    def _apply_user_dict(self, text: str, words: list[Word], positions: list[int],
                         emissions: tuple[np.ndarray, np.ndarray]) -> list[Word]:
        """Each user-word match as one word; model words outside the matches unchanged, a word that
        straddles a match's edge cut back to its characters outside it."""
        matches = self.user_dict.find(text)
        if not matches:
            return words
        index = {c: j for j, c in enumerate(positions)}  # text offset -> row of the emissions
        out = _outside(words, matches)
        for ms, me, pos in matches:
            out.append((ms, me, pos if pos is not None else self._best_pos(ms, me, index, emissions)))
        return sorted(out)

    def _best_pos(self, start: int, end: int, index: dict[int, int], emissions: tuple[np.ndarray, np.ndarray]) -> str:
        """The POS whose B I.. E (or S) tags score best over the tagged characters of text[start:end]."""
        scores, tagged = emissions
        rows = [index[c] for c in range(start, end) if c in index and tagged[index[c]]]
        if not rows:
            return SYMBOL_POS
        logp = torch.log_softmax(torch.from_numpy(scores[rows]), dim=-1).numpy()  # (n, L)
        want = ["S"] if len(rows) == 1 else ["B", *["I"] * (len(rows) - 2), "E"]
        pos_tags, ids = self._pos_table
        total = np.zeros(len(pos_tags), dtype=np.float32)
        for j, prefix in enumerate(want):  # one character at a time: the float32 sums of a loop over POS
            total += logp[j, ids[prefix]]
        total[np.isnan(total)] = -np.inf
        best = int(total.argmax())  # the first POS of the best score
        return pos_tags[best] if total[best] > -np.inf else SYMBOL_POS

    @functools.cached_property
    def _token_cache(self) -> TokenCache:
        """The characters' token ids seen so far: rows without the tokenizer (nlp/tasks/char_windows.py)."""
        return TokenCache(self.tokenizer)

    @functools.cached_property
    def _symbols(self) -> UnreadableSymbols:
        return UnreadableSymbols(self.tokenizer)

    @functools.cached_property
    def _pos_table(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """The model's POS tags in label order, and for each of B/I/E/S their label ids (by POS)."""
        pos_tags = list(dict.fromkeys(self._pos_of))
        return pos_tags, {p: np.array([self._label_ids[(p, pos)] for pos in pos_tags]) for p in POSITIONS}


def _outside(words: list[Word], matches: list[tuple[int, int, str | None]]) -> list[Word]:
    """The pieces of each word outside every match (both in text order, matches disjoint), with
    the word's POS: one pass over the two lists, not every match per word."""
    out: list[Word] = []
    first = 0  # the first match that ends after the current word's start
    for s, e, p in words:
        while first < len(matches) and matches[first][1] <= s:
            first += 1
        k = first
        while k < len(matches) and matches[k][0] < e:
            ms, me, _ = matches[k]
            if s < ms:
                out.append((s, ms, p))
            s = max(s, me)
            k += 1
        if s < e:
            out.append((s, e, p))
    return out


class PosTaggingPipeline(LexicalAnalysisPipeline):
    """Per text ``[{"word", "start", "end", "pos"}, ...]``."""

    task = "pos-tagging"

    def _shape(self, text: str, words: list[Word]) -> Any:
        return [{"word": text[s:e], "start": s, "end": e, "pos": p} for s, e, p in words]


class SegmentationPipeline(LexicalAnalysisPipeline):
    """Per text ``[{"word", "start", "end"}, ...]`` (the shape of the jieba segmenter's output)."""

    task = "word-segmentation"

    def _shape(self, text: str, words: list[Word]) -> Any:
        return [{"word": text[s:e], "start": s, "end": e} for s, e, _ in words]
