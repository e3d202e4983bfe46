"""Whole-word masking for masked-LM pretraining, over jieba word boundaries, for either tokenizer.

ERNIE's point is that a model learns more from predicting a whole word (or entity) than a
character whose neighbours give it away: 北[MASK]大学 is easy, [MASK][MASK]大学 is not. So the
unit of masking is the jieba word, and all tokens of a chosen word are masked together.

Three pieces, used in this order:

1. `jieba_word_ids(tokenizer, texts)`: token ids (no special tokens) and, per token, the index
   of the jieba word it belongs to. For a `HybridTokenizer` these are its own `word_ids`
   (it already segments with jieba); for WordPiece, whose words are single CJK characters,
   the text is cut with `JiebaSegmenter` and each token is mapped by its start offset.
2. `pack_rows(...)`: documents are concatenated into one stream (a [SEP] between documents)
   and cut into rows of exactly `max_length` tokens, ``[CLS] ... [SEP]``, so no compute goes to
   padding (only the last row may be short). A cut falls on a word boundary, so no word is
   split across rows (a word longer than a row is the exception: it is cut). Documents may
   share a row and attend to each other, as in RoBERTa's FULL-SENTENCES packing; the [SEP]
   marks where one ends.
3. `WholeWordMaskCollator`: per row, picks random whole words until ~`mlm_probability` of its
   maskable tokens are chosen (a word that would overshoot is skipped, as in Google's WWM),
   then applies BERT's 80/10/10 rule PER TOKEN: 80% become [MASK], 10% a random
   non-special token, 10% stay unchanged. `labels` hold the original id at chosen positions
   and -100 everywhere else. Special tokens (word id -1) are never chosen.

Masks are drawn anew whenever a batch is built: the random stream of a row is seeded from
(seed, epoch, row_id), so every epoch masks differently, a run is reproducible, and a resumed
run (the trainer calls `set_epoch`) masks exactly as an unbroken one. Rows without `row_id`
fall back to a generator seeded once and advanced per call (reproducible, not resume-exact).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from nlp._common import ConfigError, DataError
from nlp.tokenizer.segmenter import JiebaSegmenter

__all__ = ["PackedRows", "WholeWordMaskCollator", "jieba_word_ids", "pack_rows"]

NO_WORD = -1  # word id of special tokens: never masked

_MIX = 0x9E3779B97F4A7C15  # 64-bit golden-ratio constant: spreads (seed, epoch, row) apart


def jieba_word_ids(
    tokenizer: Any, texts: Sequence[str], *, segmenter: JiebaSegmenter | None = None,
    char_level: bool = False,
) -> list[tuple[list[int], list[int]]]:
    """(token ids, jieba word index per token) for each text, without special tokens.

    Works with any tokenizer of this package: a hybrid tokenizer's words ARE jieba words;
    for others (WordPiece) the text is segmented here and tokens mapped by character offset.

    `char_level=True` feeds the non-space characters one by one (`is_split_into_words`), the
    way token-classification (NER) feeds a hybrid tokenizer, while the word ids stay jieba
    words: the characters of 北京 are still masked together. Pretraining on a share of such
    rows teaches the model the character spelling of words its vocabulary holds whole.
    """
    texts = list(texts)
    if not texts:
        return []
    if char_level:
        segmenter = segmenter or JiebaSegmenter()  # once: building one loads jieba's dictionary
        return [_char_level(tokenizer, text, segmenter) for text in texts]
    native = type(tokenizer).__name__ == "HybridTokenizer"
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=not native,
                    return_token_type_ids=False, return_attention_mask=False)
    out: list[tuple[list[int], list[int]]] = []
    if native:
        for i, ids in enumerate(enc["input_ids"]):
            out.append((list(ids), [NO_WORD if w is None else w for w in enc.word_ids(i)]))
        return out
    segmenter = segmenter or JiebaSegmenter()
    for i, (ids, text) in enumerate(zip(enc["input_ids"], texts)):
        starts = _word_starts(segmenter, text)
        words = [bisect.bisect_right(starts, s) - 1 for s, _ in enc["offset_mapping"][i]]
        out.append((list(ids), words))
    return out


def _word_starts(segmenter: JiebaSegmenter, text: str) -> list[int]:
    """Start offset of each jieba word (spaces included: every character is in one word)."""
    starts, pos = [], 0
    for w in segmenter.cut(text):
        starts.append(pos)
        pos += len(w)
    return starts


def _char_level(tokenizer: Any, text: str, segmenter: JiebaSegmenter) -> tuple[list[int], list[int]]:
    positions = [i for i, c in enumerate(text) if not c.isspace()]
    if not positions:
        return [], []
    starts = _word_starts(segmenter, text)
    char_word = [bisect.bisect_right(starts, i) - 1 for i in positions]
    enc = tokenizer([text[i] for i in positions], is_split_into_words=True, add_special_tokens=False,
                    return_token_type_ids=False, return_attention_mask=False)
    words = [NO_WORD if w is None else char_word[w] for w in enc.word_ids(0)]
    return list(enc["input_ids"]), words


@dataclass
class PackedRows:
    """Rows of packed token ids as one (N, max_length) tensor each; a sequence of feature dicts.

    Storing rows as two int32 tensors (not Python lists) keeps a few million tokens in tens of
    megabytes. Item i is ``{"input_ids", "word_ids", "row_id"}`` with the padding cut off.
    """

    input_ids: torch.Tensor  # (N, L) int32, pad 0 after `lengths`
    word_ids: torch.Tensor  # (N, L) int32, -1 on special tokens and padding
    lengths: torch.Tensor  # (N,) int32

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def __getitem__(self, i: int) -> dict[str, Any]:
        n = int(self.lengths[i])
        return {"input_ids": self.input_ids[i, :n], "word_ids": self.word_ids[i, :n], "row_id": int(i)}

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


def pack_rows(
    documents: Iterable[tuple[Sequence[int], Sequence[int]]],
    max_length: int,
    *,
    cls_token_id: int,
    sep_token_id: int,
) -> PackedRows:
    """Cut a stream of (token ids, word ids) documents into full ``[CLS] ... [SEP]`` rows.

    Documents are joined with [SEP]; each row takes up to `max_length - 2` stream tokens, ending
    on a word boundary when one exists in the row. Word ids are renumbered so that they stay
    distinct within a row (the same word index in two documents is two words).
    """
    if max_length < 4:
        raise ConfigError(f"max_length must be at least 4 to hold [CLS] x [SEP], got {max_length}")
    body = max_length - 2
    ids: list[int] = []
    words: list[int] = []
    next_word = 0
    for doc_ids, doc_words in documents:
        if len(doc_ids) != len(doc_words):
            raise DataError(f"a document has {len(doc_ids)} tokens but {len(doc_words)} word ids")
        if not doc_ids:
            continue
        if ids:
            ids.append(sep_token_id)
            words.append(NO_WORD)
        base, top = next_word, -1
        for t, w in zip(doc_ids, doc_words):
            ids.append(int(t))
            words.append(NO_WORD if w < 0 else base + int(w))
            top = max(top, int(w))
        next_word = base + top + 1
    if not ids:
        raise DataError("no tokens to pack: every document was empty")
    rows_ids, rows_words = [], []
    start, n = 0, len(ids)
    while start < n:
        end = min(start + body, n)
        if end < n:  # back off to a word boundary so that no word is split across rows
            cut = end
            while cut > start + 1 and words[cut] != NO_WORD and words[cut] == words[cut - 1]:
                cut -= 1
            if cut > start + 1:
                end = cut
        chunk_ids, chunk_words = ids[start:end], words[start:end]
        while chunk_ids and chunk_ids[0] == sep_token_id and chunk_words[0] == NO_WORD:
            chunk_ids, chunk_words = chunk_ids[1:], chunk_words[1:]  # no row starts with [SEP]
        if chunk_ids:
            rows_ids.append([cls_token_id, *chunk_ids, sep_token_id])
            rows_words.append([NO_WORD, *chunk_words, NO_WORD])
        start = end
    lengths = torch.tensor([len(r) for r in rows_ids], dtype=torch.int32)
    input_ids = torch.zeros(len(rows_ids), max_length, dtype=torch.int32)
    word_ids = torch.full((len(rows_ids), max_length), NO_WORD, dtype=torch.int32)
    for i, (r, w) in enumerate(zip(rows_ids, rows_words)):
        input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.int32)
        word_ids[i, : len(w)] = torch.tensor(w, dtype=torch.int32)
    return PackedRows(input_ids, word_ids, lengths)


@dataclass
class WholeWordMaskCollator:
    """Feature dicts with `input_ids` and `word_ids` (-1 = special) -> an MLM batch.

    Output: `input_ids` (masked), `attention_mask`, `token_type_ids` (zeros), `labels` (original
    id where a token was chosen, -100 elsewhere), all (B, T) long, padded to the longest row.
    Call `set_epoch(e)` before each epoch (the pretraining sampler does) so masks change.
    """

    mask_token_id: int
    vocab_size: int
    special_token_ids: tuple[int, ...] = (0, 1, 2, 3, 4)  # never drawn as random replacements
    mlm_probability: float = 0.15
    mask_ratio: float = 0.8  # of chosen tokens: replaced by [MASK]
    random_ratio: float = 0.1  # of chosen tokens: replaced by a random token; the rest unchanged
    pad_token_id: int = 0
    seed: int = 0
    epoch: int = 0
    _calls: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        errors = []
        if not 0.0 < self.mlm_probability < 1.0:
            errors.append(f"mlm_probability must lie in (0, 1), got {self.mlm_probability}")
        if self.mask_ratio < 0 or self.random_ratio < 0 or self.mask_ratio + self.random_ratio > 1:
            errors.append(f"mask_ratio ({self.mask_ratio}) and random_ratio ({self.random_ratio}) "
                          "must be >= 0 and sum to at most 1")
        if not 0 <= self.mask_token_id < self.vocab_size:
            errors.append(f"mask_token_id {self.mask_token_id} is outside the vocabulary (0..{self.vocab_size - 1})")
        if errors:
            raise ConfigError("WholeWordMaskCollator: " + "; ".join(errors))
        allowed = torch.ones(self.vocab_size, dtype=torch.bool)
        allowed[[i for i in self.special_token_ids if 0 <= i < self.vocab_size]] = False
        self._random_pool = allowed.nonzero().squeeze(1)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _generator(self, row_id: int | None) -> torch.Generator:
        if row_id is None:
            self._calls += 1
            key = (self.seed * _MIX + self._calls) & 0x7FFF_FFFF_FFFF_FFFF
        else:
            key = ((self.seed * _MIX) ^ (self.epoch * 0x632BE59BD9B4E019) ^ (row_id * 0x85EBCA77C2B2AE63))
            key &= 0x7FFF_FFFF_FFFF_FFFF
        return torch.Generator().manual_seed(key)

    def mask_row(self, ids: torch.Tensor, words: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked ids, labels) for one row; `words` (T,) with -1 on special tokens."""
        labels = torch.full_like(ids, -100)
        maskable = words >= 0
        n_tokens = int(maskable.sum())
        if n_tokens == 0:
            return ids.clone(), labels
        # runs of equal word id = one word; word k covers positions [starts[k], ends[k])
        w = words.tolist()
        starts, ends = [], []
        for t, wid in enumerate(w):
            if wid < 0:
                continue
            if starts and ends[-1] == t and w[t - 1] == wid:
                ends[-1] = t + 1
            else:
                starts.append(t)
                ends.append(t + 1)
        target = max(1, round(n_tokens * self.mlm_probability))
        chosen = torch.zeros_like(maskable)
        picked = 0
        for k in torch.randperm(len(starts), generator=g).tolist():
            size = ends[k] - starts[k]
            if picked + size > target:
                continue  # overshoot: a smaller word may still fit
            chosen[starts[k]:ends[k]] = True
            picked += size
            if picked >= target:
                break
        labels[chosen] = ids[chosen]
        out = ids.clone()
        u = torch.rand(ids.shape, generator=g)
        to_mask = chosen & (u < self.mask_ratio)
        to_random = chosen & (u >= self.mask_ratio) & (u < self.mask_ratio + self.random_ratio)
        out[to_mask] = self.mask_token_id
        n_rand = int(to_random.sum())
        if n_rand:
            pick = torch.randint(len(self._random_pool), (n_rand,), generator=g)
            out[to_random] = self._random_pool[pick].to(out.dtype)
        return out, labels

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise DataError("WholeWordMaskCollator got an empty batch")
        T = max(len(f["input_ids"]) for f in features)
        B = len(features)
        input_ids = torch.full((B, T), self.pad_token_id, dtype=torch.long)
        labels = torch.full((B, T), -100, dtype=torch.long)
        attention = torch.zeros((B, T), dtype=torch.long)
        for i, f in enumerate(features):
            if "word_ids" not in f:
                raise DataError("whole-word masking needs `word_ids` in every feature; build them "
                                "with nlp.tokenizer.masking.jieba_word_ids (or pack_rows)")
            ids = torch.as_tensor(f["input_ids"], dtype=torch.long)
            words = torch.as_tensor([NO_WORD if w is None else w for w in f["word_ids"]]
                                    if isinstance(f["word_ids"], list) else f["word_ids"], dtype=torch.long)
            if ids.shape != words.shape:
                raise DataError(f"row {i}: {ids.numel()} input_ids but {words.numel()} word_ids")
            row_id = f.get("row_id")
            masked, lab = self.mask_row(ids, words, self._generator(None if row_id is None else int(row_id)))
            n = ids.numel()
            input_ids[i, :n], labels[i, :n], attention[i, :n] = masked, lab, 1
        return {"input_ids": input_ids, "attention_mask": attention,
                "token_type_ids": torch.zeros_like(input_ids), "labels": labels}
