"""nlp export --quantize int8-static: calibrated int8 for every task that exports, its manifest,
the held-out score of a run's dev split, and calibration data that is refused with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import nlp
from nlp._common import ConfigError
from nlp.deploy import OnnxBackend, export_model, read_manifest
from nlp.deploy.check import check_batch, check_texts, compare_outputs
from nlp.tasks.backend import TorchBackend
from nlp.tasks.registry import get_task
from nlp.tokenizer import load_tokenizer

from tasks._task_fixtures import save_as_fine_tuned

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
HEADS = {"text-classification": dict(id2label={0: "negative", 1: "positive"}),
         "token-classification": dict(id2label=dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])),
                                      use_crf=True),
         "question-answering": dict(num_labels=2),
         "embedding": {}}
REVIEWS = ["这家餐厅的服务非常好，菜也很新鲜，下次还会再来。", "太难吃了", "物流很快，包装完好，推荐购买。", "一般般吧",
           "房间很小，隔音差，前台态度冷淡。", "好", "质量不错，价格实惠。", "客服态度恶劣，再也不买了。"]


def _tiny(task: str, out: Path) -> Path:
    """A 2-layer, 64-wide model of the task with ernie-tiny-zh's tokenizer, random weights."""
    spec = get_task(task)
    cfg = nlp.AutoConfig.from_pretrained(ASSET, **TINY, **HEADS[task])
    torch.manual_seed(0)
    return save_as_fine_tuned(spec.head(cfg), out, head_std=0.5)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A classification run directory (RUN/model + recipe.yaml) whose dev split is a file of 40 reviews."""
    root = tmp_path_factory.mktemp("static")
    run = root / "run"
    _tiny("text-classification", run / "model")
    dev = root / "dev.jsonl"
    dev.write_text("".join(json.dumps({"text": t + "。" * (i % 5), "label": ["negative", "positive"][i % 2]},
                                      ensure_ascii=False) + "\n" for i, t in enumerate(REVIEWS * 5)), encoding="utf-8")
    (run / "recipe.yaml").write_text(yaml.safe_dump({"task": {"name": "text-classification"},
                                                     "data": {"max_length": 64, "files": {"dev": str(dev)}}}),
                                     encoding="utf-8")
    return run


def _batches(task: str, model_dir: Path, n: int = 3) -> list[dict[str, np.ndarray]]:
    tok = load_tokenizer(model_dir)
    texts = check_texts(8 * n)
    return [check_batch(task, tok, 64, texts[i::n]) for i in range(n)]


def _ops(directory: Path) -> set[str]:
    import onnx

    return {n.op_type for n in onnx.load(str(directory / "model.onnx"), load_external_data=False).graph.node}


@pytest.mark.parametrize("task", ["token-classification", "question-answering", "embedding"])
def test_static_int8_of_every_exporting_task_agrees_with_pytorch(tmp_path, task):
    src = _tiny(task, tmp_path / "model")
    r = export_model(src, tmp_path / "s8", quantize="int8-static", calibration=_batches(task, src))
    m = read_manifest(r.out)
    q = m["quantization"]
    assert m["precision"] == "int8" and q["method"] == "onnxruntime static" and q["format"] == "qdq"
    assert q["calibration_batches"] == 3 and q["calibration_rows"] > 0
    assert m["attention"] == "standard"  # no static kernel for the fused Attention node
    assert set(q["kept_fp32"]) == {"classifier", "layernorm", "softmax"}
    ops = _ops(r.out)
    # calibrated: fixed scales (QuantizeLinear), nothing quantized per batch at run time
    assert "QuantizeLinear" in ops and "DynamicQuantizeLinear" not in ops
    # a random tiny head has near-tied logits (QA start/end over ~60 positions): a loose bound
    assert m["check"]["int8"]["label_agreement"] >= 0.8
    # on texts it was not calibrated on, and rows independent of their batch mates
    tok = load_tokenizer(src)
    batch = check_batch(task, tok, 64, check_texts(40)[1::3])
    want = TorchBackend(get_task(task).head.from_pretrained(src))(batch)
    got = OnnxBackend(r.out)(batch)
    assert compare_outputs(want, got, batch["attention_mask"]).label_agreement >= 0.8
    alone = OnnxBackend(r.out)({k: v[3:4] for k, v in batch.items()})
    for name, value in alone.items():  # fixed scales: a row's outputs do not depend on its batch mates
        np.testing.assert_allclose(value[0], got[name][3], atol=1e-5)


def test_the_run_dev_split_calibrates_and_the_rest_is_scored(tiny_run, tmp_path):
    from nlp.train.calibration import calibration_split

    cal = calibration_split(tiny_run, "dev", size=16)
    assert (cal.examples, cal.held_out) == (16, 24) and sum(len(b["input_ids"]) for b in cal.batches) == 16
    assert set(cal.batches[0]) == {"input_ids", "attention_mask", "token_type_ids"}
    assert calibration_split(tiny_run, "dev", size=16).source == cal.source  # seeded: the same examples
    r = export_model(tiny_run, tmp_path / "s8", quantize="int8-static", calibration=cal)
    held = read_manifest(r.out)["check"]["held_out"]
    assert held["examples"] == 24 and 0.0 <= held["label_agreement"] <= 1.0
    assert set(held["metrics"]) == set(held["pytorch_metrics"]) and "accuracy" in held["metrics"]
    assert "16 of 40 examples" in read_manifest(r.out)["quantization"]["calibration"]
    # the held-out figures are those nlp evaluate gets for the same examples
    from nlp.train.scoring import evaluate_dir

    assert held["pytorch_metrics"]["accuracy"] == pytest.approx(
        cal.scoring.score(get_task("text-classification").head.from_pretrained(tiny_run / "model").eval(),
                          cal.held_examples, cal.held_features)["accuracy"])
    assert evaluate_dir(r.out, "dev", backend=OnnxBackend(r.out))["examples"] == 40


def test_the_server_batches_a_static_export_and_not_a_dynamic_one(tiny_run, tmp_path):
    """Dynamic int8 takes each batch's activation scale, so the server runs its rows one a pass;
    a static export's rows are independent (checked above), so they are batched."""
    from nlp.deploy.server_model import load_pipeline_for_serving

    batches = _batches("text-classification", tiny_run / "model", 1)
    static = export_model(tiny_run, tmp_path / "s8", quantize="int8-static", calibration=batches).out
    dynamic = export_model(tiny_run, tmp_path / "d8", quantize="int8").out
    assert load_pipeline_for_serving(static).rows_independent is True
    assert load_pipeline_for_serving(dynamic).rows_independent is False


