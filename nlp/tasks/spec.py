"""What a task is, as the engine, the CLI and export need to know it: the `TaskSpec` base class.

Each task package defines one subclass and one instance in its ``spec.py``
(`nlp.tasks.classification.spec.CLASSIFICATION`, ...); `nlp.tasks.registry` registers them.
The fine-tuning engine (`nlp.train.finetune`), `nlp evaluate`, `nlp predict` and ONNX export
ask the spec instead of comparing task names::

    spec = get_task("ner")
    ds = spec.read("train.txt", data)                      # a datasets.Dataset
    names = spec.label_names(ds)                           # the tag set, or None
    model = spec.head(config_with(**spec.head_config(names, ds)))
    columns = spec.featurize(ds[:], tokenizer, data, names)
    kept = spec.keep_logits(model, outputs, batch)         # per eval batch
    scores = spec.score(predictions, label_ids, label_names=names, examples=ds, features=feats, data=data)

`data` is the recipe's data section (`nlp.train.recipe.DataSection`), read by attribute:
`reader` (reader keyword arguments), `label_names`, `max_length`, `doc_stride`,
`max_answer_length`, `label_all_tokens`, `long_sentences`.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping, Sequence

from nlp._common import ConfigError

__all__ = ["TaskSpec"]

EXPORT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class TaskSpec:
    """One task. Subclasses set the class attributes and implement the methods that raise
    NotImplementedError; the rest have defaults that fit most tasks."""

    name: ClassVar[str]  # canonical name, e.g. "text-classification"
    aliases: ClassVar[tuple[str, ...]] = ()  # other names people use (transformers', PaddleNLP's)
    head: ClassVar[type]  # the model class (a PreTrainedEncoder subclass)
    # the hub name `nlp.pipeline(task)` and `nlp predict --task` use when no model is given: a
    # fine-tuned model shipped inside the package (`nlp hub ship`); None: the task has no default
    default_model: ClassVar[str | None] = None
    pipeline: ClassVar[type]  # the inference pipeline class (nlp.tasks.pipelines)
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
    # what a model of this task exports (ONNX): its inputs, and each output with its axis names
    export_inputs: ClassVar[tuple[str, ...]] = EXPORT_INPUTS
    export_outputs: ClassVar[dict[str, tuple[str, ...]]]
    # the task layer's own functions, for direct use (`ds.map(spec.preprocess, ...)`)
    reader: ClassVar[Callable]  # path, **options -> Dataset (return_stats=True: and its ReadStats)
    preprocess: ClassVar[Callable]
    metric: ClassVar[Callable]
    postprocess: ClassVar[Callable | None] = None

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

    def training_texts(self, ds: Any) -> list[str]:
        """The texts of a split, for training a tokenizer on the fly."""
        raise NotImplementedError

    def summarize(self, ds: Any) -> list[str]:
        """Lines that describe a dataset's figures (`nlp data stats`): size, label counts."""
        return [f"{len(ds)} records"]

    def check_data(self, data: Any) -> list[str]:
        """Problems of the data settings that only this task has, as messages naming the key."""
        return []

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None) -> dict[str, list]:
        """A batch of examples (a dict of columns) -> feature columns (python lists), the same
        for training and evaluation: input ids, labels, and what scoring needs (QA: offsets)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ model

    def head_config(self, label_names: list[str] | None, train: Any = None) -> dict[str, Any]:
        """Config fields the head needs for this data (num_labels, id2label, problem_type...)."""
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
        unwrapped model, for tasks that decode with it)."""
        return outputs.logits

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Sequence[Mapping[str, Any]] | None, data: Any) -> dict[str, float]:
        """The task metrics of one evaluated split. `predictions[i]` is `keep_logits`' row of
        feature i, `label_ids[i]` its labels (a tuple with several label keys); `examples` and
        `features` are the split being scored (QA maps windows back to answers with them)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ prediction

    def predict(self, pipe: Any, records: list[dict[str, Any]], *, top_k: int = 1) -> list[dict[str, Any]]:
        """Run `pipe` (this task's pipeline) over input records ({field: value}); per record the
        fields to add to it in `nlp predict`'s output."""
        raise NotImplementedError

    def empty_prediction(self) -> dict[str, Any]:
        """The fields `nlp predict` writes for a blank input line (no labels, entities, answer)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, head={self.head.__name__})"
