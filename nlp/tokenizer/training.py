"""Learning a hybrid (jieba + BPE) vocabulary from text files.

The vocabulary, in id order:
1. the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] (BERT's ids 0..4);
2. every character seen, twice: `c` (first piece of a word) and `##c` (a later piece), so
   that any word made of seen characters splits down to characters without [UNK];
3. user words, then the most frequent multi-character jieba words (`word_fraction` of the
   budget left, each seen at least `min_frequency` times): one token each;
4. BPE merges learned (by the `tokenizers` BpeTrainer) on the words NOT kept whole, i.e. on
   the tail that BPE will have to split at encode time, until `vocab_size` is reached.

Parts 1-3 are deterministic. The order of BPE merges with equal counts is not guaranteed
by the `tokenizers` trainer, so two runs can give some merged pieces different ids; save the
trained directory rather than retraining when ids must stay fixed.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Iterable

import tokenizers
from tokenizers import models, pre_tokenizers, trainers

from nlp._common import ConfigError, DataError
from nlp.tokenizer._fold import fold_table
from nlp.tokenizer.hybrid import HybridTokenizer
from nlp.tokenizer.segmenter import JiebaSegmenter
from nlp.tokenizer.wordpiece import WordPieceTokenizer

__all__ = ["train_hybrid_tokenizer", "train_wordpiece_tokenizer", "SPECIAL_TOKENS"]

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _read_lines(files: Iterable[str | Path]) -> list[str]:
    files = [files] if isinstance(files, (str, Path)) else list(files)
    if not files:
        raise ConfigError("no corpus files given; pass one or more UTF-8 text files")
    lines: list[str] = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise DataError(f"corpus file {str(f)!r} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"corpus file {str(f)!r} is not UTF-8 text: {err}") from None
        lines.extend(ln for ln in text.splitlines() if ln.strip())
    if not lines:
        raise DataError(f"the corpus files {[str(f) for f in files]} hold no text")
    return lines


def train_hybrid_tokenizer(
    files: str | Path | Iterable[str | Path],
    vocab_size: int,
    out_dir: str | Path | None = None,
    *,
    word_fraction: float = 0.5,
    min_frequency: int = 2,
    user_words: Iterable[str] = (),
    hmm: bool = False,
    segmenter_backend: str = "auto",
    do_lower_case: bool = True,
    fold_width: bool = True,
    model_max_length: int | None = 512,
) -> HybridTokenizer:
    """Learn a `HybridTokenizer` from text files (one text a line); save it when `out_dir` is given.

    `word_fraction` splits the budget left after characters between whole words and BPE
    merges: whole words give the shortest sequences on text like the corpus, merges cover
    words the corpus saw rarely or never.
    """
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ConfigError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    if not 0.0 <= word_fraction <= 1.0:
        raise ConfigError(f"word_fraction must be between 0 and 1, got {word_fraction!r}")
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ConfigError(f"min_frequency must be a positive integer, got {min_frequency!r}")
    fold = fold_table(do_lower_case, fold_width)
    user_words = [w.translate(fold) for w in user_words]
    segmenter = JiebaSegmenter(user_words, hmm=hmm, backend=segmenter_backend)
    lines = _read_lines(files)
    cut = segmenter.cut_batch([ln.translate(fold) for ln in lines])
    counts: Counter = Counter()
    for words in cut:
        counts.update(w for w in words if not w.isspace())
    chars = sorted({c for w in counts for c in w} | {c for w in user_words for c in w})

    vocab: dict[str, int] = {}
    for tok in (*SPECIAL_TOKENS, *chars, *("##" + c for c in chars)):
        vocab.setdefault(tok, len(vocab))
    if vocab_size < len(vocab):
        raise ConfigError(
            f"vocab_size={vocab_size} is too small: the corpus has {len(chars)} distinct characters, "
            f"which with their ## forms and {len(SPECIAL_TOKENS)} special tokens need {len(vocab)}; "
            f"use --vocab-size {len(vocab) + 1000} or more"
        )
    budget = vocab_size - len(vocab)
    n_words = int(budget * word_fraction)
    for w in user_words:
        if w not in vocab and n_words > 0:
            vocab[w] = len(vocab)
            n_words -= 1
    for w, c in counts.most_common():
        if n_words <= 0 or c < min_frequency:
            break
        if len(w) > 1 and w not in vocab:
            vocab[w] = len(vocab)
            n_words -= 1

    merges = _learn_merges(cut, vocab, vocab_size, min_frequency)
    tok = HybridTokenizer(
        vocab,
        merges,
        user_words=user_words,
        hmm=hmm,
        segmenter_backend=segmenter_backend,
        do_lower_case=do_lower_case,
        fold_width=fold_width,
        model_max_length=model_max_length,
    )
    logger.info(
        "trained hybrid tokenizer on %d lines: %d characters, %d whole words, %d merges, vocab %d",
        len(lines), len(chars), len(vocab) - 2 * len(chars) - len(SPECIAL_TOKENS) - len(merges),
        len(merges), tok.vocab_size,
    )
    if out_dir is not None:
        tok.save_pretrained(out_dir)
    return tok


def _learn_merges(
    cut: list[list[str]], vocab: dict[str, int], vocab_size: int, min_frequency: int
) -> list[tuple[str, str]]:
    """BPE merges on the words not kept whole; adds each merge's result to `vocab`."""
    if len(vocab) >= vocab_size:
        return []
    trainer_tk = tokenizers.Tokenizer(models.BPE(continuing_subword_prefix="##"))
    trainer_tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        show_progress=False,
        continuing_subword_prefix="##",
        special_tokens=[],
    )
    tail = (" ".join(w for w in words if len(w) > 1 and w not in vocab and not w.isspace())
            for words in cut)
    trainer_tk.train_from_iterator(tail, trainer)
    raw = json.loads(trainer_tk.to_str())["model"]["merges"]
    merges: list[tuple[str, str]] = []
    for m in raw:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a not in vocab or b not in vocab:
            continue  # a piece from a character BPE saw but we did not (cannot happen) — skip safely
        merged = a + b[2:] if b.startswith("##") else a + b
        if merged not in vocab:
            if len(vocab) >= vocab_size:
                break
            vocab[merged] = len(vocab)
        merges.append((a, b))
    return merges


