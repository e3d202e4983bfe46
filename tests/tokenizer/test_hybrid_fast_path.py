"""The hybrid's joined-text batch path against its reference, the pre-tokenized word path.

The fast path (fold the batch with numpy, cut, join the words with spaces, encode raw text in
Rust, offsets = Rust offsets - word id) must give exactly what handing jieba's words to the
backend pre-tokenized gives (ids, tokens, word ids, sequence ids, offsets into the original).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nlp.tokenizer import HybridTokenizer
from nlp.tokenizer._fold import fold_batch, fold_table

ODD = [
    "",
    " ",
    "我爱 北京\t天安门\n",
    "  前后有空格  ",
    "控制\x00字符\x07和\u200b零宽",
    "ＡＢＣ１２３，全角！ Hello  World",
    "emoji😀👍🏽ok",
    "我爱飞桨深度学习框架",
    "a\u3000b\r\nc",
    "[CLS] [MASK] 特殊记号写在文本里",
]


def _both(tok, monkeypatch, *args, **kwargs):
    assert tok._joined_ok
    fast = tok(*args, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(tok, "_joined_ok", False)
        ref = tok(*args, **kwargs)
    return fast, ref


def _assert_same(fast, ref):
    assert dict(fast) == dict(ref)
    for r in range(len(ref.encodings)):
        assert fast.tokens(r) == ref.tokens(r)
        assert fast.word_ids(r) == ref.word_ids(r)
        assert fast.sequence_ids(r) == ref.sequence_ids(r)
        assert fast.offsets(r) == ref.offsets(r)


@pytest.mark.parametrize("corpus", ["reviews", "peoples_daily"])
def test_corpus_same_as_pretokenized_words(hybrid_tok, monkeypatch, corpus, request):
    texts = request.getfixturevalue(corpus)[::5] + ODD
    fast, ref = _both(hybrid_tok, monkeypatch, texts, return_offsets_mapping=True)
    _assert_same(fast, ref)


def test_pairs_truncation_overflow_same(hybrid_tok, monkeypatch, reviews):
    a, b = reviews[:200] + ODD, reviews[200:400] + ODD[::-1]
    kw = dict(truncation="longest_first", max_length=20, stride=3, return_overflowing_tokens=True,
              return_offsets_mapping=True, padding="max_length")
    fast, ref = _both(hybrid_tok, monkeypatch, a, b, **kw)
    _assert_same(fast, ref)
    fast, ref = _both(hybrid_tok, monkeypatch, ODD, add_special_tokens=False, return_offsets_mapping=True)
    _assert_same(fast, ref)


@pytest.mark.parametrize("padding", [False, "max_length", True])
def test_pipelined_chunks_same_as_one_call(hybrid_tok, monkeypatch, reviews, padding):
    from nlp.tokenizer import hybrid

    a, b = reviews[:150] + ODD, reviews[150:300] + ODD
    kw = dict(truncation=True, max_length=24, stride=2, return_overflowing_tokens=True,
              return_offsets_mapping=True, padding=padding)
    whole = hybrid_tok(a, b, **kw)
    monkeypatch.setattr(hybrid, "_PIPELINE_CHUNK", 7)  # 23 chunks through the worker thread
    _assert_same(hybrid_tok(a, b, **kw), whole)
    with pytest.raises(Exception, match="surrogate"):
        hybrid_tok(a[:50] + ["\ud800"] + a[50:])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), min_size=1, max_size=4))
def test_any_unicode_same_as_pretokenized_words(hybrid_tok, monkeypatch, texts):
    fast, ref = _both(hybrid_tok, monkeypatch, texts, return_offsets_mapping=True)
    _assert_same(fast, ref)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",))), max_size=5))
def test_fold_batch_is_translate(texts):
    table = fold_table()
    assert fold_batch(texts) == [t.translate(table) for t in texts]
    assert fold_batch(texts, space="\x00") == [t.translate(table).replace(" ", "\x00") for t in texts]
    plain = fold_table(lower=False, width=False)
    assert fold_batch(texts, lower=False, width=False) == [t.translate(plain) for t in texts]


def test_fold_batch_edges():
    assert fold_batch([]) == []
    assert fold_batch(["", "", ""]) == ["", "", ""]
    assert fold_batch(["a\nb", "\n"]) == ["a b", " "]
    with pytest.raises(UnicodeEncodeError):
        fold_batch(["ok", "a\ud800"])
    with pytest.raises(ValueError, match="newline"):
        fold_batch(["a"], space="\n")


def test_whitespace_inside_a_given_word_makes_no_token(hybrid_tok):
    enc = hybrid_tok([["hello world", "好 的"]], is_split_into_words=True)
    assert hybrid_tok.unk_token not in enc.tokens(0)
    assert enc.word_ids(0) == [None] + [0] * (len(enc.tokens(0)) - 4) + [1, 1, None]


def test_special_tokens_that_could_match_joined_text_use_the_word_path():
    chars = list("好的不错hello") + ["he", "##llo", "##l", "##o", "##e"]
    vocab = {t: i for i, t in enumerate(["[PAD]", "UNK", "[CLS]", "[SEP]", "[MASK]"] + chars)}
    tok = HybridTokenizer(vocab, [], unk_token="UNK", do_lower_case=False)
    assert not tok._joined_ok
    text = "好的 hello 不错😀UNKNOWN"
    enc = tok(text, return_offsets_mapping=True)
    for (s, e), t, w in zip(enc["offset_mapping"], enc.tokens(), enc.word_ids()):
        if w is not None and t != "UNK":
            assert text[s:e] == t.removeprefix("##")
    plain = HybridTokenizer(vocab | {"[UNK]": len(vocab)}, [], do_lower_case=False)
    assert plain._joined_ok


def test_python_jieba_backend_same_as_rjieba(hybrid_tok, reviews, peoples_daily):
    pytest.importorskip("rjieba")
    import tokenizers

    backend = tokenizers.Tokenizer.from_str(hybrid_tok.backend_tokenizer.to_str())
    slow = HybridTokenizer(backend=backend, user_words=["飞桨"], segmenter_backend="jieba")
    assert slow.segmenter.backend == "jieba" and hybrid_tok.segmenter.backend == "rjieba"
    texts = reviews[::40] + peoples_daily[::40] + ODD
    _assert_same(slow(texts, return_offsets_mapping=True), hybrid_tok(texts, return_offsets_mapping=True))
