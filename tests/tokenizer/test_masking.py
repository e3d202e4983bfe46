"""Whole-word masking: words masked whole, the rate, 80/10/10, labels, reproducibility, epochs."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
import torch

from nlp._common import ConfigError, DataError
from nlp.tokenizer import (
    HybridTokenizer,
    JiebaSegmenter,
    WordPieceTokenizer,
    train_hybrid_tokenizer,
)
from nlp.tokenizer.masking import (
    NO_WORD,
    WholeWordMaskCollator,
    jieba_word_ids,
    pack_rows,
)

from .conftest import read_peoples_daily

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return read_peoples_daily()[:300]


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory, texts) -> HybridTokenizer:
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("\n".join(texts), encoding="utf-8")
    return train_hybrid_tokenizer(path, vocab_size=6000, min_frequency=2)


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory, texts) -> WordPieceTokenizer:
    chars = sorted({c.lower() for t in texts for c in t if not c.isspace()})
    d = tmp_path_factory.mktemp("wp")
    (d / "vocab.txt").write_text("\n".join(SPECIALS + chars) + "\n", encoding="utf-8")
    return WordPieceTokenizer.from_pretrained(d)


@pytest.fixture(scope="module")
def rows(hybrid, texts):
    docs = jieba_word_ids(hybrid, texts)
    return pack_rows(docs, 64, cls_token_id=hybrid.cls_token_id, sep_token_id=hybrid.sep_token_id)


def make_collator(tok, **kw) -> WholeWordMaskCollator:
    return WholeWordMaskCollator(mask_token_id=tok.mask_token_id, vocab_size=tok.vocab_size,
                                 special_token_ids=tuple(tok.convert_tokens_to_ids(SPECIALS)), **kw)


def test_hybrid_word_ids_are_jieba_words(hybrid):
    [(ids, words)] = jieba_word_ids(hybrid, ["中国人民银行发布公告"])
    cut = JiebaSegmenter().cut("中国人民银行发布公告")
    assert max(words) + 1 == len(cut)
    for k, word in enumerate(cut):  # the tokens of word k decode back to word k
        pieces = [hybrid.convert_ids_to_tokens(i) for i, w in zip(ids, words) if w == k]
        assert "".join(p.removeprefix("##") for p in pieces) == word


def test_wordpiece_tokens_map_to_jieba_words(wordpiece):
    text = "我们 在北京大学学习"
    [(ids, words)] = jieba_word_ids(wordpiece, [text])
    assert len(ids) == 9  # one token per character, the space gives none
    cut = JiebaSegmenter().cut(text)
    # 我们 / ' ' / 在 / 北京大学 / 学习 -> word indices 0 0 2 3 3 3 3 4 4
    assert cut == ["我们", " ", "在", "北京大学", "学习"]
    assert words == [0, 0, 2, 3, 3, 3, 3, 4, 4]


@pytest.mark.parametrize("name", ["hybrid", "wordpiece"])
def test_char_level_view_keeps_jieba_words(name, request):
    tok = request.getfixturevalue(name)
    text = "我们 在北京大学学习"
    [(ids, words)] = jieba_word_ids(tok, [text], char_level=True)
    # one token per non-space character, exactly as NER feeds characters; jieba word ids
    want = tok(list("我们在北京大学学习"), is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert ids == want and len(ids) == 9
    assert words == [0, 0, 2, 3, 3, 3, 3, 4, 4]


def test_pack_rows_full_rows_cls_sep_no_split_words(hybrid, rows, texts):
    L = 64
    lengths = rows.lengths.tolist()
    assert all(n <= L for n in lengths)
    assert sum(n < L - 8 for n in lengths[:-1]) == 0  # all but the last row are (nearly) full
    for i in range(len(rows)):
        r = rows[i]
        ids, words = r["input_ids"].tolist(), r["word_ids"].tolist()
        assert ids[0] == hybrid.cls_token_id and ids[-1] == hybrid.sep_token_id
        assert words[0] == NO_WORD and words[-1] == NO_WORD
    # no word crosses a row boundary: a word's tokens, read back, are a jieba word
    seen = Counter()
    for i in range(len(rows)):
        words = rows[i]["word_ids"].tolist()
        seen.update(w for w in set(words) if w >= 0)
    assert all(c == 1 for c in seen.values())
    # the rows hold every token of every text, in order; [SEP]s only between documents
    docs = jieba_word_ids(hybrid, texts)
    stream = [t for i in range(len(rows)) for t in rows[i]["input_ids"].tolist()[1:-1]]
    assert [t for t in stream if t != hybrid.sep_token_id] == [t for ids, _ in docs for t in ids]
    assert stream.count(hybrid.sep_token_id) <= len(docs) - 1


def test_whole_words_masked_together_and_specials_never(hybrid, rows):
    coll = make_collator(hybrid, seed=1)
    feats = [rows[i] for i in range(len(rows))]
    batch = coll(feats)
    chosen = batch["labels"] != -100
    for i, f in enumerate(feats):
        words = f["word_ids"].tolist()
        n = len(words)
        ch = chosen[i, :n].tolist()
        by_word: dict[int, set] = {}
        for w, c in zip(words, ch):
            if w == NO_WORD:
                assert not c, "a special token was chosen"
            else:
                by_word.setdefault(w, set()).add(c)
        assert all(len(s) == 1 for s in by_word.values()), "a word was masked partly"
        assert not chosen[i, n:].any()


def test_rate_and_labels(hybrid, rows):
    coll = make_collator(hybrid, seed=2)
    feats = [rows[i] for i in range(len(rows))]
    batch = coll(feats)
    chosen = batch["labels"] != -100
    maskable = sum(int((f["word_ids"] >= 0).sum()) for f in feats)
    rate = chosen.sum().item() / maskable
    assert 0.13 <= rate <= 0.155, rate
    orig = torch.zeros_like(batch["input_ids"])
    for i, f in enumerate(feats):
        orig[i, : len(f["input_ids"])] = f["input_ids"]
    assert torch.equal(batch["labels"][chosen], orig[chosen])
    assert torch.equal(batch["input_ids"][~chosen], orig[~chosen])  # unchosen tokens untouched
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}


def test_80_10_10(hybrid, rows):
    coll = make_collator(hybrid, seed=3)
    feats = [rows[i] for i in range(len(rows))]
    counts = Counter()
    specials = set(hybrid.convert_tokens_to_ids(SPECIALS)) - {hybrid.mask_token_id}
    for epoch in range(6):
        coll.set_epoch(epoch)
        b = coll(feats)
        chosen = b["labels"] != -100
        got, want = b["input_ids"][chosen], b["labels"][chosen]
        is_mask = got == hybrid.mask_token_id
        same = (got == want) & ~is_mask
        counts["mask"] += int(is_mask.sum())
        counts["same"] += int(same.sum())
        counts["random"] += int((~is_mask & ~same).sum())
        assert not any(int(t) in specials for t in got[~is_mask])
    total = sum(counts.values())
    assert total > 5000
    assert abs(counts["mask"] / total - 0.8) < 0.02
    # a random draw equal to the original counts as "same" (1/vocab of the time)
    assert abs(counts["random"] / total - 0.1) < 0.015
    assert abs(counts["same"] / total - 0.1) < 0.015


def test_reproducible_and_different_per_epoch(hybrid, rows):
    feats = [rows[i] for i in range(40)]
    a, b = make_collator(hybrid, seed=7), make_collator(hybrid, seed=7)
    e0 = a(feats)
    assert torch.equal(e0["labels"], b(feats)["labels"])
    assert torch.equal(e0["input_ids"], b(feats)["input_ids"])
    # a row masks the same whatever batch it lands in (so resume and shuffling do not matter)
    rev = a(feats[::-1])
    assert torch.equal(rev["labels"].flip(0), e0["labels"])
    a.set_epoch(1)
    e1 = a(feats)
    assert not torch.equal(e0["labels"], e1["labels"])
    # and a pickled copy (DataLoader workers) masks identically
    c = pickle.loads(pickle.dumps(a))
    assert torch.equal(c(feats)["labels"], e1["labels"])
    assert not torch.equal(make_collator(hybrid, seed=8)(feats)["labels"], e0["labels"])


def test_without_row_ids_masks_change_per_call(wordpiece, texts):
    docs = jieba_word_ids(wordpiece, texts[:20])
    feats = [{"input_ids": [2, *ids, 3], "word_ids": [None, *w, None]} for ids, w in docs]
    coll = make_collator(wordpiece, seed=0)
    first, second = coll(feats), coll(feats)
    assert not torch.equal(first["labels"], second["labels"])
    again = make_collator(wordpiece, seed=0)
    assert torch.equal(again(feats)["labels"], first["labels"])


def test_bad_input():
    with pytest.raises(ConfigError, match="mlm_probability"):
        WholeWordMaskCollator(mask_token_id=4, vocab_size=10, mlm_probability=1.5)
    coll = WholeWordMaskCollator(mask_token_id=4, vocab_size=10)
    with pytest.raises(DataError, match="word_ids"):
        coll([{"input_ids": [2, 5, 3]}])
    with pytest.raises(DataError, match="empty"):
        pack_rows([([], [])], 16, cls_token_id=2, sep_token_id=3)
