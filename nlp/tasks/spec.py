"""What a task is, as every layer needs to know it: the `TaskSpec` base class.

Each task package defines one subclass and one instance in its ``spec.py``
(`nlp.tasks.classification.spec.CLASSIFICATION`, ...); `nlp.tasks.registry` registers them
(a task outside the package: `register_task`, or a plugin module, docs/tasks.md). The
fine-tuning engine (`nlp.train.finetune`), `nlp evaluate`, `nlp predict`, ONNX export and the
model server ask the spec instead of comparing task names::

    spec = get_task("ner")
    ds = spec.read("train.txt", data)                      # a datasets.Dataset
    names = spec.label_names(ds)                           # the tag set, or None
    model = spec.head(config_with(**spec.head_config(names, ds)))
    columns = spec.featurize(ds[:], tokenizer, data, names, settings=recipe.task)
    collate = spec.collator(tokenizer)                     # feature dicts -> a padded batch
    kept = spec.keep_logits(model, outputs, batch)         # per eval batch
    scores = spec.score(predictions, label_ids, label_names=names, examples=ds, features=feats,
                        data=data, settings=recipe.task)
    spec.export_axes(), spec.check_batch(tokenizer, 128)    # ONNX export and its check
    spec.serving_routes()                                  # {"/predict": ServingAdapter, ...}

`data` is the recipe's data section (`nlp.train.recipe.DataSection`), read by attribute:
`reader` (reader keyword arguments), `label_names`, `max_length`. `settings` is the recipe's
task section, an instance of the spec's `settings` class (a `TaskSettings` subclass holding the
task's own knobs: QA `doc_stride`, NER `long_sentences`, ...); None means its defaults.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from nlp._common import ConfigError, DataError
from nlp._extras import MissingExtraError
from nlp._settings import Settings
from nlp.tasks.model_io import MODEL_INPUTS, feature_length
from nlp.tasks.options import CallOption, check_options
from nlp.tasks.serving import ServingAdapter

__all__ = ["TaskSpec", "TaskSettings", "EXPORT_INPUTS", "DEFAULT_TASK"]

EXPORT_INPUTS = MODEL_INPUTS  # what a task exports by default: the model inputs, in their export order
DEFAULT_TASK = "text-classification"  # a recipe's task.name when it names none
EVAL_KEEPS = ("auto", "scores", "argmax")  # TaskSpec.eval_keeps
DISTILL_LOSSES = ("softmax", "sigmoid", "mse")  # the values of TaskSpec.distill_losses


@dataclass
class TaskSettings(Settings):
    """The recipe's `task:` section. A task with knobs of its own subclasses it (fields with
    defaults and a why-comment, checks in `problems()`) and names the subclass in its spec's
    `settings`; the schema engine builds it from the section, every problem reported at once."""

    # the task (`nlp.tasks.list_tasks()`, aliases allowed): text-classification,
    # token-classification (ner), question-answering (qa), ...
    name: str = DEFAULT_TASK


class TaskSpec:
    """One task. Subclasses set the class attributes and implement the methods that raise
    NotImplementedError; the rest have defaults that fit most tasks."""

    name: ClassVar[str]  # canonical name, e.g. "text-classification"
    needs_model: ClassVar[bool] = True  # False: a model-free task (`nlp.pipeline(name, **kwargs)`)
    aliases: ClassVar[tuple[str, ...]] = ()  # other names people use (transformers', PaddleNLP's)
    head: ClassVar[type]  # the model class (a PreTrainedEncoder subclass)
    # the hub name `nlp.pipeline(task)` and `nlp predict --task` use when no model is given: a
    # fine-tuned model shipped inside the package (`nlp hub ship`); None: the task has no default
    default_model: ClassVar[str | None] = None
    # what `model=` takes, said when no model is given and the task has no default ("" : any
    # model directory of the task)
    model_hint: ClassVar[str] = ""
    # pipelines of the task that need no model, by the name passed as `model=`: word segmentation's
    # "jieba"; `nlp.pipeline(task, model=NAME, **options)` calls the factory with the options
    builtin_pipelines: ClassVar[dict[str, Callable[..., Any]]] = {}
    pipeline_class: ClassVar[type]  # the inference pipeline class (nlp/tasks/<task>/pipeline.py, a base_pipeline.Pipeline)
    # the suffix of a saved head's config.json `architectures` entry (transformers' names):
    # "ErnieForTokenClassification" -> this task, for `nlp evaluate` / `nlp predict`
    architecture_suffix: ClassVar[str]
    label_column: ClassVar[str]  # the dataset column with the gold answers; absent: unlabelled
    label_keys: ClassVar[tuple[str, ...]] = ("labels",)  # the batch keys that hold labels
    has_label_set: ClassVar[bool] = True  # False where there is no label vocabulary (QA)
    packable: ClassVar[bool] = True  # whether train.data.batching=packed applies
    default_max_length: ClassVar[int] = 128  # tokens per example when nothing says otherwise
    input_fields: ClassVar[tuple[str, ...]] = ("text",)  # what `nlp predict` reads per record
    optional_input_fields: ClassVar[tuple[str, ...]] = ()  # string fields a record may add
    result_field: ClassVar[str] = "prediction"  # the field `nlp predict` adds per record (default predict)
    # every field `nlp predict` may add per record, `result_field` first; (): that one alone. A task
    # answering with several lists them (an embedding and its lexical weights)
    result_fields: ClassVar[tuple[str, ...]] = ()
    # the string columns of an example that distillation's word replacement may rewrite
    # (nlp/train/augment.py, `distill.augment`): a rewritten copy learns the teacher's outputs, not
    # its labels, so a column qualifies when nothing else in the example points into it (per-token
    # tags, answer offsets). (): the task is not augmented (refused with a message)
    augment_columns: ClassVar[tuple[str, ...]] = ()
    # files of the task's own that a model directory may hold beside the weights and the tokenizer
    # (the lexical tasks' word lexicon, lexicon.tsv): `nlp hub ship` and `nlp export` copy them
    model_files: ClassVar[tuple[str, ...]] = ()
    # `nlp predict --format training`: what a line of the task's training files is (the files
    # `reader` reads), when its results can be written as one (`training_line`), so that a
    # teacher's predictions on unlabelled text become training data (`data.extra_train`). None:
    # the task's results are not written so
    training_format: ClassVar[str | None] = None
    # the recipe's task section: TaskSettings, or a subclass with the task's own knobs
    settings: ClassVar[type[TaskSettings]] = TaskSettings
    # fields of `settings` that older recipes and run directories wrote in the data section
    # (`data.doc_stride`): read as the task setting, with a deprecation warning
    data_keys_moved: ClassVar[tuple[str, ...]] = ()
    # what a model of this task exports (ONNX): its inputs, and each output with its axis names
    export_inputs: ClassVar[tuple[str, ...]] = EXPORT_INPUTS
    # each input's axis names; None: ("batch", "sequence") for every input. "sequence" is bounded
    # by the model's position embeddings; the other names are free dynamic axes
    export_input_axes: ClassVar[dict[str, tuple[str, ...]] | None] = None
    export_outputs: ClassVar[dict[str, tuple[str, ...]]]
    # what a student learns from its teacher's outputs (knowledge distillation, nlp/train/distill.py),
    # by output name: "softmax" (KL divergence at a temperature over the last axis: class logits,
    # per-token tag emissions, QA start/end over the sequence), "sigmoid" (binary cross-entropy
    # against the teacher's probabilities, per label) or "mse" (embeddings, regression).
    # {}: the task declares none, and `distill.soft_weight > 0` is refused with a message
    distill_losses: ClassVar[dict[str, str]] = {}
    # what evaluation keeps of each batch's logits (the default `keep_logits`): "scores" (every
    # score, for metrics that need them), "argmax" (the best id per row or position), or "auto":
    # argmax where the logits' last axis is "vocab" (a correction head: vocabulary-sized scores
    # for every token of a test split would take gigabytes), scores otherwise
    eval_keeps: ClassVar[str] = "auto"
    # what the export check reports for an int8 model: "labels" (the share of argmax labels that
    # agree with PyTorch: scores), "cosine" (the lowest cosine of a row with PyTorch's: vectors) or
    # "order" (the share of pairs of texts one score a text orders as PyTorch does: relevance)
    export_agreement: ClassVar[str] = "labels"
    # how `POST /predict` parses, runs and shapes a request (nlp/tasks/serving.py)
    serving: ClassVar[ServingAdapter] = ServingAdapter()
    # the optional modules the task needs beyond the core install, by use: "predict" (its pipeline,
    # which training needs too) and "train" (fine-tuning and evaluation only); `extra` is the
    # package extra that installs them (`pip install 'nlp-zh[<extra>]'`, pyproject.toml).
    # `check_requirements` turns a missing one into one line naming the extra
    extra: ClassVar[str | None] = None
    requires: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # the options a caller sets per call (nlp/tasks/options.py): `nlp predict` / `nlp evaluate`
    # flags, the server's `parameters` (checks and OpenAPI), `nlp tasks`; given values reach
    # `predict(pipe, records, **options)` and, for "evaluate", the task settings scoring reads
    call_options: ClassVar[tuple[CallOption, ...]] = ()
    # the task layer's own functions, for direct use (`ds.map(spec.preprocess, ...)`)
    reader: ClassVar[Callable]  # path, **options -> Dataset (return_stats=True: and its ReadStats)
    preprocess: ClassVar[Callable]
    metric: ClassVar[Callable]
    postprocess: ClassVar[Callable | None] = None

    def __init__(self) -> None:
        if type(self).serving is TaskSpec.serving:
            self.serving = ServingAdapter()  # the base default: one per task, not shared
        if not self.serving.task:
            self.serving.task = self.name  # named in its error messages
        if not self.result_fields:
            self.result_fields = (self.result_field,)
        if self.result_fields[0] != self.result_field:
            raise ConfigError(f"{type(self).__name__}.result_fields {self.result_fields} must start with its "
                              f"result_field {self.result_field!r} (an inherited list names another task's fields?)")
        if self.eval_keeps not in EVAL_KEEPS:
            raise ConfigError(f"{type(self).__name__}.eval_keeps is {self.eval_keeps!r}; valid: {', '.join(EVAL_KEEPS)}")
        bad = {k: v for k, v in self.distill_losses.items() if v not in DISTILL_LOSSES}
        if bad:
            raise ConfigError(f"{type(self).__name__}.distill_losses has {bad}; each output's loss is one of "
                              f"{', '.join(DISTILL_LOSSES)}")
        if not self.serving.options:  # the server's parameters of /predict: the options it serves
            self.serving.options = self.options_for("serve")

    def options_for(self, use: str) -> tuple[CallOption, ...]:
        """The declared `call_options` that `use` ("predict", "serve", "evaluate") takes."""
        return tuple(o for o in self.call_options if use in o.uses)

    def check_options(self, values: Mapping[str, Any], use: str, *, max_length: int | None = None,
                      where: str = "{flag}") -> dict[str, Any]:
        """`values` ({option name: value}) checked against the declared options of `use`
        (nlp.tasks.options.OptionError naming the option, what it takes, and the valid names)."""
        return check_options(self.call_options, values, use=use, max_length=max_length, task=self.name, where=where)

    def check_requirements(self, use: str = "predict") -> None:
        """MissingExtraError (one line naming `extra`) when a module in `requires` for `use`
        ("predict" or "train") is not installed; checked when the task is used (`nlp.pipeline`,
        reading a fine-tune's or an evaluation's data), before any work."""
        if use not in ("predict", "train"):
            raise ConfigError(f"use must be 'predict' or 'train'; got {use!r}")
        wanted = [*self.requires.get("predict", ()), *(self.requires.get("train", ()) if use == "train" else ())]
        for module in wanted:
            if importlib.util.find_spec(module.split(".")[0]) is None:
                what = "fine-tuning and evaluation" if use == "train" else "pipeline"
                raise MissingExtraError(module, f"the {self.name} task's {what}", extra=self.extra)

    # ------------------------------------------------------------------ data

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> Any:
        """One split file -> a `datasets.Dataset`, with `data.reader` as the reader's options.
        `need_labels` (the training split): a file without labels is a DataError naming the
        file and the option that names the label column."""
        raise NotImplementedError

    def label_names(self, ds: Any) -> list[str] | None:
        """The label (tag) names of a dataset, in id order; None where there is no label set."""
        return None

    def has_labels(self, ds: Any) -> bool:
        """Whether a split carries gold answers (an unlabelled test split is not scored)."""
        return self.label_column in ds.column_names

    def trains_on(self, ds: Any) -> bool:
        """Whether a split can be the training split. Default: it has labels; a task that also
        learns from unlabelled text (unsupervised SimCSE) says so here."""
        return self.has_labels(ds)

    def training_texts(self, ds: Any) -> list[str]:
        """The texts of a split, for training a tokenizer on the fly."""
        raise NotImplementedError

    def summarize(self, ds: Any) -> list[str]:
        """Lines that describe a dataset's figures (`nlp data stats`): size, label counts."""
        return [f"{len(ds)} records"]

    def check_data(self, data: Any, settings: Any = None) -> list[str]:
        """Problems of the data and task settings together that only this task has, as messages
        naming the key (QA: `task.doc_stride < data.max_length`)."""
        return []

    def task_settings(self, settings: Any = None) -> TaskSettings:
        """`settings` (the recipe's task section), or this task's defaults when None."""
        return settings if isinstance(settings, self.settings) else self.settings(name=self.name)

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        """A batch of examples (a dict of columns) -> feature columns (python lists), the same
        for training and evaluation: input ids, labels, and what scoring needs (QA: offsets)."""
        raise NotImplementedError

    def saved_with_model(self, train: Any, settings: Any) -> tuple[Any, ...]:
        """Objects `nlp finetune` saves into every model directory it writes, beside the tokenizer
        (each has ``save_pretrained(directory)``), built from the training split (without the
        records of data.extra_train) and the recipe's task section: the task's `model_files`.
        Default: none."""
        return ()

    def copy_model_files(self, src: str | os.PathLike, dst: str | os.PathLike) -> None:
        """Copy the `model_files` that the model directory `src` holds into `dst` (`nlp hub ship`,
        `nlp export`)."""
        for name in self.model_files:
            if (Path(src) / name).is_file():
                shutil.copyfile(Path(src) / name, Path(dst) / name)

    def training_split(self, ds: Any, settings: Any = None) -> Any:
        """The records of the train split that training uses, by the recipe's task section
        (classification's few_shot: k per class); default: all of them."""
        return ds

    def prepare_tokenizer(self, tokenizer: Any, train: Any, label_names: Sequence[str] | None,
                          settings: Any = None) -> Iterator[tuple[range, Any]] | None:
        """Put on the tokenizer what the recipe's task section adds to the model's inputs (it is
        saved with the model; NER's and lexical analysis' gazetteer), before the model is built.
        Returns None when the training split is featurized with that tokenizer, or (lazily) the
        training rows in groups, each with the tokenizer its rows are featurized with (NER's
        training entities: each fold sees the other folds' only). Default: nothing, None."""
        return None

    def prepare_model(self, model: Any, features: Sequence[dict], collate: Callable[[list], dict],
                      settings: Any = None, *, tokenizer: Any = None, data: Any = None,
                      label_names: Sequence[str] | None = None, device: Any = "cpu") -> None:
        """Work on a freshly built model before the engine's training starts, by the recipe's task
        section (classification's few_shot: the encoder tuned on pairs, the head fitted);
        `features`: the training features, `collate` pads them. Default: nothing."""

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> Callable[[list], dict]:
        """Feature dicts -> one padded batch of tensors, for training, evaluation and the pipeline.
        Default: `DataCollatorWithPadding` (features of one sequence each); a task whose features
        have another shape (batch x choices x sequence) pads them itself."""
        from nlp.tokenizer import DataCollatorWithPadding

        return DataCollatorWithPadding(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)

    def feature_length(self, feature: Mapping[str, Any]) -> int:
        """A feature's size in tokens, for length-grouped batching and packing (default:
        `nlp.tasks.model_io.feature_length`, the longest row of a grouped feature)."""
        return feature_length(feature)

    # ------------------------------------------------------------------ model

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        """Config fields the head needs for this data and task settings (num_labels, id2label,
        problem_type, NER's use_crf...)."""
        if label_names is None:
            return {}
        return {"id2label": dict(enumerate(label_names)), "label2id": {n: i for i, n in enumerate(label_names)}}

    def loss_units(self, model: Any) -> Callable[[Any], int] | None:
        """How many things `model`'s mean loss averages over in a batch, for weighting each
        process's loss in data-parallel training (the Trainer's `loss_units`); None: the
        Trainer's default, the label entries that are not -100."""
        return None

    def check_head(self, config: Any, label_names: list[str] | None) -> None:
        """Refuse a pretrained head trained for other labels (ConfigError with the fix).
        Default: a head named LABEL_0.. (transformers' placeholder names) or without names fits."""
        if not self.has_label_set or label_names is None:
            return
        have = [config.id2label[i] for i in sorted(config.id2label)] if config.id2label else []
        if have and have != list(label_names) and not all(str(n).startswith("LABEL_") for n in have):
            raise ConfigError(f"model.name's head was trained for the labels {have}, but the data has "
                             f"{list(label_names)}; use a backbone checkpoint or data with those labels")

    # ------------------------------------------------------------------ evaluation

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        """What to keep of one evaluation batch's outputs, one row per example (`model` is the
        unwrapped model, for tasks that decode with it). Default: the logits, or their argmax
        as `eval_keeps` declares."""
        if self.keeps_argmax():
            return outputs.logits.argmax(-1)
        return outputs.logits

    def keeps_argmax(self) -> bool:
        """Whether the default `keep_logits` keeps the argmax (`eval_keeps`)."""
        if self.eval_keeps == "auto":
            axes = self.export_outputs.get("logits", ()) if hasattr(self, "export_outputs") else ()
            return bool(axes) and axes[-1] == "vocab"
        return self.eval_keeps == "argmax"

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Sequence[Mapping[str, Any]] | None, data: Any,
              settings: Any = None) -> dict[str, float]:
        """The task metrics of one evaluated split. `predictions[i]` is `keep_logits`' row of
        feature i, `label_ids[i]` its labels (a tuple with several label keys); `examples` and
        `features` are the split being scored (QA maps windows back to answers with them)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ prediction

    def parse_record(self, record: Any, where: str) -> dict[str, Any]:
        """One input record of `nlp predict` (a decoded JSON line), checked: an object with every
        `input_fields` key, each a string, and the `optional_input_fields` strings. DataError
        names `where` (FILE:LINE) and the field."""
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected an object with {', '.join(map(repr, self.input_fields))}, got "
                            f"{_json_short(record)}")
        missing = [k for k in self.input_fields if k not in record]
        if missing:
            has = f"its fields are {', '.join(map(repr, record))}" if record else "it has no fields"
            close = difflib.get_close_matches(missing[0], [str(k) for k in record], n=1, cutoff=0.6)
            fix = f"rename {close[0]!r} to {missing[0]!r}" if close else \
                f"give each line {', '.join(map(repr, self.input_fields))}"
            raise DataError(f"{where}: the object lacks {', '.join(map(repr, missing))} ({has}); {fix}")
        for key in (*self.input_fields, *self.optional_input_fields):
            if key in record and not isinstance(record[key], str):
                value = record[key]
                got = "null" if value is None else f"a {type(value).__name__} ({_json_short(value)})"
                raise DataError(f"{where}: {key!r} is {got}; expected a string")
        return record

    def predict(self, pipe: Any, records: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        """Run `pipe` (this task's pipeline) over input records ({field: value}); per record the
        fields to add to it in `nlp predict`'s output. `options`: the call options given (declared
        in `call_options` for "predict", checked). Default: the pipeline called with one list per
        input field, in `input_fields` order, and the options as keywords; each output under
        `result_field`."""
        outputs = pipe(*[[r[f] for r in records] for f in self.input_fields], **options)
        return [{self.result_field: o} for o in outputs]

    def training_line(self, result: dict[str, Any]) -> str:
        """One `nlp predict` result (a record with this task's result fields) as a line of the
        task's training files (`training_format`), which `reader` reads back to the same labels.
        DataError, saying why, for a result that cannot be written so (the caller names the line)."""
        raise NotImplementedError(f"{self.name} results are not written as training lines (training_format is None)")

    def empty_prediction(self) -> dict[str, Any]:
        """The fields `nlp predict` writes for a blank input line: `result_field` with no value
        (tasks give their own empty value: no labels [], no entities [], a null answer)."""
        return {self.result_field: None}

    # ------------------------------------------------------------------ export

    def model_outputs(self, config: Any) -> dict[str, tuple[str, ...]]:
        """The outputs a model of this task exports, with their axis names: `export_outputs`,
        unless the model's config adds some (an embedding model with lexical weights)."""
        return dict(self.export_outputs)

    def export_axes(self) -> dict[str, tuple[str, ...]]:
        """Each export input's axis names (`export_input_axes`, else (batch, sequence))."""
        axes = self.export_input_axes or {}
        return {name: tuple(axes.get(name, ("batch", "sequence"))) for name in self.export_inputs}

    def distill_targets(self, config: Any) -> dict[str, str]:
        """What a student learns from its teacher's outputs (knowledge distillation,
        nlp/train/distill.py), by output name: "softmax" (KL divergence at a temperature over
        the last axis: class logits, per-token tag emissions, QA start/end over the sequence),
        "sigmoid" (binary cross-entropy against the teacher's probabilities, per label) or "mse"
        (embeddings, regression). Default: `distill_losses`, as declared; a task whose
        targets depend on the model's config (a multi-label head) overrides this."""
        if not self.distill_losses:
            raise ConfigError(f"the {self.name} task declares no distillation targets (its spec's distill_losses: "
                              "{output: softmax | sigmoid | mse}); set distill.soft_weight: 0 to train on the "
                              "labels and hidden states only, or declare them")
        return dict(self.distill_losses)

    def distill_ranking(self, config: Any) -> tuple[str, float] | None:
        """The output whose ranking a student can learn (`distill.ranking_weight`: each query's
        distribution over a batch's candidates, nlp/train/distill_losses.py), (B, texts, width)
        vectors of records whose first text is the query, and the temperature over cosines of
        the model with this `config`. Default: None, the task has no such output."""
        return None

    def teacher_features(self, features: list[dict], teacher_config: Any, tokenizer: Any) -> list[dict]:
        """The training features as the teacher sees them in distillation's one caching pass
        (`distill.teacher_prompts`): what a teacher was trained to see with every input that the
        student's features lack (an embedding teacher's declared prompts). The student's own
        features are not changed. Default: the features as they are. A task whose targets are
        per token must keep the tokens where they are."""
        return features

    def check_batch(self, tokenizer: Any, max_length: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The padded int64 batch (by export input) an export is checked on: `texts` are real
        reviews of mixed lengths (nlp/deploy/check.py). Default: each text one sequence."""
        enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True)
        return {k: np.asarray(enc[k], dtype=np.int64) for k in self.export_inputs}

    # ------------------------------------------------------------------ serving

    def serving_routes(self) -> dict[str, ServingAdapter]:
        """The HTTP routes (POST) the model server answers for this task, each with its adapter
        (nlp/tasks/serving.py); every route gets the server's batching, limits, metrics and auth."""
        return {"/predict": self.serving}

    def __repr__(self) -> str:
        head = getattr(self, "head", None)
        return f"{type(self).__name__}(name={self.name!r}, head={getattr(head, '__name__', None)})"


def _json_short(value: Any) -> str:
    import json

    return json.dumps(value)[:40]
