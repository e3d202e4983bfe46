"""The token classification (NER) pipeline: entities with character offsets, over texts of any length.

    ner = nlp.pipeline("token-classification", model="ner_out/")
    ner("张三在北京工作")   # [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": ...}, ...]

A symbol the tokenizer cannot read (an emoji outside the vocabulary) is in no entity
(nlp/tasks/unreadable.py).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from nlp._common import ConfigError
from nlp.tasks.base_pipeline import Pipeline, as_batch, check_unicode
from nlp.tasks.char_windows import CharacterRows, TokenCache
from nlp.tasks.ner.crf import crf_scores
from nlp.tasks.ner.heads import ErnieForTokenClassification, decode_tags
from nlp.tasks.ner.postprocess import tags_to_entities
from nlp.tasks.ner.preprocess import visible_characters
from nlp.tasks.unreadable import UnreadableSymbols, pin_rows

__all__ = ["TokenClassificationPipeline"]


class TokenClassificationPipeline(Pipeline):
    """Entities with type, text, score and character offsets, over texts of any length."""

    task = "token-classification"
    head_class = ErnieForTokenClassification

    def __call__(self, texts: str | Sequence[str], *, stride: int | None = None) -> list[dict] | list[list[dict]]:
        """Per text, its entities ({"type", "text", "start", "end", "score"}, `end` exclusive).

        `stride`: tokens shared by consecutive windows of a long text (default a quarter of
        the window); each character takes its tag from the window where it is most central.
        """
        batch, single = as_batch(texts, "text")
        check_unicode(batch, "text", single)
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}")
        visible = [visible_characters(t) for t in batch]  # (offsets, characters): each one a word
        # per text and word: the best window's (centrality, tag id, prob); centrality -1: not seen
        best = [_Best(len(offsets)) for offsets, _ in visible]
        todo = [i for i, (offsets, _) in enumerate(visible) if offsets]  # a text without words has no entities
        if todo:
            self._tag_words([visible[i][1] for i in todo], [best[i] for i in todo], stride)
        id2label = self.config.id2label
        results = []
        for text, (offsets, _), seen in zip(batch, visible, best):
            words, tags, scores = seen.tagged(id2label)
            spans = [(offsets[w], offsets[w] + 1) for w in words]
            results.append(tags_to_entities(text, tags, spans, scores))
        return results[0] if single else results

    def _tag_words(self, words: list[list[str]], best: list[_Best], stride: int) -> None:
        """Update `best[i]` with the tags of the words of each text, all windows of all texts
        batched together; each row's first sub-tokens of words are decoded as one chain."""
        batch = CharacterRows.of(self.tokenizer, words, max_length=self.max_length, stride=stride,
                                 cache=self._token_cache)
        windows, sample = batch.windows(), batch.text
        # rows whose words all vanished in the tokenizer (zero-width and other ignored characters)
        rows = [r for r, w in enumerate(windows) if len(w.positions)]
        if not rows:
            return
        logits_rows = self._forward([batch.features[r] for r in rows])
        # the rows' word positions moved to the front (what decoding does to a masked row anyway)
        num_labels = logits_rows[0].shape[-1]
        lengths = [len(windows[r].positions) for r in rows]
        emissions = torch.zeros((len(rows), max(lengths), num_labels))
        outside = self._outside_label
        symbols = [None if outside is None else self._symbols.mask(w) for w in words]
        for j, (r, lg) in enumerate(zip(rows, logits_rows)):
            row = np.array(lg[windows[r].positions], dtype=np.float32)
            if symbols[sample[r]] is not None:  # an unreadable symbol is in no entity (nlp/tasks/unreadable.py)
                pin_rows(row, symbols[sample[r]][windows[r].chars], outside)
            emissions[j, : lengths[j]] = torch.from_numpy(row)
        mask = torch.arange(emissions.shape[1])[None, :] < torch.tensor(lengths)[:, None]  # (R, W)
        decoded = decode_tags(emissions, mask, self.config.id2label, crf=crf_scores(self.backend.decoding))
        tags = torch.zeros(mask.shape, dtype=torch.long)
        for j, d in enumerate(decoded):
            tags[j, : len(d)] = torch.tensor(d, dtype=torch.long)
        probs = torch.softmax(emissions, -1).gather(2, tags[:, :, None]).squeeze(2).numpy()  # (R, W)
        tags_np = tags.numpy()
        for j, r in enumerate(rows):
            n, window = lengths[j], windows[r]
            best[sample[r]].update(window.chars, window.centrality, tags_np[j, :n], probs[j, :n])

    @functools.cached_property
    def _token_cache(self) -> TokenCache:
        """The characters' token ids seen so far: rows without the tokenizer (nlp/tasks/char_windows.py)."""
        return TokenCache(self.tokenizer)

    @functools.cached_property
    def _symbols(self) -> UnreadableSymbols:
        return UnreadableSymbols(self.tokenizer)

    @functools.cached_property
    def _outside_label(self) -> int | None:
        """The id of the label "O" (outside every entity); None for a label set without one."""
        return next((i for i, name in (self.config.id2label or {}).items() if name == "O"), None)


class _Best:
    """Per word of one text, what the best window so far said: centrality (-1: no window yet),
    tag id, probability. A window replaces another's tag only where the word is more central."""

    __slots__ = ("centrality", "prob", "tag")

    def __init__(self, n_words: int) -> None:
        self.centrality = np.full(n_words, -1, dtype=np.int64)
        self.tag = np.zeros(n_words, dtype=np.int64)
        self.prob = np.ones(n_words, dtype=np.float32)

    def update(self, words: np.ndarray, centrality: np.ndarray, tags: np.ndarray, probs: np.ndarray) -> None:
        better = centrality > self.centrality[words]
        w = words[better]
        self.centrality[w], self.tag[w], self.prob[w] = centrality[better], tags[better], probs[better]

    def tagged(self, id2label: dict[int, str]) -> tuple[list[int], list[str], list[float]]:
        """The words a window saw, with their tags and scores. A character the tokenizer drops (a
        zero-width space, a soft hyphen, a control) is in no window and left out, so an entity runs
        across it as it runs across white space: 张\u200b三 is one name, not 张 and 三."""
        words = np.flatnonzero(self.centrality >= 0)
        return words.tolist(), [id2label[t] for t in self.tag[words].tolist()], self.prob[words].tolist()