def train_wordpiece_tokenizer(
    files: str | Path | Iterable[str | Path],
    vocab_size: int,
    out_dir: str | Path | None = None,
    *,
    min_frequency: int = 2,
    do_lower_case: bool = True,
    model_max_length: int | None = 512,
) -> WordPieceTokenizer:
    """Learn an ERNIE/BERT-style WordPiece vocabulary (what bert-base-chinese and ERNIE 1.0 use):
    every CJK character is its own token, other text (Latin words, digits) is split into
    WordPiece `##` pieces learned by the `tokenizers` WordPieceTrainer.

    Every character of the corpus is kept, so in-corpus text never becomes [UNK]; the budget
    left after the characters goes to the most useful Latin/digit pieces.
    """
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ConfigError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ConfigError(f"min_frequency must be a positive integer, got {min_frequency!r}")
    lines = _read_lines(files)
    empty = WordPieceTokenizer({t: i for i, t in enumerate(SPECIAL_TOKENS)}, do_lower_case=do_lower_case)
    backend = tokenizers.Tokenizer.from_str(empty._backend.to_str())
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##",
    )
    backend.train_from_iterator(lines, trainer)
    vocab = backend.get_vocab()
    if len(vocab) > vocab_size:
        raise ConfigError(
            f"vocab_size={vocab_size} is too small: the corpus has {len(vocab) - len(SPECIAL_TOKENS)} distinct "
            f"characters and pieces that must all be kept; use --vocab-size {len(vocab) + 1000} or more"
        )
    ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    tok = WordPieceTokenizer(ordered, do_lower_case=do_lower_case, model_max_length=model_max_length)
    n_cjk = sum(1 for t in ordered if len(t) == 1 and "\u4e00" <= t <= "\u9fff")
    logger.info("trained WordPiece tokenizer on %d lines: vocab %d (%d CJK characters)",
                len(lines), tok.vocab_size, n_cjk)
    if out_dir is not None:
        tok.save_pretrained(out_dir)
    return tok
