"""nlp export: ONNX equals PyTorch, the manifest, int8, and bad input (nothing half-written)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from nlp._common import ConfigError, DataError, UnknownNameError, sha256_file
from nlp.deploy import ExportError, OnnxBackend, export_model, read_manifest, verify_files
from nlp.deploy.check import check_batch, check_texts, compare_outputs
from nlp.tasks.backend import TorchBackend
from nlp.tasks.registry import get_task
from nlp.tokenizer import load_tokenizer

from .conftest import NER_LABELS

TASK_OF = {"text-classification": "text-classification", "ner-crf": "token-classification",
           "question-answering": "question-answering"}


def _torch(sources, name):
    d = sources[name]
    d = d / "model" if (d / "model").is_dir() else d
    return TorchBackend(get_task(TASK_OF[name]).head.from_pretrained(d)), load_tokenizer(d)


@pytest.mark.parametrize("name", ["text-classification", "ner-crf", "question-answering"])
def test_fp32_onnx_equals_pytorch_on_real_texts_of_any_batch_and_length(sources, exports, name):
    ref, tok = _torch(sources, name)
    onnx = OnnxBackend(exports[name])
    texts = check_texts(24)
    assert len({len(t) for t in texts}) > 10  # mixed lengths
    for batch_texts, max_length in ((texts, 128), (texts[:1], 16), (texts[3:8], 200), (texts[::-1], 512)):
        batch = check_batch(TASK_OF[name], tok, max_length, batch_texts)
        want, got = ref(batch), onnx(batch)
        assert set(got) == set(want)
        c = compare_outputs(want, got, batch["attention_mask"])
        assert c.max_abs_diff <= 1e-4 and c.label_agreement == 1.0
        assert all(v.dtype == np.float32 for v in got.values())
    # the check the export ran itself
    assert read_manifest(exports[name])["check"]["fp32"]["max_abs_diff"] <= 1e-4


def test_comparison_reports_the_lowest_row_cosine_at_real_positions():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 8)).astype(np.float32)
    turned = vectors.copy()
    turned[1] = -vectors[1]  # one row pointing the other way
    assert compare_outputs({"v": vectors}, {"v": vectors * 2}, np.ones((3, 4))).min_cosine == pytest.approx(1.0)
    assert compare_outputs({"v": vectors}, {"v": turned}, np.ones((3, 4))).min_cosine == pytest.approx(-1.0)
    # (B, T, L): a padded position's row does not count, however far off it is
    scores = rng.normal(size=(2, 3, 5)).astype(np.float32)
    off = scores.copy()
    off[1, 2] = -scores[1, 2]
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    assert compare_outputs({"s": scores}, {"s": off}, mask).min_cosine == pytest.approx(1.0)
    assert compare_outputs({"s": scores}, {"s": off}, np.ones((2, 3))).min_cosine == pytest.approx(-1.0)
    # (B, T) weights: a row of zeros on both sides agrees (no weighing pair in a short text) ...
    weights = np.array([[0.0, 0.5, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    assert compare_outputs({"w": weights}, {"w": weights * 1.01}, np.ones((2, 4))).min_cosine == pytest.approx(1.0)
    # ... a row of zeros against one that weighs something does not
    lost = weights.copy()
    lost[0] = 0.0
    assert compare_outputs({"w": weights}, {"w": lost}, np.ones((2, 4))).min_cosine == pytest.approx(0.0)


def test_comparison_reports_how_one_score_a_text_orders_pairs():
    """A reranker's (B, 1) relevance: the argmax of one score is always 0, so the check counts the
    pairs of texts the export orders as PyTorch does (ties in PyTorch's scores not counted)."""
    mask = np.ones((4, 3))
    ref = np.array([[0.1], [0.5], [0.3], [0.3]], dtype=np.float32)
    assert compare_outputs({"s": ref}, {"s": ref + 0.01}, mask).order_agreement == pytest.approx(1.0)
    swapped = np.array([[0.1], [0.3], [0.5], [0.2]], dtype=np.float32)  # 1 of the 5 untied pairs flips
    assert compare_outputs({"s": ref}, {"s": swapped}, mask).order_agreement == pytest.approx(4 / 5)
    assert compare_outputs({"s": ref}, {"s": -ref}, mask).order_agreement == pytest.approx(0.0)
    # other outputs have no such figure
    assert compare_outputs({"l": np.eye(4, 2)}, {"l": np.eye(4, 2)}, mask).order_agreement is None


@pytest.mark.parametrize("name", ["text-classification", "ner-crf", "question-answering"])
def test_padding_is_masked_by_an_additive_mask_not_where_guards(exports, name):
    """A bool mask exports as Where (and IsNaN after the softmax) over every (B, heads, T, T)
    score tensor: a fifth of onnxruntime's int8 time on ernie-3.0-mini. The export adds a float
    mask instead; the equality test above checks the padded rows still come out right."""
    import onnx

    ops = {n.op_type for n in onnx.load(str(exports[name] / "model.onnx"), load_external_data=False).graph.node}
    assert "Softmax" in ops or any("Attention" in o for o in ops)
    assert not ops & {"Where", "IsNaN"}, sorted(ops)


def _graph_ops(directory):
    import onnx

    return [(n.domain or "ai.onnx", n.op_type)
            for n in onnx.load(str(directory / "model.onnx"), load_external_data=False).graph.node]


@pytest.mark.parametrize("name", ["text-classification", "ner-crf", "question-answering"])
def test_each_layer_attends_in_one_onnxruntime_attention_node(exports, name):
    """The default export writes a layer's qkv projection, head split, attention and merge as one
    com.microsoft Attention node (the equality test above checks its numbers). Classification's
    last layer may take the [CLS]-rows path (standard ops): only the [CLS] query is needed."""
    ops = _graph_ops(exports[name])
    fused = ops.count(("com.microsoft", "Attention"))
    layers = json.loads((exports[name] / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
    assert fused == layers or (name == "text-classification" and fused == layers - 1), ops
    assert read_manifest(exports[name])["attention"] == "fused"


def test_standard_attention_export_uses_standard_onnx_ops_and_equals_pytorch(sources, exports):
    d = exports["ner-standard"]
    assert read_manifest(d)["attention"] == "standard"
    ops = _graph_ops(d)
    assert all(domain == "ai.onnx" for domain, _ in ops), sorted(set(ops))
    assert ("ai.onnx", "Softmax") in ops
    model_dir = sources["token-classification"]
    ref = TorchBackend(get_task("token-classification").head.from_pretrained(model_dir))
    batch = check_batch("token-classification", load_tokenizer(model_dir), 128, check_texts(16))
    assert compare_outputs(ref(batch), OnnxBackend(d)(batch), batch["attention_mask"]).max_abs_diff <= 1e-4


def test_cpu_sessions_leave_skip_layer_norm_unfused(exports, tmp_path, monkeypatch):
    """onnxruntime's CPU SkipLayerNormalization kernel was 2.5x slower than the LayerNormalization
    + Add it replaces (nlp.deploy.backend.CPU_DISABLED_OPTIMIZERS): the optimized graph keeps them."""
    import onnx
    import onnxruntime as ort

    optimized = tmp_path / "optimized.onnx"
    real = ort.InferenceSession

    def recording(path, options=None, **kwargs):
        options = options or ort.SessionOptions()
        options.optimized_model_filepath = str(optimized)
        return real(path, options, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    OnnxBackend(exports["ner-crf-int8"])
    ops = {n.op_type for n in onnx.load(str(optimized)).graph.node}
    assert "LayerNormalization" in ops and "SkipLayerNormalization" not in ops, sorted(ops)


def test_manifest_lists_task_io_opset_precision_source_and_sha256(sources, exports):
    d = exports["ner-crf"]
    m = read_manifest(d)
    assert m["task"] == "token-classification" and m["precision"] == "fp32" and m["model"] == "model.onnx"
    assert m["opset"] >= 18 and m["quantization"] is None and m["decoding"] == "decoding.safetensors"
    assert [i["name"] for i in m["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(i["dtype"] == "int64" and i["shape"] == ["batch", "sequence"] for i in m["inputs"])
    assert m["outputs"] == [{"name": "logits", "dtype": "float32", "shape": ["batch", "sequence", len(NER_LABELS)]}]
    assert m["source"] == {"path": str(sources["ner-crf"].resolve()), "kind": "model", "recipe": None}
    files = {p.name for p in d.iterdir()}
    assert set(m["files"]) == files - {"manifest.json"}
    assert {"model.onnx", "config.json", "decoding.safetensors", "tokenizer.json", "vocab.txt"} <= files
    for name, entry in m["files"].items():
        assert entry["sha256"] == sha256_file(d / name) and entry["bytes"] == (d / name).stat().st_size
    config = json.loads((d / "config.json").read_text(encoding="utf-8"))
    assert list(config["id2label"].values()) == NER_LABELS
    # a run directory: its recipe comes along; QA has two outputs over the sequence
    clf = read_manifest(exports["text-classification"])
    assert clf["source"]["kind"] == "run" and clf["source"]["recipe"] == "recipe.yaml"
    assert clf["outputs"] == [{"name": "logits", "dtype": "float32", "shape": ["batch", 3]}]
    qa = read_manifest(exports["question-answering"])
    assert [(o["name"], o["shape"]) for o in qa["outputs"]] == [("start_logits", ["batch", "sequence"]),
                                                                 ("end_logits", ["batch", "sequence"])]


def test_a_changed_file_is_refused(exports, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(exports["text-classification"], copy)
    verify_files(copy)
    with open(copy / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    with pytest.raises(DataError, match=r"vocab.txt: sha256 .* the manifest says"):
        OnnxBackend(copy)
    (copy / "config.json").unlink()
    with pytest.raises(DataError, match="config.json: listed in manifest.json but missing"):
        verify_files(copy)


def test_int8_is_small_and_agrees_with_pytorch(sources, exports):
    d = exports["ner-crf-int8"]
    m = read_manifest(d)
    assert m["precision"] == "int8" and m["quantization"]["weight_type"] == "int8"
    size = (d / "model.onnx").stat().st_size
    assert size < 0.30 * m["quantization"]["fp32_bytes"]
    assert size < 0.30 * (exports["ner-crf"] / "model.onnx").stat().st_size
    assert not any(p.name.startswith("fp32") or "matmul" in p.name for p in d.iterdir())
    # the classifier stays fp32 (a MatMul with a float weight); every other linear is int8
    import onnx

    graph = onnx.load(str(d / "model.onnx")).graph
    kept = m["quantization"]["kept_fp32"]["classifier"]
    floats = {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    by_name = {n.name: n for n in graph.node}
    assert kept and all(by_name[k].op_type == "MatMul" and by_name[k].input[1] in floats for k in kept)
    # per layer: the qkv projection inside QAttention, out and ffn in/out as int8 MatMuls
    layers = json.loads((d / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
    assert sum(n.op_type == "QAttention" and n.domain == "com.microsoft" for n in graph.node) == layers
    assert sum(n.op_type == "MatMulInteger" for n in graph.node) >= layers * 3
    assert m["attention"] == "fused" and "Attention" in m["quantization"]["ops"]
    assert not any(n.op_type == "Gemm" for n in graph.node)
    agreement = m["check"]["int8"]["label_agreement"]
    assert 0.9 <= agreement <= 1.0
    ref, tok = _torch(sources, "ner-crf")
    batch = check_batch("token-classification", tok, 128)
    c = compare_outputs(ref(batch), OnnxBackend(d)(batch), batch["attention_mask"])
    assert c.label_agreement == pytest.approx(agreement) and 0 < c.max_abs_diff < 1.0


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_bad_input_gives_clear_errors_and_writes_nothing(sources, tmp_path, monkeypatch):
    out = tmp_path / "out"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no model"):
        export_model(tmp_path / "empty", out)
    with pytest.raises(ConfigError, match="does not exist"):
        export_model(tmp_path / "nope", out)
    run_without_model = tmp_path / "run"
    (run_without_model / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="a run that has not finished"):
        export_model(run_without_model, out)
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(sources["question-answering"] / "config.json", no_weights)
    with pytest.raises(ConfigError, match="no weights in"):
        export_model(no_weights, out)
    with pytest.raises(UnknownNameError, match="Did you mean 'token-classification'"):
        export_model(sources["ner-crf"], out, task="token-clasification")
    masked_lm = tmp_path / "mlm"
    shutil.copytree(sources["question-answering"], masked_lm)
    cfg = json.loads((masked_lm / "config.json").read_text())
    (masked_lm / "config.json").write_text(json.dumps({**cfg, "architectures": ["ErnieForMaskedLM"]}))
    with pytest.raises(ConfigError, match=r"ErnieForMaskedLM.*name no task head.*pass --task"):
        export_model(masked_lm, out)
    for opset in (7, 17, 999):
        with pytest.raises(ConfigError, match=f"--opset {opset}: the installed exporter writes opsets 18 to"):
            export_model(sources["ner-crf"], out, opset=opset)
    with pytest.raises(ConfigError, match="holds the model being exported"):
        export_model(sources["text-classification"], sources["text-classification"], force=True)
    with pytest.raises(ConfigError, match="--quantize 'int4'"):
        export_model(sources["ner-crf"], out, quantize="int4")
    with pytest.raises(ConfigError, match="--attention 'flash': choose one of fused, standard"):
        export_model(sources["ner-crf"], out, attention="flash")
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists; choose another directory or pass --force"):
        export_model(sources["ner-crf"], out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    # --force replaces only an earlier export: DIR is someone's directory (tests/deploy/test_export_hostile.py)
    with pytest.raises(ConfigError, match="not an `nlp export` directory"):
        export_model(sources["ner-crf"], out, force=True)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    # an export that fails its check, or fails in the exporter, leaves nothing
    import nlp.deploy.export as ex

    monkeypatch.setattr(ex, "FP32_TOLERANCE", -1.0)
    with pytest.raises(ExportError, match=r"differ from PyTorch's by .* nothing was written"):
        export_model(sources["question-answering"], tmp_path / "failed")
    assert not (tmp_path / "failed").exists() and _leftovers(tmp_path) == []
    monkeypatch.undo()

    def broken(*a, **k):
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(ex.torch.onnx, "export", broken)
    with pytest.raises(ExportError, match="torch.onnx.export failed for the question-answering model: "
                                          "RuntimeError: exporter exploded"):
        export_model(sources["question-answering"], tmp_path / "new")
    assert not (tmp_path / "new").exists() and _leftovers(tmp_path) == []


def test_force_replaces_an_existing_export(sources, exports, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(exports["text-classification"], out)  # an earlier export (of another model)
    r = export_model(sources["question-answering"], out, force=True, opset=18)
    assert r.opset == 18 and read_manifest(out)["opset"] == 18 and read_manifest(out)["task"] == "question-answering"
    assert (out / "model.onnx").is_file() and _leftovers(tmp_path) == []
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # not the temp dir's 0700


def test_cli_export_reports_the_check_and_errors_without_traceback(sources, tmp_path, capsys):
    from nlp.cli import main

    out = tmp_path / "int8"
    assert main(["export", str(sources["text-classification"]), "--out", str(out), "--quantize", "int8"]) == 0
    text = capsys.readouterr().out
    assert "exported text-classification model (int8" in text and "fp32 max |ONNX - PyTorch|" in text
    assert "predicted labels agree with PyTorch on" in text and "of fp32" in text
    assert main(["export", str(sources["text-classification"]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error: --out" in err and "pass --force" in err and "Traceback" not in err
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "holds no model" in capsys.readouterr().err
