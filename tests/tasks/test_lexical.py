"""The lexical-analysis task: tags, metrics (a hand-computed case), the built-in dataset (the NER
dataset's sentences and splits, held out of pretraining and of every training set), and the
pipelines (offsets into the text as given, windows, user dictionaries, errors) on a fake backend
whose scores depend on the character only, and on a tiny random model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tasks._task_fixtures import tiny_config, wordpiece_tokenizer

import nlp
from nlp._common import ConfigError, DataError
from nlp.tasks import get_task
from nlp.tasks.lexical import (
    POS_TAGS,
    ErnieForLexicalAnalysis,
    LexicalAnalysisPipeline,
    PosTaggingPipeline,
    SegmentationPipeline,
    UserDictionary,
    char_tags,
    entities_from_words,
    lexical_labels,
    lexical_metrics,
    read_tagged_words,
    read_user_dictionary,
    words_from_tags,
)
from nlp.tasks.lexical.tags import words_from_tag_ids
from nlp.tasks.ner import get_entities
from nlp.tasks.ner.preprocess import visible_characters

LABELS = lexical_labels()
ALPHABET = "我爱北京天安门江泽民在发表讲话，。 \u3000\t😀ＡＢＣ１９AbC2024\u200b\u200d\ufeff-"


# ---------------------------------------------------------------- tags and metrics


def test_char_tags_and_words_round_trip():
    words, pos = ["迈向", "充满", "希望", "的", "新世纪"], ["v", "v", "n", "u", "n"]
    tags = char_tags(words, pos)
    assert tags[:5] == ["B-v", "E-v", "B-v", "E-v", "B-n"] and tags[6] == "S-u" and tags[7:] == ["B-n", "I-n", "E-n"]
    text = "".join(words)
    assert words_from_tags(text, tags) == [(0, 2, "v"), (2, 4, "v"), (4, 6, "n"), (6, 7, "u"), (7, 10, "n")]
    assert len(LABELS) == 4 * len(POS_TAGS) == 168 and LABELS[:4] == ["B-Ag", "I-Ag", "E-Ag", "S-Ag"]
    with pytest.raises(DataError, match="2 words but 1 POS"):
        char_tags(["a", "b"], ["n"])


def test_words_never_hold_white_space_and_untagged_characters_are_kept():
    text = "北 京\u200b人"
    # a word tagged across the space is cut there; the zero-width character (no tag) joins the open word
    tags = ["B-ns", None, "I-ns", None, "E-ns"]
    assert words_from_tags(text, tags) == [(0, 1, "ns"), (2, 5, "ns")]
    # an untagged character outside any word is a symbol of its own
    assert words_from_tags("\u200b人", [None, "S-n"]) == [(0, 1, "w"), (1, 2, "n")]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(LABELS) - 1), max_size=40))
def test_words_from_tag_ids_equal_words_from_tags(ids):
    """The numpy path of fully tagged texts without white space, on any id sequence (malformed
    ones too: I after E, E without B, a POS change inside a word)."""
    text = "字" * len(ids)
    assert words_from_tag_ids(np.array(ids, dtype=np.int64), LABELS) == words_from_tags(text, [LABELS[i] for i in ids])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET + "\xa0\x1c\x1f\u2028\u2029\u0085\u180e\r\n\v\f", max_size=30))
def test_visible_characters_are_every_character_but_white_space(text):
    offsets, chars = visible_characters(text)
    assert offsets == [i for i, c in enumerate(text) if not c.isspace()]
    assert chars == [text[i] for i in offsets]


def test_entities_follow_the_ner_datasets_name_rule():
    words = [(0, 1, "nr"), (1, 3, "nr"), (3, 4, "p"), (4, 6, "ns"), (6, 9, "nr"), (9, 11, "nt"), (11, 12, "nr")]
    assert entities_from_words(words) == [("PER", 0, 3), ("LOC", 4, 6), ("PER", 6, 9), ("ORG", 9, 11),
                                          ("PER", 11, 12)]


def test_metrics_on_a_hand_computed_case():
    gold = [[(0, 2, "r"), (2, 3, "p"), (3, 5, "ns"), (5, 7, "v")],      # 我们/r 在/p 北京/ns 工作/v
            [(0, 1, "nr"), (1, 3, "nr"), (3, 4, "v")]]                  # 江/nr 泽民/nr 说/v
    pred = [[(0, 2, "r"), (2, 4, "v"), (4, 5, "ns"), (5, 7, "vn")],     # 我们/r 在北/v 京/ns 工作/vn
            [(0, 3, "nr"), (3, 4, "v")]]                                # 江泽民/nr 说/v
    m = lexical_metrics(gold, pred)
    # 3 of 6 predicted words are gold words (我们, 工作, 说), of 7 gold words
    assert m["word_precision"] == pytest.approx(3 / 6) and m["word_recall"] == pytest.approx(3 / 7)
    assert m["word_f1"] == pytest.approx(6 / 13)  # 2PR/(P+R) = (3/7)/(13/14)
    assert m["pos_accuracy"] == pytest.approx(2 / 3)  # 我们/r and 说/v right, 工作/vn wrong
    assert m["word_pos_f1"] == pytest.approx(4 / 13)  # P = 2/6, R = 2/7
    # entities: LOC 北京 (3, 5) missed (predicted 京 (4, 5)); PER 江泽民 found though segmented otherwise
    assert (m["entity_precision"], m["entity_recall"], m["entity_f1"]) == pytest.approx((0.5, 0.5, 0.5))
    assert m["per_type"]["PER"]["f1"] == 1.0 and m["per_type"]["LOC"]["f1"] == 0.0
    assert m["words"] == 7 and m["entities"] == 2
    assert lexical_metrics(gold, gold)["word_f1"] == 1.0 and lexical_metrics([], [])["word_f1"] == 0.0
    with pytest.raises(DataError, match="end at character"):
        lexical_metrics([[(0, 2, "n")]], [[(0, 3, "n")]])


# ---------------------------------------------------------------- data


def test_read_tagged_words_and_its_errors(tmp_path):
    f = tmp_path / "pd.txt"
    f.write_text("[中共/nt 中央/n]nt  总书记/n  江/nr  泽民/nr  。/w\n\n北京/ns  欢迎/v  你/r\n", encoding="utf-8")
    ds, stats = read_tagged_words(f, return_stats=True)
    assert ds[0]["words"] == ["中共", "中央", "总书记", "江", "泽民", "。"]
    assert [POS_TAGS[i] for i in ds[0]["pos"]] == ["nt", "n", "n", "nr", "nr", "w"]
    assert ds[0]["entities"] == {"type": ["ORG", "PER"], "start": [0, 7], "end": [4, 10]}  # the compound is ONE entity
    assert len(ds) == 2 and stats.skipped["blank lines"] == 1
    spec = get_task("lexical-analysis")
    assert spec.training_texts(ds) == ["中共中央总书记江泽民。", "北京欢迎你"]
    assert spec.label_names(ds) == LABELS
    for bad, match in (("北京/ns 欢迎\n", r"pd.txt:1: '欢迎' is not word/POS"),
                       ("好/a\n北京/xx\n", r"pd.txt:2: word '北京' has the POS 'xx'")):
        f.write_text(bad, encoding="utf-8")
        with pytest.raises(DataError, match=match):
            read_tagged_words(f)


@pytest.fixture(scope="module")
def cache(datasets_cache):
    return datasets_cache


def test_builtin_dataset_has_the_ner_datasets_sentences_and_splits(cache):
    from nlp.tasks.datasets.builtin import load_builtin

    lex, stats = load_builtin("peoples-daily-1998-lexical", cache)
    ner, ner_stats = load_builtin("peoples-daily-1998-ner", cache)
    ner_names = ner["train"].features["ner_tags"].feature.names
    for split in ("dev", "test"):  # exactly the NER dataset's sentences, entity for entity
        assert lex[split]["id"] == ner[split]["id"]
        assert ["".join(w) for w in lex[split]["words"]] == ["".join(t) for t in ner[split]["tokens"]]
        for ents, tags in zip(lex[split]["entities"], ner[split]["ner_tags"]):
            spans = [(t, s, e + 1) for t, s, e in get_entities([ner_names[i] for i in tags])]
            assert list(zip(*ents.values())) == spans
    scored = {"".join(w) for split in ("dev", "test") for w in lex[split]["words"]}
    train_texts = ["".join(w) for w in lex["train"]["words"]]
    assert not scored & set(train_texts)  # no dev/test text is trained on, in either dataset...
    assert lex["train"]["id"] == ner["train"]["id"] and len(train_texts) > 35_000  # ...the same sentences
    assert train_texts == ["".join(t) for t in ner["train"]["tokens"]]
    reason = "train sentences whose text is a dev/test sentence (dropped)"
    assert stats["skipped"] == {reason: 407} and ner_stats["skipped"][reason] == 407  # and nothing else
    # the gold entities are the words' (nr/ns/nt, surname + given name) in every sentence
    names = lex["test"].features["pos"].feature.names
    for ws, ps, ents in zip(lex["test"]["words"], lex["test"]["pos"], lex["test"]["entities"]):
        words, off = [], 0
        for w, p in zip(ws, ps):
            words.append((off, off + len(w), names[p]))
            off += len(w)
        assert entities_from_words(words) == list(zip(*ents.values()))


def test_dev_and_test_stay_out_of_pretraining_and_of_every_training_set(cache, monkeypatch):
    from nlp.tasks import datasets as nds
    from nlp.tasks.datasets.builtin import load_builtin
    from nlp.train.corpus import HeldOut, held_out_texts

    lex, _ = load_builtin("peoples-daily-1998-lexical", cache)
    scored = {"".join(w) for split in ("dev", "test") for w in lex[split]["words"]}
    # every training set built from the same file: the NER dataset and the shipped NER model's
    # zh-ner drop them too
    for name in ("peoples-daily-1998-ner", "zh-ner"):
        train, _ = load_builtin(name, cache)
        assert not scored & {"".join(t) for t in train["train"]["tokens"]}, name
    # pretraining: the dataset is registered by its task package, so its dev/test texts are held out
    assert nds.BUILTIN["peoples-daily-1998-lexical"].task == "lexical-analysis"
    monkeypatch.setattr(nds.builtin, "BUILTIN", {"peoples-daily-1998-lexical": nds.BUILTIN["peoples-daily-1998-lexical"]})
    monkeypatch.setattr(nds, "BUILTIN", nds.builtin.BUILTIN)
    held = held_out_texts(cache)
    assert set(held) == {"peoples-daily-1998-lexical"} and set(held["peoples-daily-1998-lexical"]) == scored
    filt = HeldOut(held["peoples-daily-1998-lexical"])
    assert all(filt.clean(t) is None for t in sorted(scored)[:2000])


# ---------------------------------------------------------------- pipelines


class CharBackend:
    """A backend whose logits for a token depend on its id only (a fixed random table): a
    character gets the same scores in every window, so windowing must not change the result."""

    name, precision, decoding = "fake", "fp32", {}

    def __init__(self, vocab_size: int, seed: int = 0) -> None:
        self.config = tiny_config(vocab_size, id2label=dict(enumerate(LABELS)))
        rng = np.random.default_rng(seed)
        self.table = rng.normal(0, 2, (vocab_size, len(LABELS))).astype(np.float32)

    def __call__(self, batch):
        return {"logits": self.table[np.asarray(batch["input_ids"])]}


@pytest.fixture(scope="module")
def tok():
    return wordpiece_tokenizer([ALPHABET + "飞桨百度深度学习平台中华人民共和国"])


@pytest.fixture(scope="module")
def backend(tok):
    return CharBackend(tok.vocab_size)


def _check_cover(text: str, words: list[dict]) -> None:
    assert all(text[w["start"]:w["end"]] == w["word"] for w in words)
    assert all(not w["word"][0].isspace() and not w["word"][-1].isspace() for w in words)
    covered = [i for w in words for i in range(w["start"], w["end"])]
    assert covered == sorted(set(covered))  # in order, nothing doubled
    assert [i for i in covered if not text[i].isspace()] == [i for i, c in enumerate(text) if not c.isspace()]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=80))
def test_offsets_slice_the_text_as_given_and_words_cover_it(tok, backend, text):
    pipe = LexicalAnalysisPipeline(backend, tok, max_length=12)  # 10 characters a window
    out = pipe(text)
    if pipe.tokenless([text]):  # no tokens at all (only zero-width or control characters): no words, as blank
        assert out["words"] == []
    else:
        _check_cover(text, out["words"])
    assert all(w["pos"] in POS_TAGS for w in out["words"])
    assert all(text[e["start"]:e["end"]] == e["text"] and e["type"] in ("PER", "LOC", "ORG") for e in out["entities"])
    # windows lose and double nothing: per-character scores decoded once over the whole text
    assert LexicalAnalysisPipeline(backend, tok, max_length=256)(text) == out


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60), st.lists(st.text(alphabet="我爱北京天安门江泽民ＡＢ", min_size=1, max_size=4),
                                                   max_size=4))  # no white space: a user word holds none
def test_user_words_are_never_split_and_other_words_do_not_change(tok, backend, text, user_words):
    plain = PosTaggingPipeline(backend, tok)(text)
    pipe = PosTaggingPipeline(backend, tok, user_dict=[(w, "nz") if i % 2 else w for i, w in enumerate(user_words)])
    got = pipe(text)
    matches = pipe.user_dict.find(text)
    spans = {(w["start"], w["end"]) for w in got}
    assert {(s, e) for s, e, _ in matches} <= spans  # each match is one word
    for s, e, pos in matches:
        if pos is not None:
            assert next(w for w in got if (w["start"], w["end"]) == (s, e))["pos"] == pos
    for w in plain:  # a word of the plain result that touches no match is unchanged
        if not any(s < w["end"] and w["start"] < e for s, e, _ in matches):
            assert w in got
    covered = [i for w in got for i in range(w["start"], w["end"])]
    assert covered == sorted(set(covered))
    if pipe.tokenless([text]):  # no tokens at all: no words, as a blank text
        assert got == []
        return
    assert [i for i in covered if not text[i].isspace()] == [i for i, c in enumerate(text) if not c.isspace()]


def test_user_dictionary_matching_files_and_errors(tmp_path):
    d = UserDictionary.load(["北京", "北京大学", ("大学生", "n")])
    assert d.find("北京大学生活") == [(0, 4, None)]  # the longest word at each position, left to right
    assert d.find("在北京生活，大学生") == [(1, 3, None), (6, 9, "n")]
    f = tmp_path / "user.txt"
    f.write_text("# words\n飞桨\n百度 nt\n深度学习 10 n\n平台 3\n\n", encoding="utf-8")
    assert read_user_dictionary(f) == {"飞桨": None, "百度": "nt", "深度学习": "n", "平台": None}
    for bad, match in (("飞桨 1 nz x\n", r"user.txt:1: expected 'word \[frequency\] \[pos\]'"),
                       ("好\n飞桨 many nz\n", r"user.txt:2: the frequency 'many' is not a whole number")):
        f.write_text(bad, encoding="utf-8")
        with pytest.raises(DataError, match=match):
            read_user_dictionary(f)
    f.write_bytes("飞桨\n".encode("gbk"))
    with pytest.raises(DataError, match="user.txt:1: not utf-8"):
        read_user_dictionary(f)
    with pytest.raises(ConfigError, match="is not a file"):
        UserDictionary.load(str(tmp_path / "missing.txt"))
    for bad, err in (([""], DataError), ([" 北京"], DataError), ([3], TypeError), ([("北京", "n s")], DataError),
                     (5, TypeError)):
        with pytest.raises(err):
            UserDictionary.load(bad)


def test_pipelines_on_a_tiny_model_shapes_options_and_errors(tok):
    torch.manual_seed(0)
    model = ErnieForLexicalAnalysis(tiny_config(tok.vocab_size, id2label=dict(enumerate(LABELS))))
    text = "江泽民在北京发表讲话 ＡＢＣ😀"
    lac = nlp.pipeline("lexical-analysis", model=model, tokenizer=tok, user_dict={"北京": "ns", "江泽民": "nr"})
    assert isinstance(lac, LexicalAnalysisPipeline)
    out = lac(text)
    _check_cover(text, out["words"])
    assert {"type": "PER", "text": "江泽民", "start": 0, "end": 3} in out["entities"]
    assert {"type": "LOC", "text": "北京", "start": 4, "end": 6} in out["entities"]
    pos = nlp.pipeline("pos-tagging", model=model, tokenizer=tok)
    seg = nlp.pipeline("word-segmentation", model=model, tokenizer=tok)
    assert isinstance(pos, PosTaggingPipeline) and isinstance(seg, SegmentationPipeline)
    tagged = pos([text, "", " \t"])
    assert tagged[1:] == [[], []] and set(tagged[0][0]) == {"word", "start", "end", "pos"}
    assert seg(text) == [{k: w[k] for k in ("word", "start", "end")} for w in tagged[0]]
    seg.add_word("发表讲话")
    assert {"word": "发表讲话", "start": 6, "end": 10} in seg(text)
    assert lac([]) == [] and lac("") == {"words": [], "entities": []}
    with pytest.raises(TypeError, match="text 1 must be a str"):
        seg(["好", 3])
    with pytest.raises(TypeError, match="must be a str or a list of str"):
        seg(None)
    with pytest.raises(DataError, match="lone surrogate"):
        seg("好\ud800")
    with pytest.raises(ConfigError, match="stride"):
        seg(text, stride=10_000)
    ner_like = ErnieForLexicalAnalysis(tiny_config(tok.vocab_size, id2label={0: "O", 1: "B-PER", 2: "I-PER"}))
    with pytest.raises(ConfigError, match="B-/I-/E-/S-POS tags"):
        LexicalAnalysisPipeline(ner_like, tok)


def test_the_spec_featurizes_characters_and_scores_whole_sentences(tok):
    from types import SimpleNamespace

    spec = get_task("lexical")
    assert spec.name == "lexical-analysis" and get_task("cws").head is spec.head is get_task("postag").head
    columns = {"words": [["北京", "欢迎", "你"], ["江", "泽民", "在", "北京"] * 5],
               "pos": [[POS_TAGS.index(p) for p in ("ns", "v", "r")],
                       [POS_TAGS.index(p) for p in ("nr", "nr", "p", "ns")] * 5]}
    feats = spec.featurize(columns, tok, SimpleNamespace(max_length=12), LABELS)
    assert feats["sentence_index"] == [0, 1, 1, 1, 1]  # the long sentence cut at word boundaries
    labels = [np.asarray(row) for row in feats["labels"]]
    assert [LABELS[i] for i in labels[0] if i != -100] == ["B-ns", "E-ns", "B-v", "E-v", "S-r"]
    rows = [dict(zip(feats, v)) for v in zip(*feats.values())]
    perfect = spec.score(labels, labels, label_names=LABELS, examples=None, features=rows, data=None)
    assert perfect == {"word_f1": 1.0, "word_precision": 1.0, "word_recall": 1.0, "pos_accuracy": 1.0,
                       "word_pos_f1": 1.0, "entity_f1": 1.0}
    worse = [np.where(row == LABELS.index("S-r"), LABELS.index("S-v"), row) for row in labels]  # 你/r -> 你/v
    scores = spec.score(worse, labels, label_names=LABELS, examples=None, features=rows, data=None)
    assert scores["word_f1"] == 1.0 and scores["pos_accuracy"] == pytest.approx(22 / 23)
