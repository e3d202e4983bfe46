"""The multiple-choice task's spec: what every layer of `nlp` asks about it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from nlp._common import DataError
from nlp._settings import Problem
from nlp.tasks.options import CallOption
from nlp.tasks.spec import TaskSettings, TaskSpec

from .collate import MultipleChoiceCollator
from .data import read_multiple_choice
from .heads import ErnieForMultipleChoice
from .pipeline import MultipleChoicePipeline
from .serving import MultipleChoiceAdapter, ScoresAdapter

__all__ = ["MultipleChoiceSpec", "MultipleChoiceSettings", "MULTIPLE_CHOICE"]

# the export check pairs each check text with these two candidate answers
_CHECK_CHOICES = ("是的，确实如此。", "不是，完全相反。")


@dataclass
class MultipleChoiceSettings(TaskSettings):
    name: str = "multiple-choice"
    num_choices: int | None = None  # every example must have this many choices; None: any (>= 2)

    def problems(self) -> Iterator[Problem]:
        if self.num_choices is not None and self.num_choices < 2:
            yield Problem("num_choices", f"num_choices must be >= 2 or null, got {self.num_choices}")


def _accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return float(np.mean([int(p) == int(g) for p, g in zip(predictions, labels)])) if labels else 0.0


class MultipleChoiceSpec(TaskSpec):
    name = "multiple-choice"
    aliases = ("mc",)
    head = ErnieForMultipleChoice
    pipeline_class = MultipleChoicePipeline
    architecture_suffix = "ForMultipleChoice"
    label_column = "label"
    has_label_set = False
    packable = False
    input_fields = ("question", "choices")
    result_field = "answer"
    settings = MultipleChoiceSettings
    serving = MultipleChoiceAdapter()
    # a call option of the task's own: `nlp predict --min-score`, the server's parameters.min_score
    call_options = (CallOption("min_score", float, 0.0, "no answer (null label and choice) where the best "
                               "choice's probability is below this", minimum=0.0, maximum=1.0),)
    export_input_axes = {n: ("batch", "choices", "sequence") for n in TaskSpec.export_inputs}
    export_outputs = {"logits": ("batch", "choices")}
    distill_losses = {"logits": "softmax"}  # a distribution over the choices
    reader = staticmethod(read_multiple_choice)
    preprocess = None
    metric = staticmethod(_accuracy)

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> Any:
        return read_multiple_choice(path, require_labels=need_labels, **dict(data.reader))

    def has_labels(self, ds: Any) -> bool:
        return len(ds) > 0 and all(label >= 0 for label in ds["label"])

    def training_texts(self, ds: Any) -> list[str]:
        return list(ds["question"]) + [c for row in ds["choices"] for c in row]

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        n = self.task_settings(settings).num_choices
        out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "labels": []}
        for q, choices, label in zip(columns["question"], columns["choices"], columns["label"]):
            if n is not None and len(choices) != n:
                raise DataError(f"an example has {len(choices)} choices; task.num_choices is {n}")
            enc = tokenizer([q] * len(choices), list(choices), truncation=True, max_length=data.max_length)
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                out[key].append(enc[key])
            out["labels"].append(int(label))
        return out

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> MultipleChoiceCollator:
        return MultipleChoiceCollator(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        return {"accuracy": _accuracy([int(np.argmax(p)) for p in predictions], [int(g) for g in label_ids or []])}

    def parse_record(self, record: Any, where: str) -> dict[str, Any]:
        ok = (isinstance(record, dict) and isinstance(record.get("question"), str)
              and isinstance(record.get("choices"), list) and len(record["choices"]) >= 2
              and all(isinstance(c, str) for c in record["choices"]))
        if not ok:
            raise DataError(f"{where}: expected an object {{\"question\": str, \"choices\": [str, str, ...]}}")
        return record

    def serving_routes(self) -> dict[str, Any]:
        return {"/predict": self.serving, "/scores": ScoresAdapter()}

    def check_batch(self, tokenizer: Any, max_length: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        feats = [tokenizer([t] * len(_CHECK_CHOICES), list(_CHECK_CHOICES), truncation=True, max_length=max_length)
                 for t in texts]
        batch = MultipleChoiceCollator(pad_token_id=tokenizer.pad_token_id)(
            [{k: f[k] for k in self.export_inputs} for f in feats])
        return {k: batch[k].numpy() for k in self.export_inputs}


MULTIPLE_CHOICE = MultipleChoiceSpec()