def test_cli_prints_agreement_and_the_held_out_metric(tiny_run, tmp_path, capsys):
    from nlp.cli import main

    assert main(["export", str(tiny_run), "--out", str(tmp_path / "s8"), "--quantize", "int8-static",
                 "--calibration-size", "20"]) == 0
    out = capsys.readouterr().out
    assert "on the 20 other examples" in out and "labels agree with PyTorch on" in out and "accuracy" in out
    assert "PyTorch fp32 accuracy" in out
    assert main(["export", str(tiny_run), "--out", str(tmp_path / "x"), "--calibration-size", "20"]) != 0
    assert "int8-static only" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_bad_calibration_is_refused_before_any_export(tiny_run, tmp_path):
    from nlp.train.calibration import calibration_split

    out = tmp_path / "s8"
    good = _batches("text-classification", tiny_run / "model", 1)[0]
    with pytest.raises(ConfigError, match="needs calibration data"):
        export_model(tiny_run, out, quantize="int8-static")
    with pytest.raises(ConfigError, match="int8-static only, not int8"):
        export_model(tiny_run, out, quantize="int8", calibration=[good])
    with pytest.raises(ConfigError, match="Did you mean 'int8-static'"):
        export_model(tiny_run, out, quantize="int8-statc")
    bad = {
        "calibration data is empty": [],
        "must be a list of batches": "reviews.txt",
        "batch 1 has no token_type_ids": [good, {k: v for k, v in good.items() if k != "token_type_ids"}],
        "batch 0, input 'input_ids': a non-empty integer array of 2 axes": [{**good, "input_ids": good["input_ids"] * 0.5}],
        "token ids from 0 to 7000, but the model's vocabulary has 7000": [{**good, "input_ids": np.where(
            good["input_ids"] > 0, 7000, 0)}],
        "the inputs differ in shape": [{**good, "attention_mask": good["attention_mask"][:, :3]}],
    }
    for message, batches in bad.items():
        with pytest.raises(ConfigError, match=message):
            export_model(tiny_run, out, quantize="int8-static", calibration=batches)
    assert not out.exists() and not list(tmp_path.glob(".s8.*"))
    with pytest.raises(ConfigError, match="has 40 example.*calibrate on fewer"):
        calibration_split(tiny_run, "dev", size=40)
    with pytest.raises(ConfigError, match="--calibration-size 0: give a positive number"):
        calibration_split(tiny_run, "dev", size=0)
    with pytest.raises(ConfigError, match="no dataset or test file; give --calibration DATASET --calibration-split test"):
        calibration_split(tiny_run, "test", size=4)


