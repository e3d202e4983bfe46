"""jieba+BPE hybrid: words, pieces, [UNK], offsets into the original text, pairs, overflow."""

from __future__ import annotations

import pytest

from nlp._common import ConfigError
from nlp.tokenizer import HybridTokenizer, JiebaSegmenter, WordPieceTokenizer, load_tokenizer


def _check_offsets(tok, text, enc):
    for (s, e), t, sid in zip(enc["offset_mapping"], enc.tokens(), enc.sequence_ids()):
        if sid is None:
            assert (s, e) == (0, 0)
            continue
        piece = text[s:e].translate(tok._fold)
        if t != tok.unk_token:
            assert piece == t.removeprefix("##"), (t, text[s:e])


def test_golden_user_word_pieces_unk_and_offsets(hybrid_tok):
    text = "我爱飞桨深度学习框架！ Hello，餐厅ＡＢＣ😀"
    enc = hybrid_tok(text, return_offsets_mapping=True)
    toks = enc.tokens()
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert "飞桨" in toks and "深度" in toks  # user word and dictionary word stay whole
    assert toks.count("[UNK]") == 1  # the emoji, one char, counted not dropped
    unk_at = toks.index("[UNK]")
    s, e = enc["offset_mapping"][unk_at]
    assert text[s:e] == "😀"
    _check_offsets(hybrid_tok, text, enc)
    # full-width letters fold to ascii but offsets point at the full-width originals
    ab = [i for i, t in enumerate(toks) if t.removeprefix("##") in ("a", "b", "c", "ab", "abc", "##bc")]
    assert ab and all(text[slice(*enc["offset_mapping"][i])][0] in "ＡＢＣ" for i in ab)
    # word_ids number jieba's words (spaces are not words)
    words, _ = hybrid_tok.segment([text])
    assert max(w for w in enc.word_ids() if w is not None) == len(words[0]) - 1


def test_oov_word_splits_to_known_pieces(hybrid_tok):
    word = "餐厅服务"  # not one jieba word; pieces must cover it
    enc = hybrid_tok("蜂鸟哒哒", add_special_tokens=False, return_offsets_mapping=True)
    assert "[UNK]" not in enc.tokens() or hybrid_tok.unknown_chars(["蜂鸟哒哒"])
    joined = "".join(t.removeprefix("##") for t in hybrid_tok.tokenize(word))
    assert joined == word


def test_stats_count_unk(hybrid_tok):
    before = dict(hybrid_tok.stats)
    hybrid_tok(["好😀😀", "好"])
    assert hybrid_tok.stats["unk"] - before.get("unk", 0) == 2
    assert hybrid_tok.stats["rows"] - before.get("rows", 0) == 2
    assert 0 < hybrid_tok.unk_rate < 1
    assert hybrid_tok.unknown_chars(["好😀"]) == {"😀": 1}


def test_pairs_truncation_overflow_padding(hybrid_tok, reviews):
    a, b = [r[:8] for r in reviews[:20]], reviews[20:40]
    enc = hybrid_tok(a, b, truncation="only_second", max_length=24, stride=4,
                     return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    assert all(len(r) == 24 for r in enc["input_ids"])
    assert sorted(set(enc["overflow_to_sample_mapping"])) == list(range(20))
    for r, sample in enumerate(enc["overflow_to_sample_mapping"]):
        for (s, e), sid in zip(enc["offset_mapping"][r], enc.sequence_ids(r)):
            if sid is not None:
                text = (a if sid == 0 else b)[sample]
                assert 0 <= s < e <= len(text)
        assert enc["token_type_ids"][r][: enc.sequence_ids(r).index(1)] == [0] * enc.sequence_ids(r).index(1)
    # windows overlap by `stride` tokens of the second text
    rows = [r for r, s in enumerate(enc["overflow_to_sample_mapping"]) if s == 0]
    if len(rows) > 1:
        second = lambda r: [o for o, sid in zip(enc["offset_mapping"][r], enc.sequence_ids(r)) if sid == 1]
        assert second(rows[0])[-4:] == second(rows[1])[:4]
    t = hybrid_tok(a, padding=True, pad_to_multiple_of=8, return_tensors="pt")
    assert t["input_ids"].shape[1] % 8 == 0


def test_same_specials_and_signature_as_wordpiece(hybrid_tok):
    assert hybrid_tok.pad_token_id == 0 and hybrid_tok.unk_token == "[UNK]"
    assert [hybrid_tok.cls_token, hybrid_tok.sep_token, hybrid_tok.mask_token] == ["[CLS]", "[SEP]", "[MASK]"]
    assert len(hybrid_tok) == hybrid_tok.vocab_size == 12000
    enc = hybrid_tok(["好的", "不错"], return_special_tokens_mask=True, return_length=True)
    assert set(enc) == {"input_ids", "token_type_ids", "attention_mask", "special_tokens_mask", "length"}
    assert isinstance(hybrid_tok, HybridTokenizer) and not isinstance(hybrid_tok, WordPieceTokenizer)


def test_save_reload_identical(hybrid_tok, tmp_path, reviews):
    hybrid_tok.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, HybridTokenizer)
    kw = dict(return_offsets_mapping=True, truncation=True, max_length=64)
    sample = reviews[:300] + ["我爱飞桨"]
    assert dict(again(sample, reviews[300:601], **kw)) == dict(hybrid_tok(sample, reviews[300:601], **kw))
    assert "飞桨" in again.tokenize("我爱飞桨")


def test_decode_round_trip(hybrid_tok):
    text = "这家餐厅的服务非常好 Hello World"
    ids = hybrid_tok(text)["input_ids"]
    assert hybrid_tok.decode(ids, skip_special_tokens=True) == "这家餐厅的服务非常好hello world"


def test_user_word_added_later(hybrid_tok):
    seg = JiebaSegmenter()
    assert "桨叶轮" not in seg.cut("大桨叶轮转")
    seg.add_word("桨叶轮")
    assert "桨叶轮" in seg.cut("大桨叶轮转")
    with pytest.raises(ConfigError, match="user word"):
        seg.add_word("a b")


@pytest.mark.parametrize("corpus", ["reviews", "peoples_daily"])
def test_rjieba_segments_corpus_as_jieba(corpus, request):
    pytest.importorskip("rjieba")
    from nlp.tokenizer._fold import fold_table

    texts = [t.translate(fold_table()) for t in request.getfixturevalue(corpus)]
    fast = JiebaSegmenter(["飞桨"], backend="rjieba").cut_batch(texts)
    slow = JiebaSegmenter(["飞桨"], backend="jieba").cut_batch(texts)
    diffs = [i for i, (x, y) in enumerate(zip(fast, slow)) if x != y]
    assert diffs == []
    assert all("".join(w) == t for w, t in zip(fast, texts))
