"""The token classification (NER) pipeline: entities with character offsets, over texts of any length.

    ner = nlp.pipeline("token-classification", model="ner_out/")
    ner("张三在北京工作")   # [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": ...}, ...]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from nlp._common import ConfigError
from nlp.tasks.backend import CRF_KEYS
from nlp.tasks.base_pipeline import MODEL_INPUTS, Pipeline, as_batch, check_unicode
from nlp.tasks.ner.heads import ErnieForTokenClassification, decode_tags
from nlp.tasks.ner.postprocess import tags_to_entities

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
        words = [[(i, c) for i, c in enumerate(t) if not c.isspace()] for t in batch]
        # per text: word -> (centrality, tag id, prob) of the best window seen so far
        best: list[dict[int, tuple[int, int, float]]] = [{} for _ in batch]
        todo = [i for i, ws in enumerate(words) if ws]  # a text without words has no entities
        if todo:
            self._tag_words([[c for _, c in words[i]] for i in todo], [best[i] for i in todo], stride)
        id2label = self.config.id2label
        results = []
        for text, ws, seen in zip(batch, words, best):
            tags = [id2label[seen[w][1]] if w in seen else "O" for w in range(len(ws))]
            scores = [seen[w][2] if w in seen else 1.0 for w in range(len(ws))]
            spans = [(i, i + 1) for i, _ in ws]
            results.append(tags_to_entities(text, tags, spans, scores))
        return results[0] if single else results

    def _tag_words(self, words: list[list[str]], best: list[dict], stride: int) -> None:
        """Fill `best[i]` (word -> (centrality, tag, prob)) for the words of each text, all
        windows of all texts batched together."""
        enc = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=self.max_length,
                             stride=stride, return_overflowing_tokens=True)
        n_rows = len(enc["input_ids"])
        word_ids = [enc.word_ids(r) for r in range(n_rows)]
        sample = enc["overflow_to_sample_mapping"]
        # rows whose words all vanished in the tokenizer (zero-width and other ignored characters)
        rows = [r for r in range(n_rows) if any(w is not None for w in word_ids[r])]
        if not rows:
            return
        logits_rows = self._forward([{k: enc[k][r] for k in MODEL_INPUTS if k in enc} for r in rows])
        num_labels = logits_rows[0].shape[-1]
        T = max(len(lg) for lg in logits_rows)
        padded = torch.zeros((len(rows), T, num_labels))
        mask = torch.zeros(len(rows), T, dtype=torch.bool)
        for j, (r, lg) in enumerate(zip(rows, logits_rows)):
            padded[j, : len(lg)] = torch.from_numpy(np.ascontiguousarray(lg, dtype=np.float32))
            prev = None
            for t, w in enumerate(word_ids[r]):
                mask[j, t] = w is not None and w != prev
                prev = w
        crf = self.backend.crf
        crf = None if crf is None else tuple(torch.from_numpy(np.asarray(crf[k], dtype=np.float32)) for k in CRF_KEYS)
        decoded = decode_tags(padded, mask, self.config.id2label, crf=crf)
        probs = torch.softmax(padded, -1)
        for j, r in enumerate(rows):
            positions = mask[j].nonzero().flatten().tolist()
            wids = word_ids[r]
            content = [t for t, w in enumerate(wids) if w is not None]
            lo, hi = content[0], content[-1]
            seen = best[sample[r]]
            for t, tag in zip(positions, decoded[j]):
                w = wids[t]
                centrality = min(t - lo, hi - t)
                if w not in seen or centrality > seen[w][0]:
                    seen[w] = (centrality, int(tag), float(probs[j, t, tag]))
