"""Export directories everywhere a model goes: nlp.pipeline, nlp predict, nlp evaluate."""

from __future__ import annotations

import json

import pytest

import nlp
from nlp._common import ConfigError
from nlp.deploy import OnnxBackend
from nlp.tasks.backend import TorchBackend
from nlp.tasks.ner.crf import CRF_KEYS

TEXTS = ["张三在北京大学工作，李四在上海。", "  王五去了广州", "这家餐厅的服务非常好，菜也很新鲜，下次还会再来。", "好",
         "ＡＢＣ公司的iPhone很好用"]
CONTEXT = "张三在北京大学工作，李四在上海。王五是ABC公司的工程师，去年搬到了广州。" * 12  # > one window


def _close(a, b, tol=1e-4):
    """Equal structure and strings; floats within tol."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float):
        return abs(a - b) <= tol
    return a == b


def test_classification_pipeline_on_an_export_equals_pytorch(sources, exports):
    onnx = nlp.pipeline("sentiment-analysis", model=str(exports["text-classification"]))
    torch_ = nlp.pipeline("text-classification", model=str(sources["text-classification"] / "model"))
    assert isinstance(onnx.backend, OnnxBackend) and isinstance(torch_.backend, TorchBackend)
    a, b = onnx(TEXTS, top_k=None), torch_(TEXTS, top_k=None)
    assert _close(a, b) and {s["label"] for s in a[0]} == {"negative", "positive", "neutral"}
    assert _close(onnx(TEXTS[0], text_pair="很好"), torch_(TEXTS[0], text_pair="很好"))
    assert onnx([]) == []


@pytest.mark.parametrize("max_length", [None, 24])
def test_ner_pipeline_on_an_export_equals_pytorch_with_offsets_into_the_text(sources, exports, max_length):
    onnx = nlp.pipeline("ner", model=exports["ner-crf"], max_length=max_length, batch_size=4)
    torch_ = nlp.pipeline("ner", model=sources["ner-crf"], max_length=max_length, batch_size=4)
    assert set(onnx.backend.decoding) == set(CRF_KEYS)
    docs = [*TEXTS, CONTEXT, "\u200b\u200b"]
    a, b = onnx(docs), torch_(docs)
    assert _close(a, b) and sum(map(len, a)) > 0
    for doc, ents in zip(docs, a):
        assert all(doc[e["start"]:e["end"]] == e["text"] for e in ents)


def _as_format_v1(src, dst):
    """A copy of an export written as format_version 1 wrote it: the decoding tensors in
    crf.safetensors, named by the manifest's "crf" key."""
    import shutil

    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text(encoding="utf-8"))
    (dst / manifest["decoding"]).rename(dst / "crf.safetensors")
    manifest["files"]["crf.safetensors"] = manifest["files"].pop(manifest.pop("decoding"))
    manifest.update(format_version=1, crf="crf.safetensors")
    (dst / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return dst


def test_an_export_of_manifest_format_1_still_loads_with_its_decoding_tensors(exports, tmp_path):
    old = _as_format_v1(exports["ner-crf"], tmp_path / "v1")
    a = nlp.pipeline("ner", model=old, batch_size=4)
    b = nlp.pipeline("ner", model=exports["ner-crf"], batch_size=4)
    assert set(a.backend.decoding) == set(CRF_KEYS)
    for k in CRF_KEYS:
        assert (a.backend.decoding[k] == b.backend.decoding[k]).all()
    assert a(TEXTS) == b(TEXTS)
    manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": 7}), encoding="utf-8")
    with pytest.raises(Exception, match="format_version 7; this version of nlp reads 1 and 2"):
        nlp.pipeline("ner", model=old)


def test_qa_pipeline_on_an_export_equals_pytorch_over_long_contexts(sources, exports):
    onnx = nlp.pipeline("qa", model=exports["question-answering"], max_length=64)
    torch_ = nlp.pipeline("qa", model=sources["question-answering"], max_length=64)
    q = dict(question=["谁在北京？", "王五是谁？"], context=CONTEXT, doc_stride=16, top_k=3)
    a, b = onnx(**q), torch_(**q)
    assert _close(a, b)
    for answers in a:
        assert all(CONTEXT[x["start"]:x["end"]] == x["answer"] for x in answers)


def test_an_export_is_checked_against_the_task_and_device(exports):
    with pytest.raises(ConfigError, match="export of a token-classification model; it cannot run as 'question-answering'"):
        nlp.pipeline("qa", model=exports["ner-crf"])
    with pytest.raises(ConfigError, match="device='cuda'.*onnxruntime's CPU provider"):
        nlp.pipeline("ner", model=exports["ner-crf"], device="cuda")
    with pytest.raises(ConfigError, match="is an export directory .*nlp.pipeline"):
        from nlp.tasks import build_pipeline as pipeline

        pipeline("ner", model=exports["ner-crf"])


def test_int8_pipeline_runs_and_mostly_agrees(exports):
    int8 = nlp.pipeline("ner", model=exports["ner-crf-int8"])
    fp32 = nlp.pipeline("ner", model=exports["ner-crf"])
    assert int8.backend.precision == "int8"
    a, b = int8(TEXTS), fp32(TEXTS)
    spans = lambda r: {(e["start"], e["end"], e["type"]) for ents in r for e in ents}  # noqa: E731
    assert len(spans(a) & spans(b)) >= 0.5 * len(spans(b))


def test_predict_on_an_export_equals_predict_on_its_source(sources, exports, tmp_path, capsys):
    from nlp.cli import main

    inp = tmp_path / "in.txt"
    inp.write_text("\n".join([TEXTS[0], "", TEXTS[1], "   ", TEXTS[4]]) + "\n", encoding="utf-8")
    rows = {}
    for name, model in (("onnx", exports["ner-crf"]), ("torch", sources["ner-crf"])):
        assert main(["predict", str(model), "--input", str(inp)]) == 0
        rows[name] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows["onnx"]) == 5 and _close(rows["onnx"], rows["torch"])
    assert rows["onnx"][1] == {"text": "", "entities": []} and rows["onnx"][3]["entities"] == []
    assert rows["onnx"][2]["text"] == TEXTS[1]  # leading spaces kept: offsets index the line as given
    for r in rows["onnx"]:
        assert all(r["text"][e["start"]:e["end"]] == e["text"] for e in r["entities"])
    qa_in = tmp_path / "q.jsonl"
    qa_in.write_text(json.dumps({"question": "谁在北京？", "context": CONTEXT}, ensure_ascii=False) + "\n\n",
                     encoding="utf-8")
    assert main(["predict", str(exports["question-answering"]), "--input", str(qa_in)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 2 and CONTEXT[out[0]["answer"]["start"]:out[0]["answer"]["end"]] == out[0]["answer"]["answer"]


def test_evaluate_on_an_export_scores_like_its_source(sources, exports, tmp_path, capsys):
    from nlp.cli import main

    scores = {}
    # --data test: the test split of the run's own data (the recipe.yaml the export carries)
    for name, model in (("onnx", exports["text-classification"]), ("torch", sources["text-classification"])):
        assert main(["evaluate", str(model), "--data", "test"]) == 0
        scores[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["onnx"]["examples"] == 20 and "loss" not in scores["onnx"] and "loss" in scores["torch"]
    assert scores["onnx"]["data"].endswith("clf-test.jsonl")
    assert scores["onnx"]["accuracy"] == scores["torch"]["accuracy"]
    assert scores["onnx"]["macro_f1"] == pytest.approx(scores["torch"]["macro_f1"])

    conll = tmp_path / "ner.txt"
    sentences = [[("张", "B-PER"), ("三", "I-PER"), ("在", "O"), ("北", "B-LOC"), ("京", "I-LOC")],
                 [("李", "B-PER"), ("四", "I-PER"), ("去", "O"), ("上", "B-LOC"), ("海", "I-LOC"), ("。", "O")]] * 5
    conll.write_text("\n\n".join("\n".join(f"{c} {t}" for c, t in s) for s in sentences) + "\n", encoding="utf-8")
    for name, model in (("onnx", exports["ner-crf"]), ("torch", sources["ner-crf"])):
        assert main(["evaluate", str(model), "--data", str(conll)]) == 0
        scores[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # a model directory without a run recipe: --data test has no data to refer to
    assert main(["evaluate", str(exports["ner-crf"]), "--data", "test"]) == 2
    assert "means the test split of the run's own data" in capsys.readouterr().err
    assert {k: scores["onnx"][k] for k in ("precision", "recall", "f1")} == pytest.approx(
        {k: scores["torch"][k] for k in ("precision", "recall", "f1")})
