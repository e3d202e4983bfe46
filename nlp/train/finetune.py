"""Run a recipe: tokenizer + model, data -> features, the Trainer, then dev/test scores.

    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe
    result = finetune(load_recipe("recipes/sentiment-reviews.yaml", ["train.epochs=1"]))
    result.dev, result.test      # {"accuracy": ..., ...}

Names become objects through `Loaders`: `nlp.train` may not import the hub, so the CLI passes
hub-aware loaders (nlp.auto), and the default ones read local directories only.

The run directory (train.output_dir) is the engine's (docs/training.md) plus:
  recipe.yaml       the recipe as run (after overrides)
  tokenizer/        the tokenizer the run uses (trained on the fly, or copied)
  model/            the exported best model + tokenizer files; config.json holds id2label
  labels.txt        the label (tag) names, one a line, in id order
  results.json      dev and test metrics of the exported model
A fresh run writes recipe.yaml and tokenizer/ after the engine has taken the directory (its
first step); a second run of the same command resumes (the engine's `resume: auto`) with the
saved tokenizer, so token ids never change under a resumed model.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import yaml
from accelerate.utils import set_seed

from nlp._common import ConfigError, DataError, NlpError, atomic_write
from nlp.models import ErnieConfig, PreTrainedEncoder, preset_config
from nlp.tokenizer import DataCollatorWithPadding, PackingCollator, Tokenizer, load_tokenizer
from nlp.train.evaluation import EvalPrediction, predict_loop
from nlp.train.recipe import Recipe, recipe_to_dict
from nlp.train.trainer import Trainer

__all__ = ["Loaders", "local_loaders", "finetune", "FinetuneResult", "TaskData", "load_task_data",
           "evaluate_model", "find_model_dir", "task_of_model"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- loaders


@dataclass
class Loaders:
    """How names become objects. `model(head_class, name, overrides)` loads weights,
    `config(name, overrides)` reads an architecture, `tokenizer(name)` a tokenizer."""

    model: Callable[[type, str, dict], PreTrainedEncoder]
    config: Callable[[str, dict], ErnieConfig]
    tokenizer: Callable[[str], Tokenizer]


def _local_dir(name: str) -> Path:
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{name!r} is not a local directory; hub names need the `nlp` CLI or "
                          "nlp.train.finetune(..., loaders=...) with hub-aware loaders")
    return path


def local_loaders() -> Loaders:
    """Loaders for local directories only (library use without the hub)."""
    return Loaders(
        model=lambda head, name, overrides: head.from_pretrained(_local_dir(name), **overrides),
        config=lambda name, overrides: ErnieConfig.from_pretrained(_local_dir(name), **overrides),
        tokenizer=lambda name: load_tokenizer(_local_dir(name)),
    )


# --------------------------------------------------------------------------- data


@dataclass
class TaskData:
    """The raw splits of a recipe and the label names found in (and checked against) them."""

    splits: dict[str, Any]  # "train" / "dev" / "test" -> datasets.Dataset (missing when unused)
    label_names: list[str] | None  # None for QA and regression


def _read_file(task: str, path: str, data: Any, split: str):
    from nlp.tasks.classification.data import read_classification
    from nlp.tasks.ner.data import read_conll, read_paddle_ner
    from nlp.tasks.qa.data import read_squad

    kwargs = dict(data.reader)
    if task == "text-classification":
        if data.label_names is not None:
            kwargs.setdefault("label_names", data.label_names)
        return read_classification(path, **kwargs)
    if task == "token-classification":
        fmt = kwargs.pop("format", "conll")
        if data.label_names is not None:
            kwargs.setdefault("label_names", data.label_names)
        return read_paddle_ner(path, **kwargs) if fmt == "paddle" else read_conll(path, **kwargs)
    return read_squad(path, **kwargs)


def _labels_of(task: str, ds: Any) -> list[str] | None:
    feats = ds.features
    if task == "text-classification":
        label = feats.get("label")
        names = getattr(label, "names", None) or getattr(getattr(label, "feature", None), "names", None)
        return list(names) if names else None
    if task == "token-classification":
        return list(feats["ner_tags"].feature.names)
    return None


def load_task_data(recipe: Recipe) -> TaskData:
    """Read the splits the recipe uses; check the label set. Raises ConfigError naming the key
    or file on a missing file, an unreadable record or a label set that does not match."""
    from nlp.tasks.datasets import BUILTIN, load

    task, data = recipe.task.name, recipe.data
    wanted = {"train": data.train_split, "dev": data.dev_split, "test": data.test_split}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    splits: dict[str, Any] = {}
    try:
        if data.dataset is not None and data.dataset.lower() in BUILTIN:
            dsd = load(data.dataset)
            for role, split in wanted.items():
                if split not in dsd:
                    raise ConfigError(f"data.{role}_split: {data.dataset!r} has no split {split!r}; "
                                      f"valid: {', '.join(dsd)}")
                splits[role] = dsd[split]
        elif data.dataset is not None:
            from nlp.tasks.datasets import PUBLIC, read_public_file

            spec = PUBLIC[data.dataset.lower()]
            for role, split in wanted.items():
                if split in data.files:
                    splits[role] = read_public_file(spec, data.files[split], split)
                else:  # the published file, downloaded once (needs the network)
                    splits[role] = load(data.dataset, split)
        else:
            for role, split in wanted.items():
                splits[role] = _read_file(task, data.files[split], data, split)
    except DataError as err:
        key = "data.label_names" if "label set" in str(err) or "tag set" in str(err) else "data"
        raise ConfigError(f"{key}: {err}") from None
    names = _labels_of(task, splits["train"])
    for role, ds in splits.items():
        other = _labels_of(task, ds)
        if names is not None and other is not None and other != names:
            raise ConfigError(f"data: the {role} split's labels {other} differ from the train split's {names}")
    if data.label_names is not None and names is not None and list(data.label_names) != names:
        missing = [n for n in names if n not in data.label_names]
        extra = [n for n in data.label_names if n not in names]
        detail = (f"the data has {missing} not in data.label_names" if missing else
                  f"data.label_names has {extra} not in the data" if extra else "the order differs")
        raise ConfigError(f"data.label_names {list(data.label_names)} does not match the labels of "
                          f"the data {names}: {detail}. Fix data.label_names (in id order) or the data.")
    if data.label_names is not None and task == "question-answering":
        raise ConfigError("data.label_names: question answering has no label set; remove it")
    if data.max_train_samples is not None:
        splits["train"] = splits["train"].select(range(min(data.max_train_samples, len(splits["train"]))))
    if data.max_eval_samples is not None:
        for role in ("dev", "test"):
            if role in splits:
                splits[role] = splits[role].select(range(min(data.max_eval_samples, len(splits[role]))))
    if len(splits["train"]) == 0:
        raise ConfigError(f"data: the train split ({data.train_split!r}) is empty")
    return TaskData(splits, names)


def _has_labels(task: str, ds: Any) -> bool:
    col = {"text-classification": "label", "token-classification": "ner_tags", "question-answering": "answers"}[task]
    return col in ds.column_names


def _training_texts(task: str, ds: Any) -> list[str]:
    if task == "text-classification":
        texts = list(ds["text"])
        return texts + (list(ds["text_pair"]) if "text_pair" in ds.column_names else [])
    if task == "token-classification":
        return ["".join(t) for t in ds["tokens"]]
    return list(dict.fromkeys(ds["context"])) + list(ds["question"])


# --------------------------------------------------------------------------- features


def featurize(recipe: Recipe, ds: Any, tokenizer: Tokenizer, label_names: list[str] | None) -> list[dict]:
    """Feature dicts (python lists) of one split, through the task layer's preprocessing."""
    from nlp.tasks.registry import get_task

    task, data = recipe.task.name, recipe.data
    spec = get_task(task)
    if task == "text-classification":
        fn = functools.partial(spec.preprocess, tokenizer=tokenizer, max_length=data.max_length,
                               label2id={n: i for i, n in enumerate(label_names)} if label_names else None,
                               num_labels=len(label_names) if label_names else None)
    elif task == "token-classification":
        fn = functools.partial(spec.preprocess, tokenizer=tokenizer, max_length=data.max_length,
                               label_names=label_names, label_all_tokens=data.label_all_tokens,
                               long_sentences=data.long_sentences)
    else:
        fn = functools.partial(spec.preprocess, tokenizer=tokenizer, max_length=data.max_length,
                               doc_stride=data.doc_stride)
    try:
        columns = fn(ds[:])
    except DataError as err:
        raise ConfigError(f"data: {err}") from None
    n = len(columns["input_ids"])
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


