"""Export fixtures: the shipped ernie-tiny-zh with fresh task heads, each exported once per session
(the dynamo exporter takes seconds per model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import nlp

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def _save(cls, out: Path, **overrides) -> Path:
    from nlp.tokenizer import load_tokenizer

    torch.manual_seed(0)
    model = cls.from_pretrained(ASSET, **overrides)
    for p in model.parameters():  # a trained-looking head: larger logits than a fresh init gives
        if p.dim() == 2 and p.shape[0] < 10:
            torch.nn.init.normal_(p, std=0.5)
    model.save_pretrained(out)
    load_tokenizer(ASSET).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Model directories: classification as a run directory (RUN/model + recipe.yaml), NER with a
    CRF, NER without one, QA."""
    from nlp.tasks import ErnieForQuestionAnswering, ErnieForSequenceClassification, ErnieForTokenClassification

    root = tmp_path_factory.mktemp("sources")
    run = root / "clf-run"
    _save(ErnieForSequenceClassification, run / "model", id2label={0: "negative", 1: "positive", 2: "neutral"})
    (run / "recipe.yaml").write_text(yaml.safe_dump({"task": {"name": "text-classification"},
                                                     "data": {"max_length": 64}}), encoding="utf-8")
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
    return out
