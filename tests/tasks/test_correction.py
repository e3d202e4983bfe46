"""The text-correction task: synthetic errors, the SIGHAN reader, the metrics, the head's kept
predictions, and the pipeline's offsets on hard text (a tiny model whose correction head is set by
hand, so that what it changes is known)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nlp
from nlp._common import DataError
from nlp.tasks import get_task
from nlp.tasks.correction.heads import ErnieForSpellingCorrection
from nlp.tasks.correction.metrics import csc_metrics
from nlp.tasks.correction.pipeline import TextCorrectionPipeline, parse_protected, protected_positions
from nlp.tasks.correction.preprocess import preprocess_correction
from nlp.tasks.correction.resources import is_chinese_char
from nlp.tasks.correction.spec import score_rows

from tasks._task_fixtures import tiny_config

ERNIE_TINY = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
pycorrector_missing = pytest.mark.skipif(
    __import__("importlib").util.find_spec("pycorrector") is None,
    reason="the correction extra (pycorrector's data files) is not installed")


# ----------------------------------------------------------------------------- synthetic errors

@pycorrector_missing
def test_synthetic_errors_are_deterministic_realistic_and_spare_non_chinese():
    from nlp.tasks.correction.resources import load_confusions
    from nlp.tasks.correction.synthetic import ErrorModel, corrupt, corrupt_all

    conf = load_confusions()
    assert "友" in conf.sound["有"] and "月" in conf.shape["朋"]  # same sound; similar shape
    base = ["我们今天去北京大学看朋友，iPhone 12 很好用！", "他说：“这件事情２０２６年再谈。”ABC abc", "你好"]
    sentences = [f"{s}{i}" for i in range(300) for s in base]
    first = corrupt_all(sentences, conf, seed=0)
    assert first == corrupt_all(sentences, conf, seed=0)  # same seed, same errors
    assert first[::-1] == corrupt_all(sentences[::-1], conf, seed=0)  # whatever the order
    assert first != corrupt_all(sentences, conf, seed=1)
    changed = 0
    for wrong, clean in first:
        assert len(wrong) == len(clean) and clean in sentences
        diff = [i for i, (a, b) in enumerate(zip(wrong, clean)) if a != b]
        assert len(diff) <= 3
        for i in diff:  # only Chinese characters change, into Chinese characters
            assert is_chinese_char(clean[i]) and is_chinese_char(wrong[i])
        changed += bool(diff)
    assert 0.6 < changed / len(first) < 0.8  # 30% of the sentences are left correct
    assert corrupt(sentences[0], conf, model=ErrorModel(clean_rate=1.0)) == sentences[0]
    assert corrupt("１２３ABC，。！😀", conf, model=ErrorModel(clean_rate=0.0)) == "１２３ABC，。！😀"
    with pytest.raises(ValueError, match="clean_rate must be in"):
        ErrorModel(clean_rate=1.5)


# ----------------------------------------------------------------------------- reader

@pycorrector_missing
def test_the_sighan15_file_reads_from_the_installed_wheel():
    from nlp.tasks.correction.data import read_pairs
    from nlp.tasks.correction.resources import pycorrector_file

    ds, stats = read_pairs(pycorrector_file("sighan2015_test.tsv"), unequal="keep", return_stats=True)
    assert len(ds) == 707 and sum(a != b for a, b in zip(ds["source"], ds["target"])) == 373
    assert sum(stats.repaired.values()) == 10  # pairs of different lengths, kept for sentence-level scores
    with pytest.raises(DataError, match=r"sighan2015_test.tsv:42: the source has 22 characters and the target 21"):
        read_pairs(pycorrector_file("sighan2015_test.tsv"))


def test_bad_correction_lines_are_refused_naming_file_and_line(tmp_path):
    from nlp.tasks.correction.data import read_pairs

    good = tmp_path / "ok.tsv"
    good.write_text("我门去\t我们去\n\n天气很好\t天气很好\n", encoding="utf-8")
    ds, stats = read_pairs(good, return_stats=True)
    assert ds["source"] == ["我门去", "天气很好"] and ds["target"] == ["我们去", "天气很好"]
    assert stats.skipped["blank lines"] == 1 and ds["id"] == ["ok.tsv:1", "ok.tsv:3"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("我门去\t我们去\n一\t二\t三\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv:2: expected 2 fields .* found 3"):
        read_pairs(bad)
    bad.write_text(" \t天\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv:1: the source text is blank"):
        read_pairs(bad)
    with pytest.raises(DataError, match="unequal must be 'error' or 'keep'"):
        read_pairs(good, unequal="drop")


# ----------------------------------------------------------------------------- metrics

def test_sentence_and_character_metrics_on_hand_computed_cases():
    sources = ["我门去", "天气很好", "他很高心", "今天新情好", "对的"]
    targets = ["我们去", "天气很好", "他很高兴", "今天心情好", "对的对"]  # the last: lengths differ
    preds = ["我们去", "天汽很好", "他很高心", "今天新请好", "对的"]
    m = csc_metrics(sources, targets, preds)
    # positives: 1, 3, 4, 5 (4); predicted positives: 1, 2, 4 (3)
    # detection hits: sentence 1 only (4 changed the wrong position); correction hits: sentence 1
    assert m["sentence_detection_precision"] == pytest.approx(1 / 3)
    assert m["sentence_detection_recall"] == pytest.approx(1 / 4)
    assert m["sentence_correction_f1"] == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    assert m["false_positive_rate"] == 1.0  # the one correct sentence (2) was changed
    # characters (sentence 5 aside): gold wrong 1 + 1 + 1 = 3; changed 1 + 1 + 1 = 3; right place 1
    assert m["char_detection_precision"] == pytest.approx(1 / 3) and m["char_detection_recall"] == pytest.approx(1 / 3)
    assert m["char_correction_f1"] == pytest.approx(1 / 3)
    assert (m["sentences"], m["sentences_with_errors"], m["sentences_changed"]) == (5, 4, 3)
    perfect = csc_metrics(sources[:4], targets[:4], targets[:4])
    assert perfect["sentence_correction_f1"] == 1.0 and perfect["false_positive_rate"] == 0.0
    untouched = csc_metrics(sources, targets, sources)
    assert untouched["sentence_correction_precision"] == 0.0 and untouched["false_positive_rate"] == 0.0
    with pytest.raises(ValueError, match="one of each per sentence"):
        csc_metrics(sources, targets, preds[:2])


# ----------------------------------------------------------------------------- model and pipeline

def _tokenizer():
    from nlp.tokenizer import load_tokenizer

    return load_tokenizer(ERNIE_TINY)


def _model_that_writes(tok, char: str) -> ErnieForSpellingCorrection:
    """A tiny random model whose correction head puts all its mass on `char`."""
    torch.manual_seed(0)
    model = ErnieForSpellingCorrection(tiny_config(tok.vocab_size, max_position_embeddings=64)).eval()
    with torch.no_grad():
        model.mlm_bias[tok.convert_tokens_to_ids(char)] = 1e4
    return model


def test_the_head_starts_from_the_masked_lm_head_and_trains_both_heads():
    model = ErnieForSpellingCorrection.from_pretrained(ERNIE_TINY)
    from safetensors import safe_open

    with safe_open(str(ERNIE_TINY / "model.safetensors"), "pt") as f:
        assert torch.equal(model.mlm_bias.detach(), f.get_tensor("cls.predictions.bias").float())
    tok = _tokenizer()
    small = _model_that_writes(tok, "友")
    feats = preprocess_correction({"source": ["我的朋有", "天气"], "target": ["我的朋友", "天气"]}, tok, max_length=16)
    assert feats["labels"][0][4] == tok.convert_tokens_to_ids("友") and feats["char_ids"][0][1:5] == [0, 1, 2, 3]
    batch = get_task("csc").collator(tok)([{k: v[i] for k, v in feats.items()} for i in range(2)])
    out = small(**batch)
    assert out.logits.shape[-1] == tok.vocab_size and out.detection_logits.shape == batch["input_ids"].shape
    out.loss.backward()
    assert small.detector.weight.grad.abs().sum() > 0 and small.mlm_dense.weight.grad.abs().sum() > 0
    with pytest.raises(DataError, match="outside the vocabulary"):
        small(**{**batch, "labels": torch.full_like(batch["labels"], tok.vocab_size + 5)})


def test_evaluation_keeps_predictions_not_vocabulary_sized_logits():
    spec = get_task("spelling-correction")
    assert spec.eval_keeps == "argmax" and spec.keeps_argmax()
    assert spec.export_outputs["logits"][-1] == "vocab"
    tok = _tokenizer()
    model = _model_that_writes(tok, "友")
    pairs = {"source": ["我的朋有", "天气很好"], "target": ["我的朋友", "天气很好"]}
    feats = preprocess_correction(pairs, tok, max_length=16)
    rows = [{k: v[i] for k, v in feats.items()} for i in range(2)]
    batch = spec.collator(tok)(rows)
    with torch.no_grad():
        kept = spec.keep_logits(model, model(**batch), batch)
    b, t = batch["input_ids"].shape
    assert [tuple(k.shape) for k in kept] == [(b, t)] * 3  # per position, never (b, t, vocab)
    predictions = list(zip(*[k.numpy() for k in kept]))
    m = score_rows(predictions, rows, pairs["source"], pairs["target"], threshold=0.5)
    # the model writes 友 everywhere: sentence 1's 有 is fixed but so are its other characters
    assert m["sentences_changed"] == 2 and m["false_positive_rate"] == 1.0
    assert m["char_correction_recall"] == 1.0 and m["sentence_correction_precision"] == 0.0
    assert score_rows(predictions, rows, pairs["source"], pairs["target"], threshold=1.01)["sentences_changed"] == 0


def test_offsets_protected_characters_and_long_texts():
    tok = _tokenizer()
    pipe = TextCorrectionPipeline(_model_that_writes(tok, "友"), tok, max_length=32)
    text = "我😀爱 ＡＢＣ１２３，abc 北京👨‍👩‍👧张爱文。友"
    out = pipe(text, protected="张爱文")
    assert out["source"] == text and len(out["target"]) == len(text)
    changed = [e["position"] for e in out["errors"]]
    assert changed == [0, 2, 15, 16]  # 我 爱 北 京: only Chinese characters, the name's 爱 (23) spared
    for e in out["errors"]:
        assert text[e["start"]:e["end"]] == next(iter(e["correction"])) and e["correction"][text[e["position"]]] == "友"
        assert e["end"] == e["start"] + 1 and 0.99 < e["score"] <= 1.0
    assert [c for c, d in zip(text, out["target"]) if c != d] == list("我爱北京")
    assert protected_positions("张爱文和张爱文", parse_protected("张爱文, 李四")) == {0, 1, 2, 4, 5, 6}
    # a long text runs as windows of 32 tokens: every Chinese character is still seen, once
    long = ("天气很好，" * 60) + "我们走吧"
    res = pipe([long, "１２３"], threshold=0.9)
    assert len(res[0]["errors"]) == sum(is_chinese_char(c) for c in long)
    assert res[1] == {"source": "１２３", "target": "１２３", "errors": []}
    assert pipe("天气", protected=["天气"])["errors"] == [] and pipe([]) == []
    with pytest.raises(Exception, match=r"threshold must be a number in \[0, 1\]"):
        pipe("天气", threshold=2)
    # same_sound keeps only corrections that sound alike: 有 -> 友 (you), not 天 -> 友
    assert [e["position"] for e in pipe("天有", same_sound=True)["errors"]] == [1]


def test_the_shipped_default_corrects_offline_and_leaves_correct_text_alone():
    """`nlp.pipeline("text-correction")` with no model: the package's ernie-tiny-zh-csc, at the
    pipeline's default threshold (no correct sentence of the synthetic dev split changed)."""
    pipe = nlp.pipeline("text-correction")
    fixed, clean = pipe(["我门看美国电影，我觉得很有意思。", "我们看美国电影，我觉得很有意思。"])
    assert fixed["target"] == "我们看美国电影，我觉得很有意思。"
    assert fixed["errors"] == [{"position": 1, "correction": {"门": "们"}, "start": 1, "end": 2,
                                "score": pytest.approx(fixed["errors"][0]["score"])}]
    assert fixed["errors"][0]["score"] >= 0.9
    assert clean["errors"] == [] and clean["target"] == clean["source"]