# --------------------------------------------------------------------------- metrics


def _pad_rows(rows: Sequence[np.ndarray], value: float) -> np.ndarray:
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), value, dtype=np.float64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


class TaskMetrics:
    """compute_metrics + preprocess_logits of one task. QA needs the examples and features of
    the set being scored: `use(examples, features)` switches them (dev during training, then test)."""

    def __init__(self, task: str, label_names: list[str] | None, model: PreTrainedEncoder, recipe: Recipe):
        self.task, self.label_names, self.model, self.recipe = task, label_names, model, recipe
        self.examples: Any = None
        self.features: list[dict] | None = None
        self.label_keys = ("start_positions", "end_positions") if task == "question-answering" else ("labels",)

    def use(self, examples: Any, features: list[dict]) -> "TaskMetrics":
        self.examples, self.features = examples, features
        return self

    def preprocess_logits(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> Any:
        if self.task == "question-answering":
            return outputs.start_logits, outputs.end_logits
        if self.task == "token-classification":
            # Decoded tag ids where a tag is scored (first sub-token of a word), -100 elsewhere;
            # with a CRF this is the Viterbi path, which argmax over logits is not.
            logits = outputs.logits
            if "labels" in batch:
                mask = batch["labels"] != -100
            else:
                mask = batch["attention_mask"].bool()
            paths = _unwrap(self.model).decode(logits, mask)
            out = torch.full(mask.shape, -100, dtype=torch.long, device=logits.device)
            for i, path in enumerate(paths):
                out[i, mask[i]] = torch.tensor(path, dtype=torch.long, device=logits.device)
            return out
        return outputs.logits

    def __call__(self, pred: EvalPrediction) -> dict[str, float]:
        if self.task == "text-classification":
            from nlp.tasks.classification.metrics import classification_metrics

            logits = np.stack(pred.predictions)
            if logits.shape[-1] == 1:  # regression
                from nlp.tasks.classification.metrics import regression_metrics

                return regression_metrics([float(x) for x in pred.label_ids], logits[:, 0].tolist())
            m = classification_metrics([int(x) for x in pred.label_ids], logits.argmax(-1).tolist(),
                                       labels=range(len(self.label_names or [])) or None)
            return {k: float(v) for k, v in m.items() if k != "per_class"}
        if self.task == "token-classification":
            from nlp.tasks.ner.metrics import ner_metrics

            names = self.label_names or []
            gold, guess = [], []
            for p, g in zip(pred.predictions, pred.label_ids):
                keep = g != -100
                gold.append([names[i] for i in g[keep]])
                guess.append([names[i] if 0 <= i < len(names) else "O" for i in p[keep]])
            m = ner_metrics(gold, guess)
            return {"precision": m["precision"], "recall": m["recall"], "f1": m["f1"]}
        from nlp.tasks.qa.metrics import cmrc2018_metrics
        from nlp.tasks.qa.postprocess import postprocess_qa

        if self.examples is None or self.features is None:
            raise NlpError("QA metrics need the examples and features being scored (TaskMetrics.use)")
        starts = _pad_rows([p[0] for p in pred.predictions], -1e9)
        ends = _pad_rows([p[1] for p in pred.predictions], -1e9)
        feats = {"example_id": [f["example_id"] for f in self.features],
                 "offset_mapping": [f["offset_mapping"] for f in self.features]}
        answers = postprocess_qa(self.examples, feats, starts, ends,
                                 max_answer_length=self.recipe.data.max_answer_length)
        m = cmrc2018_metrics({k: v["text"] for k, v in answers.items()}, self.examples)
        return {"exact_match": m["exact_match"], "f1": m["f1"], "average": m["average"]}


def _unwrap(model: Any) -> Any:
    return getattr(model, "module", model)


def evaluate_model(model: PreTrainedEncoder, metrics: TaskMetrics, features: list[dict],
                   collate_fn: Callable, *, batch_size: int = 64) -> dict[str, float]:
    """Loss and task metrics of `model` on labelled `features`, in one process (no Trainer)."""
    device = next(model.parameters()).device
    acc = types.SimpleNamespace(num_processes=1, process_index=0, device=device)
    prediction, loss = predict_loop(model, features, collate_fn, accelerator=acc, batch_size=batch_size,
                                    preprocess=metrics.preprocess_logits, label_keys=metrics.label_keys)
    out = {} if loss is None else {"loss": loss}
    out.update(metrics(prediction))
    return out


# --------------------------------------------------------------------------- model and tokenizer


def _build_tokenizer(recipe: Recipe, train_ds: Any, loaders: Loaders, run_dir: Path) -> Tokenizer:
    saved = run_dir / "tokenizer"
    if (saved / "tokenizer_config.json").is_file() or (saved / "vocab.txt").is_file():
        return load_tokenizer(saved)  # a resumed run keeps its token ids
    tok_section = recipe.tokenizer
    if tok_section.train is None:
        return loaders.tokenizer(tok_section.name or recipe.model.name)  # type: ignore[arg-type]
    from nlp.tokenizer import train_hybrid_tokenizer

    t = tok_section.train

    def train() -> Tokenizer:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp, "corpus.txt")
            corpus.write_text("\n".join(_training_texts(recipe.task.name, train_ds)), encoding="utf-8")
            try:
                return train_hybrid_tokenizer(corpus, t.vocab_size, word_fraction=t.word_fraction,
                                              min_frequency=t.min_frequency,
                                              model_max_length=max(512, recipe.data.max_length))
            except NlpError as err:
                raise ConfigError(f"tokenizer.train: {err}") from None

    state = _process_state(recipe)
    if state.num_processes == 1:
        return train()
    # Data-parallel: BPE merge ties may be ordered differently in two trainings, so the main
    # process trains once and every process loads the same files (a shared file system).
    staging = run_dir.parent / f".{run_dir.name}.tokenizer-staging"
    if state.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        train().save_pretrained(staging)
    state.wait_for_everyone()
    tok = load_tokenizer(staging)
    state.wait_for_everyone()
    if state.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
    return tok


