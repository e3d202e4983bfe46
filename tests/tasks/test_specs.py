"""The task specs: every registered task describes itself completely, the registry only
registers, and the engine (nlp/train) asks the spec instead of comparing task names."""

from __future__ import annotations

import ast
from pathlib import Path

import datasets
import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.tasks import TASKS, TaskSpec, get_task, list_tasks, pipeline, register_task
from nlp.tasks.classification import ErnieForSequenceClassification
from nlp.tasks.pipelines import Pipeline
from nlp.tasks.registry import TASK_ALIASES, task_of_architecture

from tasks._task_fixtures import tiny_config

NLP_DIR = Path(nlp.__file__).parent


@pytest.mark.parametrize("name", list_tasks())
def test_every_task_describes_itself(name):
    spec = get_task(name)
    assert isinstance(spec, TaskSpec) and spec.name == name
    assert spec.head.__name__.endswith(spec.architecture_suffix)
    assert task_of_architecture("Bert" + spec.architecture_suffix) is spec
    assert issubclass(spec.pipeline, Pipeline) and spec.pipeline.head_class is spec.head
    assert spec.export_inputs == ("input_ids", "attention_mask", "token_type_ids")
    assert spec.export_outputs and all(axes[0] == "batch" for axes in spec.export_outputs.values())
    assert spec.label_keys and spec.input_fields
    for method in ("read", "training_texts", "featurize", "score", "predict"):
        assert getattr(type(spec), method) is not getattr(TaskSpec, method), (name, method)
    for alias in spec.aliases:
        assert get_task(alias.upper()) is spec


def test_export_outputs_name_the_heads_outputs():
    assert get_task("text-classification").export_outputs == {"logits": ("batch", "num_labels")}
    assert get_task("ner").export_outputs == {"logits": ("batch", "sequence", "num_labels")}
    assert get_task("qa").export_outputs == {"start_logits": ("batch", "sequence"),
                                             "end_logits": ("batch", "sequence")}


def test_a_new_task_registers_without_touching_the_engine():
    class Echo(TaskSpec):
        name = "echo-classification"
        aliases = ("echo",)
        head = ErnieForSequenceClassification
        architecture_suffix = "ForEcho"

    spec = register_task(Echo())
    try:
        assert get_task("ECHO") is spec and "echo-classification" in list_tasks()
        with pytest.raises(ConfigError, match="task name 'ner' is taken by 'token-classification'"):
            class Clash(Echo):
                name = "clash"
                aliases = ("ner",)
            register_task(Clash())
    finally:
        TASKS.pop("echo-classification")
        TASK_ALIASES.pop("echo")
    assert "clash" not in TASKS


def test_pipeline_factory_lives_with_the_registry_and_pipelines_do_not_import_it():
    assert nlp.tasks.pipeline is pipeline
    source = (NLP_DIR / "tasks" / "pipelines.py").read_text(encoding="utf-8")
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert "nlp.tasks.registry" not in imported and "nlp.tasks" not in imported


def _task_name_comparisons(path: Path, names: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
            values += [e for v in values if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts]
        elif isinstance(node, ast.Dict):
            values = [k for k in node.keys if k is not None]
        else:
            continue
        found += [f"{path.name}:{node.lineno}" for v in values
                  if isinstance(v, ast.Constant) and v.value in names]
    return found


def test_the_engine_and_the_cli_ask_the_spec_instead_of_comparing_task_names():
    names = {*TASKS, *TASK_ALIASES}
    paths = [*(NLP_DIR / "train").glob("*.py"), *(NLP_DIR / "commands").glob("*.py")]
    found = [hit for p in paths for hit in _task_name_comparisons(p, names)]
    assert found == [], f"task-name comparisons left: {found}"


def test_the_problem_type_is_decided_from_the_data_not_from_the_first_batch():
    spec = get_task("text-classification")
    multi = datasets.Dataset.from_dict(
        {"text": ["a"], "label": [[0, 1]]},
        features=datasets.Features({"text": datasets.Value("string"),
                                    "label": datasets.Sequence(datasets.ClassLabel(names=["x", "y"]))}))
    single = datasets.Dataset.from_dict({"text": ["a"], "label": [1]}, features=datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["x", "y"])}))
    assert spec.head_config(["x", "y"], multi)["problem_type"] == "multi_label_classification"
    assert spec.head_config(["x", "y"], single)["problem_type"] == "single_label_classification"
    assert spec.head_config(None) == {"num_labels": 1, "problem_type": "regression"}
    assert ErnieForSequenceClassification(tiny_config(50, num_labels=1)).config.problem_type == "regression"
    # a head built without a type infers it per batch (transformers' rule) and keeps its config
    head = ErnieForSequenceClassification(tiny_config(50, num_labels=2))
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    head(ids, attention_mask=(ids > 0).long(), labels=torch.tensor([0, 1]))
    assert head.config.problem_type is None
    out = head(ids, attention_mask=(ids > 0).long(), labels=torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    assert head.config.problem_type is None and torch.isfinite(out.loss)
    built = ErnieForSequenceClassification(tiny_config(50, **spec.head_config(["x", "y"], multi)))
    assert built.config.problem_type == "multi_label_classification" and built.config.num_labels == 2


def test_a_crf_head_weights_data_parallel_losses_by_sequences_not_tokens():
    """A CRF's loss is a mean over sequences: the spec tells the Trainer to count sequences
    (each process's share of them weights its loss); a softmax head keeps the default (labelled
    tokens), and so does every other task."""
    from nlp.tasks.ner.heads import ErnieForTokenClassification

    spec = get_task("ner")
    batch = {"labels": torch.tensor([[0, 1, -100, -100], [1, 1, 1, -100], [0, -100, -100, -100]])}
    crf = ErnieForTokenClassification(tiny_config(50, num_labels=3, use_crf=True))
    assert spec.loss_units(crf)(batch) == 3
    assert spec.loss_units(ErnieForTokenClassification(tiny_config(50, num_labels=3))) is None
    assert get_task("text-classification").loss_units(crf) is None
