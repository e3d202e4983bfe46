"""Data augmentation for distillation: TinyBERT's word replacement (Jiao et al. 2020, "TinyBERT:
Distilling BERT for Natural Language Understanding", section 3.3 and Algorithm 1), with the
part-of-speech-guided replacement of Tang et al. 2019 ("Distilling Task-Specific Knowledge from
BERT into Simple Neural Networks") standing in for TinyBERT's GloVe neighbours.

Each training text is cut into words with jieba (dictionary only, no HMM: deterministic), and
each word is replaced with probability `p` by one of `candidates` (TinyBERT's K) candidates,
drawn uniformly:
- a word of jieba's dictionary: the K dictionary words of the same part-of-speech tag and the
  same length nearest to it in frequency rank. jieba has no thesaurus, so these stand in for
  TinyBERT's GloVe neighbours: same grammar, same length, about as common; they are often not
  synonyms ("好" may become "大"), which is the point of the teacher labelling every copy;
- with a masked LM (`mlm`), a single-character word instead: the masked LM's top K single
  characters at that position, masked (all of a copy's such positions are masked at once, one
  forward pass per copy, where TinyBERT masks one word at a time);
- words with anything but CJK characters (numbers, Latin, punctuation) and words outside the
  dictionary are kept.
Same-length replacements keep every character's position, so a copy has its original's length.

A copy depends on (seed, example index, copy index, column) alone: the same recipe makes the
same copies in every process and on every resume. The copies' labels are the originals', and
are not learned (nlp/train/distill.py: augmented rows get the teacher's targets only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from nlp.tokenizer import JiebaSegmenter

__all__ = ["JiebaDictionary", "MaskedLMChars", "WordReplacer", "AugmentStats", "augment_examples"]

logger = logging.getLogger(__name__)


def _is_cjk(text: str) -> bool:
    return bool(text) and all("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" for c in text)


class JiebaDictionary:
    """jieba's dictionary (`dict.txt`: word, frequency, part-of-speech tag) as buckets of words of
    one tag and one length, most frequent first; only words of CJK characters."""

    def __init__(self, lines: Sequence[str] | None = None) -> None:
        if lines is None:
            import jieba

            with jieba.Tokenizer().get_dict_file() as f:
                lines = f.read().decode("utf-8").splitlines()
        entries: dict[tuple[str, int], list[tuple[int, str]]] = {}
        for line in lines:
            parts = line.split()
            if len(parts) != 3 or not _is_cjk(parts[0]):
                continue
            word, freq, tag = parts[0], int(parts[1]), parts[2]
            entries.setdefault((tag, len(word)), []).append((-freq, word))
        self.buckets: dict[tuple[str, int], list[str]] = {}
        self.where: dict[str, tuple[tuple[str, int], int]] = {}
        for key, words in entries.items():
            ordered = [w for _, w in sorted(words)]
            self.buckets[key] = ordered
            for i, w in enumerate(ordered):
                self.where.setdefault(w, (key, i))  # a word listed twice keeps its first tag

    def candidates(self, word: str, k: int) -> list[str]:
        """The k words of `word`'s tag and length nearest to it in frequency rank (nearest first;
        [] for a word outside the dictionary or alone in its bucket)."""
        if word not in self.where:
            return []
        key, r = self.where[word]
        bucket = self.buckets[key]
        near = sorted(range(max(0, r - k), min(len(bucket), r + k + 1)), key=lambda i: (abs(i - r), i))
        return [bucket[i] for i in near if i != r][:k]


@dataclass
class AugmentStats:
    """What augmentation did: copies made, words considered (CJK words), words replaced (and how
    many of those by the masked LM)."""

    copies: int = 0
    words: int = 0
    replaced: int = 0
    by_mlm: int = 0

    def line(self) -> str:
        share = self.replaced / self.words if self.words else 0.0
        return (f"{self.copies} augmented copies: {self.replaced} of {self.words} CJK words replaced ({share:.1%}), "
                f"{self.by_mlm} of them by the masked LM")


class MaskedLMChars:
    """A masked LM's top single-character predictions at masked positions."""

    def __init__(self, directory: str, max_length: int, batch_size: int = 64) -> None:
        from nlp.models import ErnieForMaskedLM
        from nlp.tokenizer import load_tokenizer

        self.model = ErnieForMaskedLM.from_pretrained(directory).eval()
        self.tokenizer = load_tokenizer(directory)
        self.max_length = min(max_length, self.model.config.max_sequence_length)
        self.batch_size = batch_size
        vocab = self.tokenizer.get_vocab()
        self.char_of = {i: t for t, i in vocab.items() if len(t) == 1 and _is_cjk(t)}
        allowed = torch.zeros(self.model.config.vocab_size, dtype=torch.bool)
        allowed[list(self.char_of)] = True
        self.allowed = allowed
        self.mask_id = vocab[self.tokenizer.mask_token]

    @torch.inference_mode()
    def predict(self, texts: Sequence[str], positions: Sequence[Sequence[int]], k: int) -> list[list[list[str]]]:
        """For each text, for each character position given, the top k single CJK characters the
        masked LM puts there (all the text's positions masked together), the text's own character
        excluded; [] for a position past `max_length` tokens or not one token of its own."""
        out: list[list[list[str]]] = [[[] for _ in p] for p in positions]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = self.tokenizer([texts[i] for i in idx], truncation=True, max_length=self.max_length, padding=True,
                                 return_offsets_mapping=True)
            ids = torch.tensor(enc["input_ids"])
            where: list[tuple[int, int, int, int]] = []  # (row in batch, token, text, which position)
            for row, i in enumerate(idx):
                token_of = {tuple(o): t for t, o in enumerate(enc.offsets(row)) if o[1] - o[0] == 1}
                for j, c in enumerate(positions[i]):
                    t = token_of.get((c, c + 1))
                    if t is not None:
                        where.append((row, t, i, j))
                        ids[row, t] = self.mask_id
            if not where:
                continue
            logits = self.model(input_ids=ids, attention_mask=torch.tensor(enc["attention_mask"])).logits.float()
            for row, t, i, j in where:
                scores = logits[row, t].masked_fill(~self.allowed, float("-inf"))
                own = self.tokenizer.convert_tokens_to_ids(texts[i][positions[i][j]])
                if isinstance(own, int) and 0 <= own < scores.numel():
                    scores[own] = float("-inf")
                top = scores.topk(k).indices.tolist()
                out[i][j] = [self.char_of[v] for v in top if v in self.char_of and scores[v] > float("-inf")]
        return out