def _process_state(recipe: Recipe) -> Any:
    """accelerate's process group, set up as the Trainer's Accelerator will want it: created
    before the Trainer with other settings, a launched CPU run would stay one process."""
    from accelerate import PartialState

    return PartialState(cpu=not (torch.cuda.is_available() and not recipe.train.cpu))


def _label_overrides(task: str, label_names: list[str] | None) -> dict[str, Any]:
    if task == "question-answering":
        return {"num_labels": 2}
    if label_names is None:  # regression
        return {"num_labels": 1}
    return {"id2label": dict(enumerate(label_names)), "label2id": {n: i for i, n in enumerate(label_names)}}


def build_model(recipe: Recipe, tokenizer: Tokenizer, label_names: list[str] | None,
                loaders: Loaders) -> PreTrainedEncoder:
    """The task head model: pretrained weights (`model.name`) or random ones (`model.init`)."""
    from nlp.tasks.registry import get_task

    head = get_task(recipe.task.name).head
    m = recipe.model
    overrides = {**_label_overrides(recipe.task.name, label_names), **m.config}
    try:
        if m.init == "pretrained":
            model = loaders.model(head, m.name, overrides)  # type: ignore[arg-type]
            _check_head_labels(model.config, label_names, recipe.task.name)
        else:
            if recipe.tokenizer.train is not None:
                overrides.setdefault("vocab_size", tokenizer.vocab_size)
            overrides.setdefault("pad_token_id", tokenizer.pad_token_id)
            config = (preset_config(m.preset, **overrides) if m.preset is not None
                      else loaders.config(m.name, overrides))  # type: ignore[arg-type]
            model = head(config)
    except (TypeError, ValueError) as err:
        if isinstance(err, NlpError):
            raise ConfigError(f"model: {err}") from None
        raise ConfigError(f"model.config: {err}") from None
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's "
                          f"vocab_size is {model.config.vocab_size}; set model.config.vocab_size or "
                          "use the model's own tokenizer")
    if recipe.data.max_length > model.config.max_position_embeddings:
        raise ConfigError(f"data.max_length={recipe.data.max_length} exceeds the model's "
                          f"max_position_embeddings={model.config.max_position_embeddings}")
    return model


