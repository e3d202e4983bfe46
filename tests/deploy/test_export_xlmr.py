"""The XLM-R family exports and runs on onnxruntime like ERNIE/BERT: a tiny xlm-roberta model with
XLM-R's unigram tokenizer per task, its export's own check (ONNX against PyTorch) and a pipeline
on the export against the same pipeline on PyTorch, on Chinese text."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nlp
from nlp.deploy import OnnxBackend, export_model, read_manifest
from nlp.deploy.check import check_batch, check_texts
from nlp.models import ErnieConfig
from nlp.tasks.backend import TorchBackend
from nlp.tasks.registry import get_task
from nlp.tokenizer import UnigramTokenizer, build_unigram_backend
from nlp.tasks.lexical import lexical_labels

TASKS = {"text-classification": dict(num_labels=3), "token-classification": dict(num_labels=5),
         "question-answering": dict(num_labels=2), "feature-extraction": dict(extra={"prompts": {"query": "问："}}),
         "lexical-analysis": dict(id2label=dict(enumerate(lexical_labels())))}


def _model_dir(tmp_path, task):
    chars = sorted({c for t in check_texts(64) for c in t if not c.isspace()})
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0),
              *((c, -5.0 - (i % 7) / 10) for i, c in enumerate(chars)), ("<mask>", 0.0)]
    tok = UnigramTokenizer(build_unigram_backend(pieces, 3), model_max_length=256)
    config = ErnieConfig(model_type="xlm-roberta", vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=48, max_position_embeddings=258, type_vocab_size=1,
                         pad_token_id=1, layer_norm_eps=1e-5, **TASKS[task])
    torch.manual_seed(0)
    model = get_task(task).head(config).eval()
    with torch.no_grad():  # decisions worth comparing: heads that are not all near zero
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    return tmp_path / "model", model, tok


@pytest.mark.parametrize("task", list(TASKS))
def test_xlmr_exports_and_its_pipeline_equals_pytorch(tmp_path, task):
    src, model, tok = _model_dir(tmp_path, task)
    out = export_model(src, tmp_path / "export", task=task).out
    assert read_manifest(out)["check"]["fp32"]["max_abs_diff"] <= 1e-4
    batch = check_batch(task, tok, 64, check_texts(6))
    want, got = TorchBackend(model)(batch), OnnxBackend(out)(batch)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-4)
    texts = ["张三在北京大学工作。", "这家餐厅的服务非常好，菜也很新鲜"]
    name = "ner" if task == "token-classification" else task
    on_torch, on_onnx = nlp.pipeline(name, model=str(src)), nlp.pipeline(name, model=str(out))
    if task == "question-answering":
        args = dict(question="谁在北京大学工作？", context=texts[0])
        assert on_torch(**args)["answer"] == on_onnx(**args)["answer"]
    elif task == "feature-extraction":
        np.testing.assert_allclose(on_onnx(texts), on_torch(texts), atol=1e-4)
    else:
        a, b = on_torch(texts), on_onnx(texts)
        strip = lambda rows: [[{k: v for k, v in r.items() if k != "score"} for r in row] if isinstance(row, list)  # noqa: E731
                              else {k: v for k, v in row.items() if k != "score"} for row in rows]
        assert strip(a) == strip(b)