@dataclass
class WordReplacer:
    """TinyBERT's word replacement for one set of settings (see the module docstring)."""

    p: float = 0.4
    candidates: int = 15
    seed: int = 0
    dictionary: JiebaDictionary = field(default_factory=JiebaDictionary)
    mlm: MaskedLMChars | None = None
    segmenter: JiebaSegmenter = field(default_factory=lambda: JiebaSegmenter(hmm=False))

    def rewrite(self, texts: Sequence[str], keys: Sequence[tuple[int, ...]],
                stats: AugmentStats | None = None) -> list[str]:
        """One rewritten copy of each text; `keys[i]` (e.g. (example, copy, column)) seeds its
        random choices, so a copy depends on the seed and its key alone."""
        stats = stats if stats is not None else AugmentStats()
        plans = []
        for text, key in zip(texts, keys):
            rng = np.random.default_rng([self.seed, *key])
            chars, masked = list(text), []
            start = 0
            for word in self.segmenter.cut(text):
                pos, start = start, start + len(word)
                if not _is_cjk(word):
                    continue
                stats.words += 1
                if rng.random() >= self.p:  # one draw per word, replaced or not: later words' draws stay put
                    continue
                if len(word) == 1 and self.mlm is not None:
                    masked.append(pos)
                    continue
                options = self.dictionary.candidates(word, self.candidates)
                if options:
                    chars[pos:pos + len(word)] = options[int(rng.integers(len(options)))]
                    stats.replaced += 1
            plans.append((chars, masked, rng))
        if self.mlm is not None:
            texts1 = ["".join(chars) for chars, _, _ in plans]
            predicted = self.mlm.predict(texts1, [m for _, m, _ in plans], self.candidates)
            for (chars, masked, rng), options in zip(plans, predicted):
                for pos, choices in zip(masked, options):
                    if choices:
                        chars[pos] = choices[int(rng.integers(len(choices)))]
                        stats.replaced += 1
                        stats.by_mlm += 1
        return ["".join(chars) for chars, _, _ in plans]


def augment_examples(ds: Any, columns: Sequence[str], copies: int, replacer: WordReplacer) -> tuple[Any, AugmentStats]:
    """`copies` rewritten copies of every example of `ds` (a datasets.Dataset), the string
    `columns` it has rewritten, everything else (labels included) kept: example 0's copies, then
    example 1's, ... As a Dataset of `ds`'s features, and what was done."""
    import datasets

    present = [c for c in columns if c in ds.column_names]
    rows = ds.to_list()
    stats = AugmentStats(copies=len(rows) * copies)
    out = [dict(r) for r in rows for _ in range(copies)]
    for c, column in enumerate(columns):
        if column not in present:
            continue
        which = [(i, n) for i, r in enumerate(rows) for n in range(copies) if isinstance(r[column], str)]
        texts = [rows[i][column] for i, _ in which]
        new = replacer.rewrite(texts, [(i, n, c) for i, n in which], stats)
        for (i, n), text in zip(which, new):
            out[i * copies + n][column] = text
    return datasets.Dataset.from_list(out, features=ds.features), stats