def _check_head_labels(config: ErnieConfig, label_names: list[str] | None, task: str) -> None:
    if task == "question-answering" or label_names is None:
        return
    have = [config.id2label[i] for i in sorted(config.id2label)] if config.id2label else []
    if have and have != list(label_names) and not all(str(n).startswith("LABEL_") for n in have):
        raise ConfigError(f"model.name's head was trained for the labels {have}, but the data has "
                          f"{list(label_names)}; use a backbone checkpoint or data with those labels")


# --------------------------------------------------------------------------- the run


@dataclass
class FinetuneResult:
    run_dir: Path
    model_dir: Path
    status: str
    dev: dict[str, float] | None
    test: dict[str, float] | None
    summary: dict[str, Any] = field(default_factory=dict)


class _SaveRunFiles:
    """Writes recipe.yaml and tokenizer/ once the engine has taken the run directory."""

    def __init__(self, recipe: Recipe, tokenizer: Tokenizer, run_dir: Path, is_main: bool):
        self.recipe, self.tokenizer, self.run_dir, self.is_main = recipe, tokenizer, run_dir, is_main
        self.done = (run_dir / "tokenizer").is_dir()

    def on_step_end(self, trainer: Any, state: Any) -> None:
        if self.done or not self.is_main:
            return
        self.done = True
        with atomic_write(self.run_dir / "recipe.yaml", "w", encoding="utf-8") as f:
            yaml.safe_dump(recipe_to_dict(self.recipe), f, allow_unicode=True, sort_keys=False)
        tmp = self.run_dir / ".tmp-tokenizer"
        shutil.rmtree(tmp, ignore_errors=True)
        self.tokenizer.save_pretrained(tmp)
        os.replace(tmp, self.run_dir / "tokenizer")


