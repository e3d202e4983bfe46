"""The task paths under hostile use, beside the server and export suites
(tests/deploy/test_serve_hostile.py, tests/deploy/test_export_hostile.py): texts with no tokens
on every task, in the pipelines, `nlp predict` and the server; user dictionaries; the cost the
server charges for what it processes. Models are the shipped ernie-tiny-zh ones (fresh heads
where a task ships none)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import nlp
from nlp._common import ConfigError, DataError

sys.path.insert(0, str(Path(__file__).parents[1] / "deploy"))
import _serve_fixtures as fx  # noqa: E402

from nlp.deploy.server_config import ServeConfig  # noqa: E402

pytestmark = pytest.mark.timeout(600)

ASSETS = Path(nlp.__file__).parent / "assets"
LEXICAL = ASSETS / "ernie-tiny-zh-lexical"
# texts the tokenizer makes no token of: each is blank to the model
TOKENLESS = ["\u200b", "\x00", "\ufeff", "\x01\x02", "\ufe0f", "\u0301", "   ", ""]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-models")
    out = fx.build_models(root)
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tokenizer import load_tokenizer

    torch.manual_seed(0)
    d = root / "feature-extraction"
    ErnieForSentenceEmbedding.from_pretrained(fx.ASSET, lexical_weights=True).save_pretrained(d)
    load_tokenizer(fx.ASSET).save_pretrained(d)
    out["feature-extraction"] = d
    return out


# ------------------------------------------------------------ texts with no tokens: pipelines

@pytest.mark.parametrize("text", TOKENLESS)
def test_an_embedding_of_a_text_with_no_tokens_is_an_error_naming_it(models, text):
    emb = nlp.pipeline("feature-extraction", model=str(models["feature-extraction"]))
    with pytest.raises(DataError, match="text .* has no tokens"):
        emb(text)
    with pytest.raises(DataError, match="text 1 .* has no tokens"):
        emb(["今天天气很好", text])
    with pytest.raises(DataError, match="has no tokens"):
        emb.lexical_weights(["好", text])
    sim = nlp.pipeline("sentence-similarity", model=str(models["feature-extraction"]))
    with pytest.raises(DataError, match="has no tokens"):
        sim("今天天气很好", ["天气不错", text])
    with pytest.raises(DataError, match="has no tokens"):
        sim.search(text, ["天气不错"])
    with pytest.raises(DataError, match="text 1 .* has no tokens"):
        sim.index(["天气不错", text])


@pytest.mark.parametrize("text", TOKENLESS[:6])
def test_classification_of_a_text_with_no_tokens_is_an_error_not_the_prior(models, text):
    clf = nlp.pipeline("text-classification", model=str(models["text-classification"]))
    with pytest.raises(DataError, match="text 1 .* has no tokens"):
        clf(["服务很好", text])
    with pytest.raises(DataError, match="text_pair .* has no tokens"):
        clf("服务很好", text_pair=text)
    assert len(clf("服务很好")) == 1


def test_span_tasks_give_nothing_for_a_text_with_no_tokens_as_for_a_blank_one(models):
    """NER, lexical analysis, POS tagging and segmentation: no entities, no words; QA: no answer."""
    ner = nlp.pipeline("ner", model=str(models["token-classification"]))
    assert ner(TOKENLESS) == [[] for _ in TOKENLESS]
    lac = nlp.pipeline("lexical-analysis", model=str(LEXICAL))
    assert lac(TOKENLESS) == [{"words": [], "entities": []} for _ in TOKENLESS]  # was one 'w' word per character
    mixed = lac(["我爱北京", "\u200b", "北京\u200b"])
    assert mixed[1]["words"] == [] and [w["word"] for w in mixed[2]["words"]][-1].endswith("\u200b")
    assert nlp.pipeline("pos-tagging", model=str(LEXICAL))(TOKENLESS[:6]) == [[] for _ in TOKENLESS[:6]]
    assert nlp.pipeline("word-segmentation", model=str(LEXICAL))(TOKENLESS[:6]) == [[] for _ in TOKENLESS[:6]]
    qa = nlp.pipeline("qa", model=str(models["question-answering"]))
    none = {"answer": "", "score": 0.0, "start": 0, "end": 0}
    for text in TOKENLESS:
        assert qa(question=text, context="张三在北京工作") == none
        assert qa(question="谁在北京？", context=text) == none


def test_an_int8_export_refuses_a_text_with_no_tokens_as_pytorch_does(models, tmp_path):
    from nlp.deploy import export_model

    out = export_model(models["feature-extraction"], tmp_path / "int8", quantize="int8").out
    emb = nlp.pipeline("feature-extraction", model=str(out))
    assert emb(["好"]).shape[0] == 1
    for text in TOKENLESS[:6]:
        with pytest.raises(DataError, match="text 1 .* has no tokens"):
            emb(["好", text])


def test_nlp_predict_names_the_line_of_a_text_with_no_tokens(models, tmp_path, capsys):
    from nlp.cli import main

    src = tmp_path / "in.txt"
    src.write_text("今天天气很好\n\n\u200b\n", encoding="utf-8")
    assert main(["predict", str(models["feature-extraction"]), "--input", str(src), "--output", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
    err = capsys.readouterr().err
    assert "line 3" in err and "has no tokens" in err and "Traceback" not in err
    # a task whose answer to such a text is "nothing" answers it as a blank line
    assert main(["predict", str(LEXICAL), "--input", str(src), "--output", str(tmp_path / "lex.jsonl")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "lex.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3 and rows[2]["analysis"] == rows[1]["analysis"] == {"words": [], "entities": []}
    assert rows[0]["analysis"]["words"]


@pytest.mark.parametrize("text", ["😡", "💩👍", "😀 😀"])
def test_a_text_of_unknown_characters_only_is_refused_where_a_blank_one_is(models, text, tmp_path, capsys):
    """Every such text is `[UNK]` alone to the model, so classification and embeddings would give
    each the same answer (the shipped sentiment model said "positive, 0.85" to 😡); NER and the
    lexical tasks answer them (no entity; each symbol a word of its own)."""
    clf = nlp.pipeline("text-classification", model=str(models["text-classification"]))
    with pytest.raises(DataError, match="text 1 .* holds no character the model knows"):
        clf(["服务很好", text])
    assert len(clf("服务很好😡")) == 1
    emb = nlp.pipeline("feature-extraction", model=str(models["feature-extraction"]))
    with pytest.raises(DataError, match="text 1 .* holds no character the model knows"):
        emb(["好", text])
    assert nlp.pipeline("ner", model=str(models["token-classification"]))(text) == []
    words = nlp.pipeline("word-segmentation", model=str(LEXICAL))(text)
    assert [w["word"] for w in words] == [c for c in text if not c.isspace()]
    from nlp.cli import main

    src = tmp_path / "in.txt"
    src.write_text(f"今天天气很好\n{text}\n", encoding="utf-8")
    assert main(["predict", str(models["feature-extraction"]), "--input", str(src), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "input line 2" in err and "holds no character the model knows" in err and not (tmp_path / "o").exists()


# ------------------------------------------------------------ texts with no tokens: the server

@pytest.fixture(scope="module")
def embed_url(models):
    config = ServeConfig(model=str(models["feature-extraction"]), precision="fp32")
    with fx.running(config) as url:
        yield url


@pytest.mark.parametrize("text", TOKENLESS[:6])
def test_every_embedding_route_refuses_a_text_with_no_tokens_naming_field_and_index(embed_url, text):
    cases = [("/embed", {"inputs": text}, "inputs has no tokens"),
             ("/embed", {"inputs": ["好", text]}, r"inputs\[1\] has no tokens"),
             ("/embed_sparse", {"inputs": ["好", "好", text]}, r"inputs\[2\] has no tokens"),
             ("/similarity", {"inputs": {"source_sentence": text, "sentences": ["好"]}},
              "inputs.source_sentence has no tokens"),
             ("/similarity", {"inputs": {"source_sentence": "好", "sentences": ["好", text]}},
              r"inputs.sentences\[1\] has no tokens"),
             ("/predict", {"inputs": ["好", text]}, r"inputs\[1\] has no tokens")]
    for route, body, match in cases:
        r = httpx.post(embed_url + route, json=body, timeout=60)
        assert r.status_code == 422, (route, r.text)
        message = r.json().get("error") if route != "/predict" else r.json()["message"]
        import re

        assert re.search(match, message), (route, message)
    assert httpx.post(embed_url + "/embed", json={"inputs": ["好", "坏"]}, timeout=60).status_code == 200


def test_the_server_refuses_a_text_of_unknown_characters_only_where_it_would_answer_the_same(embed_url, models):
    for route, body, where in (("/embed", {"inputs": ["好", "😡"]}, "inputs[1]"),
                               ("/similarity", {"inputs": {"source_sentence": "好", "sentences": ["💩"]}},
                                "inputs.sentences[0]"),
                               ("/predict", {"inputs": "👍"}, "inputs")):
        r = httpx.post(embed_url + route, json=body, timeout=60)
        message = r.json()["message"] if route == "/predict" else r.json().get("error")
        assert r.status_code == 422 and message.startswith(where + " (") and "holds no character the model knows" \
            in message, (route, r.text)
    with fx.running(ServeConfig(model=str(models["token-classification"]), precision="fp32")) as url:
        r = httpx.post(url + "/predict", json={"inputs": ["😡", "李鹏😡在北京"]}, timeout=60)
        assert r.status_code == 200 and r.json()[0] == [], r.text


def test_other_tasks_on_the_server_refuse_a_text_with_no_tokens_as_they_refuse_a_blank_one(models):
    for task, body, match in (("text-classification", {"inputs": ["好", "\u200b"]}, r"inputs\[1\] has no tokens"),
                              ("token-classification", {"inputs": "\x00"}, "inputs has no tokens"),
                              ("question-answering", {"inputs": [{"question": "谁？", "context": "\ufeff"}]},
                               r"inputs\[0\].context has no tokens")):
        with fx.running(ServeConfig(model=str(models[task]), precision="fp32")) as url:
            r = httpx.post(url + "/predict", json=body, timeout=60)
            assert r.status_code == 422 and match.replace("\\", "") in r.json()["message"], r.text
            blank = httpx.post(url + "/predict", json={"inputs": "   "}, timeout=60)
            assert blank.status_code == 422


# ------------------------------------------------------------ user dictionaries (lexical pipelines)

@pytest.mark.parametrize("space", [" ", "\t", "\n", "\u00a0", "\u3000"])
def test_a_user_word_with_internal_white_space_is_refused_naming_it(space):
    from nlp.tasks.lexical.userdict import UserDictionary

    word = f"飞{space}桨"
    with pytest.raises(DataError, match="holds white space"):
        UserDictionary.load([word])
    with pytest.raises(DataError, match="holds white space"):
        UserDictionary.load([(word, "nz")])
    with pytest.raises(DataError, match="holds white space"):
        UserDictionary({word: None})
    with pytest.raises(DataError, match="holds white space"):
        nlp.pipeline("lexical-analysis", model=str(LEXICAL), user_dict=[word])


def test_a_forced_pos_outside_the_tag_set_is_refused_with_the_valid_set_and_a_did_you_mean():
    lac = nlp.pipeline("lexical-analysis", model=str(LEXICAL), user_dict=[("飞桨", "nz")])
    assert [w["pos"] for w in lac("我用飞桨")["words"] if w["word"] == "飞桨"] == ["nz"]
    with pytest.raises(DataError, match=r"'NOTATAG', which is not one of the model's tags: Ag, a, .*nz"):
        nlp.pipeline("lexical-analysis", model=str(LEXICAL), user_dict=[("飞桨", "NOTATAG")])
    with pytest.raises(DataError, match="Did you mean 'nz'"):
        nlp.pipeline("pos-tagging", model=str(LEXICAL), user_dict={"飞桨": "nzz"})
    with pytest.raises(DataError, match="not one of the model's tags"):
        lac.add_word("百度", "ORG")
    assert "百度" not in lac.user_dict


def test_a_user_dictionary_file_with_a_bad_pos_is_refused(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("飞桨 10 nz\n百度 5 XX\n", encoding="utf-8")
    with pytest.raises(DataError, match="'XX', which is not one of"):
        nlp.pipeline("lexical-analysis", model=str(LEXICAL), user_dict=str(path))


def test_a_user_word_with_a_lone_surrogate_is_refused():
    from nlp.tasks.lexical.userdict import UserDictionary

    with pytest.raises(DataError, match="lone surrogate '\\\\ud800' at character 1"):
        UserDictionary.load(["飞\ud800桨"])


def test_a_bytes_path_is_read_as_a_path(tmp_path):
    from nlp._common import ConfigError
    from nlp.tasks.lexical.userdict import UserDictionary

    path = tmp_path / "words.txt"
    path.write_text("飞桨 nz\n", encoding="utf-8")
    assert UserDictionary.load(bytes(path)).items() == [("飞桨", "nz")]
    with pytest.raises(ConfigError, match="'/no/such/words.txt' is not a file"):
        UserDictionary.load(b"/no/such/words.txt")


def test_matching_a_long_user_word_costs_a_few_steps_per_character():
    """A 10,000-character entry: every length of it was tried at each character of a text of its
    first character (the square of the entry's length per character); the automaton makes at most
    two transitions per character amortised, whatever the entries' lengths."""
    from nlp.tasks.lexical.userdict import UserDictionary

    d = UserDictionary.load(["北京", "北京大学", "中" * 10_000 + "国", "中国"])
    for n in (2_000, 8_000, 20_000):
        text = "中" * n
        assert d.find(text) == [] and d.steps <= 2 * n
        start = n - 10_000 if n >= 10_000 else n - 1  # the long word where it fits, else 中国
        assert d.find(text + "国") == [(start, n + 1, None)] and d.steps <= 2 * (n + 1)
    assert d.find("中" * 10_000 + "国") == [(0, 10_001, None)]
    assert d.find("我在北京大学工作，北京") == [(2, 6, None), (9, 11, None)]


# ------------------------------------------------------------ cost: process only what is kept

class _CountingTokenizer:
    """A tokenizer that counts the characters it is given (the work the pipeline does on text)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.chars = tokenizer, 0

    def __call__(self, text, *args, **kwargs):
        self.chars += sum(map(len, [text] if isinstance(text, str) else text))
        return self.tokenizer(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def _long_text(n: int) -> str:
    rng = np.random.default_rng(0)
    pieces = list("今天天气很好我们去北京大学，。") + [" internationalization ", " abc ", "\u200b", "😀"]
    return "".join(pieces[i] for i in rng.integers(0, len(pieces), n))[:n]


def test_truncate_tokenizes_what_the_first_window_keeps_not_the_whole_text(models):
    """/embed with truncate: true is costed as one window a text, but each whole text was
    tokenized (64 texts of 100,000 characters held the worker for seconds); now a prefix that
    holds the first window's tokens is, and the vectors are those of the whole text's window."""
    emb = nlp.pipeline("feature-extraction", model=str(models["feature-extraction"]), max_length=64)
    texts = [_long_text(100_000), "\u200b" * 5_000 + _long_text(3_000), _long_text(100)]
    want = emb(texts, truncate=True)
    emb.kept_prefixes = lambda batch, tokens: list(batch)  # the whole text, as before
    counting = emb.tokenizer = _CountingTokenizer(emb.tokenizer)
    assert np.allclose(emb(texts, truncate=True), want, atol=1e-6)
    assert counting.chars > 100_000
    del emb.kept_prefixes
    counting.chars = 0
    got = emb(texts * 4, truncate=True)
    assert np.allclose(got, np.concatenate([want] * 4), atol=1e-6)
    assert counting.chars < 4 * (2 * 20_000 + 100)  # a few thousand characters a text at most, not 100,000


def test_classification_tokenizes_what_its_window_keeps(models):
    clf = nlp.pipeline("text-classification", model=str(models["text-classification"]), max_length=64)
    texts = [_long_text(100_000), _long_text(50)]
    want = clf(texts, top_k=None)
    counting = clf.tokenizer = _CountingTokenizer(clf.tokenizer)
    assert clf(texts, top_k=None) == want
    assert counting.chars < 2 * 20_000
    pairs = clf(texts, text_pair=["好", "坏"])  # a pair truncates longest first: the whole texts, as before
    assert len(pairs) == 2 and counting.chars > 100_000


def test_the_server_costs_a_truncated_text_as_one_window(models):
    from nlp.tasks.embedding.serving import EmbedAdapter
    from nlp.tasks.serving import Limits

    class Served:
        max_length = 64
        pipeline = nlp.pipeline("feature-extraction", model=str(models["feature-extraction"]), max_length=64)

    limits = Limits(max_inputs=64, max_text_chars=100_000)
    texts = [_long_text(100_000)] * 4
    kept = EmbedAdapter().parse_body({"inputs": texts, "truncate": True}, Served, limits)
    whole = EmbedAdapter().parse_body({"inputs": texts}, Served, limits)
    assert kept.rows == 4 and whole.rows > 400
    counting = Served.pipeline.tokenizer = _CountingTokenizer(Served.pipeline.tokenizer)
    EmbedAdapter().run(Served, kept.items, kept.key)
    assert counting.chars < 4 * 20_000  # what one window a text costs is what is processed


def test_the_jieba_segmenter_checks_its_user_words_as_the_lexical_pipelines_do(tmp_path):
    """The same flaw in the other user dictionary: white space inside a word, a lone surrogate, a
    bytes path (read as a list of byte values: 'got 233 (int)')."""
    pytest.importorskip("jieba")
    for word in ("飞 桨", "飞\u3000桨", "飞\ud800桨"):
        with pytest.raises(DataError, match="holds"):
            nlp.pipeline("word-segmentation", model="jieba", user_dict=[word])
    seg = nlp.pipeline("word-segmentation", model="jieba", user_dict=["飞桨"])
    with pytest.raises(DataError, match="holds white space"):
        seg.add_word("深度 学习")
    path = tmp_path / "words.txt"
    path.write_text("飞桨平台\n", encoding="utf-8")
    seg = nlp.pipeline("word-segmentation", model="jieba", user_dict=bytes(path))
    assert "飞桨平台" in [w["word"] for w in seg("我用飞桨平台")]


@pytest.mark.parametrize("joiner", ["\u200b", "\u00ad", "\ufeff", "\x00", "\u200d"])
def test_a_character_the_tokenizer_drops_does_not_cut_an_entity_in_two(joiner):
    # it is in no window, so it has no tag of its own: it used to read as "O" and end the name
    ner = nlp.pipeline("ner")
    text = f"张{joiner}三在北{joiner}京工作"
    found = [(e["type"], e["text"], e["start"], e["end"]) for e in ner(text)]
    assert found == [("PER", f"张{joiner}三", 0, 3), ("LOC", f"北{joiner}京", 4, 7)]
    assert [(e["text"]) for e in ner(f"{joiner}张三")] == ["张三"]  # and joins nothing at the edges


@pytest.mark.parametrize("top_k", [-1, 0, 1.5, True, "2"])
def test_a_classification_top_k_that_is_not_a_count_is_refused(top_k):
    # -1 used to drop the last label, 0 give every label, 1.5 end in a slicing TypeError
    classify = nlp.pipeline("sentiment-analysis")
    with pytest.raises(ConfigError, match=r"top_k must be a whole number >= 1 .* or None for all of them; got"):
        classify("很好", top_k=top_k)
    assert len(classify("很好", top_k=None)) == 2 and len(classify("很好", top_k=2)) == 2


@pytest.mark.parametrize("options, match", [({"protected": 5}, "protected must be a string of terms"),
                                            ({"same_sound": "no"}, "same_sound must be True or False")])
def test_a_correction_option_of_the_wrong_type_is_refused(options, match):
    with pytest.raises(TypeError, match=match):  # "no" used to read as true; 5 ended in "not iterable"
        nlp.pipeline("text-correction")("今天天气很好", **options)