def test_keep_fp32_chooses_the_node_groups_left_in_float(tiny_run, tmp_path):
    """The default leaves the classifier, LayerNorm and softmax float; keep_fp32 replaces that
    choice: () quantizes LayerNorm and softmax too, "embeddings" keeps the Gathers' weights float."""
    import onnx

    batches = _batches("text-classification", tiny_run / "model", 1)

    def built(name: str, keep: tuple[str, ...]) -> tuple[dict, list]:
        r = export_model(tiny_run, tmp_path / name, quantize="int8-static", calibration=batches, keep_fp32=keep)
        graph = onnx.load(str(r.out / "model.onnx")).graph
        return read_manifest(r.out)["quantization"], graph

    def quantized_inputs(graph, op_type: str) -> bool:  # does a DequantizeLinear feed a node of op_type?
        dq = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
        return any(i in dq for n in graph.node if n.op_type == op_type for i in n.input)

    q, all_int8 = built("none", ())
    assert q["kept_fp32"] == {} and {"LayerNormalization", "Softmax"} <= set(q["ops"])
    assert quantized_inputs(all_int8, "LayerNormalization") and quantized_inputs(all_int8, "Softmax")
    q, default = built("default", ("classifier", "layernorm", "softmax"))
    assert not quantized_inputs(default, "LayerNormalization") and not quantized_inputs(default, "Softmax")
    assert quantized_inputs(default, "Gather")  # the embeddings are int8 by default
    q, float_embeddings = built("embeddings", ("embeddings", "classifier", "layernorm", "softmax"))
    assert set(q["kept_fp32"]) == {"embeddings", "classifier", "layernorm", "softmax"}
    assert not quantized_inputs(float_embeddings, "Gather")
    assert (tmp_path / "embeddings" / "model.onnx").stat().st_size > (tmp_path / "default" / "model.onnx").stat().st_size
    # dynamic int8 takes the choice too
    r = export_model(tiny_run, tmp_path / "d8", quantize="int8", keep_fp32=["embeddings", "classifier"])
    assert set(read_manifest(r.out)["quantization"]["kept_fp32"]) == {"embeddings", "classifier"}


def test_bad_keep_fp32_is_refused_before_any_export(tiny_run, tmp_path, capsys):
    from nlp.cli import main

    out = tmp_path / "s8"
    batches = _batches("text-classification", tiny_run / "model", 1)
    with pytest.raises(ConfigError, match="needs --quantize int8 or int8-static"):
        export_model(tiny_run, out, keep_fp32=("classifier",))
    with pytest.raises(ConfigError, match="layernorm: not a node group of --quantize int8; valid: embeddings, classifier"):
        export_model(tiny_run, out, quantize="int8", keep_fp32=("layernorm",))
    with pytest.raises(ConfigError, match="Did you mean 'softmax'"):
        export_model(tiny_run, out, quantize="int8-static", calibration=batches, keep_fp32=("sotfmax",))
    with pytest.raises(ConfigError, match="give a list of node groups"):
        export_model(tiny_run, out, quantize="int8", keep_fp32="classifier")
    assert not out.exists()
    assert main(["export", str(tiny_run), "--out", str(out), "--quantize", "int8-static", "--keep-fp32", "classifer"]) != 0
    err = capsys.readouterr().err
    assert "Did you mean 'classifier'" in err and "reading" not in err and not out.exists()  # before calibration


def test_cli_keep_fp32_none_quantizes_every_group(tiny_run, tmp_path):
    from nlp.cli import main

    assert main(["export", str(tiny_run), "--out", str(tmp_path / "s8"), "--quantize", "int8-static",
                 "--calibration-size", "20", "--keep-fp32", "none"]) == 0
    assert read_manifest(tmp_path / "s8")["quantization"]["kept_fp32"] == {}
    assert main(["export", str(tiny_run), "--out", str(tmp_path / "d8"), "--quantize", "int8",
                 "--keep-fp32", "embeddings, classifier"]) == 0
    assert set(read_manifest(tmp_path / "d8")["quantization"]["kept_fp32"]) == {"embeddings", "classifier"}