def _check_run_dir(recipe: Recipe, run_dir: Path) -> None:
    """Refuse a directory the engine would resume but that holds another task's run."""
    saved = run_dir / "recipe.yaml"
    if saved.is_file():
        old = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
        if old.get("task", {}).get("name") not in (None, recipe.task.name):
            raise ConfigError(f"train.output_dir {run_dir} holds a {old['task']['name']} run; this "
                              f"recipe is {recipe.task.name}. Pick another train.output_dir.")


def finetune(recipe: Recipe, loaders: Loaders | None = None, *, callbacks: Sequence[Any] = ()) -> FinetuneResult:
    """Run `recipe` end to end; returns the dev/test metrics of the exported model."""
    loaders = loaders or local_loaders()
    run_dir = Path(recipe.train.output_dir)
    _check_run_dir(recipe, run_dir)
    data = load_task_data(recipe)  # bad files / labels fail here, before any model is built
    task = recipe.task.name
    for role in ("dev", "test"):
        if role in data.splits and not _has_labels(task, data.splits[role]):
            logger.warning("the %s split has no labels; it is not scored", role)
            del data.splits[role]
    if recipe.train.data.batching == "packed" and task == "question-answering":
        raise ConfigError("train.data.batching=packed does not apply to question answering "
                          "(answer positions are per window); use dynamic or length_grouped")
    tokenizer = _build_tokenizer(recipe, data.splits["train"], loaders, run_dir)
    # The new head's weights (or the whole model's, model.init=random) come from the seed, so
    # the same recipe gives the same run; a resumed run loads its weights from the checkpoint.
    set_seed(recipe.train.seed)
    model = build_model(recipe, tokenizer, data.label_names, loaders)
    features = {role: featurize(recipe, ds, tokenizer, data.label_names) for role, ds in data.splits.items()}
    pad = tokenizer.pad_token_id
    eval_collate = DataCollatorWithPadding(pad_token_id=pad)
    train_collate: Any = eval_collate
    if recipe.train.data.batching == "packed":
        train_collate = PackingCollator(max_length=recipe.train.data.pack_max_length, pad_token_id=pad)
    metrics = TaskMetrics(task, data.label_names, model, recipe)
    if "dev" in features:
        metrics.use(data.splits["dev"], features["dev"])
    settings = recipe.train
    if "dev" not in features and settings.eval.metric != "loss":
        raise ConfigError(f"train.eval.metric={settings.eval.metric!r} needs a labelled dev split; "
                          "set data.dev_split or train.eval.metric: loss")
    trainer = Trainer(
        model, settings, train_dataset=features["train"], collate_fn=train_collate,
        eval_dataset=features.get("dev"), eval_collate_fn=eval_collate,
        compute_metrics=metrics if "dev" in features else None,
        preprocess_logits=metrics.preprocess_logits, label_keys=metrics.label_keys,
        lengths=[len(f["input_ids"]) for f in features["train"]], run_files=("recipe.yaml", "tokenizer"),
        callbacks=[_SaveRunFiles(recipe, tokenizer, run_dir, _process_state(recipe).is_main_process), *callbacks],
    )
    result = trainer.train()
    final = _unwrap(trainer.accelerator.unwrap_model(trainer._model))
    scores: dict[str, dict[str, float] | None] = {"dev": None, "test": None}
    batch = settings.data.eval_batch_size or 2 * settings.data.batch_size
    for role in ("dev", "test"):
        if role in features:
            metrics.use(data.splits[role], features[role])
            scores[role] = evaluate_model(final, metrics, features[role], eval_collate, batch_size=batch)
    model_dir = result.model_dir
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(model_dir)
        if data.label_names is not None:
            with atomic_write(run_dir / "labels.txt", "w", encoding="utf-8") as f:
                f.write("\n".join(data.label_names) + "\n")
        with atomic_write(run_dir / "results.json", "w", encoding="utf-8") as f:
            json.dump({"task": task, "status": result.status, "dev": scores["dev"], "test": scores["test"],
                       "summary": result.summary}, f, indent=2, ensure_ascii=False)
    return FinetuneResult(run_dir, model_dir, result.status, scores["dev"], scores["test"], result.summary)


# --------------------------------------------------------------------------- runs and models


_ARCH_TASKS = {"ForSequenceClassification": "text-classification",
               "ForTokenClassification": "token-classification",
               "ForQuestionAnswering": "question-answering"}


def find_model_dir(path: str | Path) -> Path:
    """A run directory's exported model (RUN/model), or a model directory itself."""
    path = Path(path).expanduser()
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if (path / "config.json").is_file():
        return path
    raise ConfigError(f"{str(path)!r} is neither a run directory (with model/config.json) nor a model "
                      "directory (with config.json); give the train.output_dir of a finished run")


def task_of_model(model_dir: Path) -> str:
    """The task of a saved head model, from its config's `architectures` (transformers' field)."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    for arch in cfg.get("architectures") or []:
        for suffix, task in _ARCH_TASKS.items():
            if arch.endswith(suffix):
                return task
    run_recipe = model_dir.parent / "recipe.yaml"
    if run_recipe.is_file():
        return (yaml.safe_load(run_recipe.read_text(encoding="utf-8")) or {})["task"]["name"]
    raise ConfigError(f"cannot tell the task of {model_dir}: config.json names no task head "
                      f"(architectures: {cfg.get('architectures')}); pass --task")
