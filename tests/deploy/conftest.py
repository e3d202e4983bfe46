"""Export fixtures: the shipped ernie-tiny-zh with fresh task heads, each exported once per session
(the dynamo exporter takes seconds per model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import nlp

from tasks._task_fixtures import save_as_fine_tuned

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
CLF_TEXTS = ["张三在北京大学工作，李四在上海。", "  王五去了广州", "这家餐厅的服务非常好，菜也很新鲜，下次还会再来。", "好",
             "ＡＢＣ公司的iPhone很好用"]
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def _save(cls, out: Path, **overrides) -> Path:
    torch.manual_seed(0)
    return save_as_fine_tuned(cls.from_pretrained(ASSET, **overrides), out, head_std=0.5)


@pytest.fixture(scope="session")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Model directories: classification as a run directory (RUN/model + recipe.yaml), NER with a
    CRF, NER without one, QA."""
    from nlp.tasks import ErnieForQuestionAnswering, ErnieForSequenceClassification, ErnieForTokenClassification

    root = tmp_path_factory.mktemp("sources")
    run = root / "clf-run"
    _save(ErnieForSequenceClassification, run / "model", id2label={0: "negative", 1: "positive", 2: "neutral"})
    test_file = root / "clf-test.jsonl"
    names = ["negative", "positive", "neutral"]
    test_file.write_text("\n".join(json.dumps({"text": t * (i + 1), "label": names[i % 3]}, ensure_ascii=False)
                                   for i, t in enumerate(CLF_TEXTS * 4)) + "\n", encoding="utf-8")
    (run / "recipe.yaml").write_text(yaml.safe_dump({"task": {"name": "text-classification"},
                                                     "data": {"max_length": 64, "files": {"test": str(test_file)}}}),
                                     encoding="utf-8")
    labels = dict(enumerate(NER_LABELS))
    return {
        "text-classification": run,
        "ner-crf": _save(ErnieForTokenClassification, root / "ner-crf", id2label=labels, use_crf=True),
        "token-classification": _save(ErnieForTokenClassification, root / "ner", id2label=labels),
        "question-answering": _save(ErnieForQuestionAnswering, root / "qa", num_labels=2),
    }


@pytest.fixture(scope="session")
def exports(sources, tmp_path_factory) -> dict[str, Path]:
    """fp32 exports of classification, NER with a CRF and QA; an int8 export of NER with a CRF."""
    from nlp.deploy import export_model

    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in ("text-classification", "ner-crf", "question-answering"):
        out[name] = export_model(sources[name], root / name).out
    out["ner-crf-int8"] = export_model(sources["ner-crf"], root / "ner-crf-int8", quantize="int8").out
    out["ner-standard"] = export_model(sources["token-classification"], root / "ner-standard",
                                       attention="standard").out
    return out


@pytest.fixture(scope="session")
def embedding_model(tmp_path_factory) -> Path:
    """ernie-tiny-zh with a (seeded) sentence-embedding head: a feature-extraction model."""
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tokenizer import load_tokenizer

    torch.manual_seed(0)
    model = tmp_path_factory.mktemp("embedding") / "ernie-tiny-zh-embedding"
    ErnieForSentenceEmbedding.from_pretrained(ASSET).save_pretrained(model)
    load_tokenizer(ASSET).save_pretrained(model)
    return model
