"""The information extraction task (UIE): spans that answer a prompt (an entity type, or a role
of a span found one level up), for a schema given at call time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from nlp._common import DataError, NlpError
from nlp._settings import Problem
from nlp.tasks.datasets import register_dataset
from nlp.tasks.extraction.builtin import builtin_datasets
from nlp.tasks.extraction.data import read_extraction
from nlp.tasks.extraction.decode import merge_spans, row_spans
from nlp.tasks.extraction.heads import POSITIVE_WEIGHT, ErnieForInformationExtraction
from nlp.tasks.extraction.metrics import span_f1
from nlp.tasks.extraction.pipeline import DEFAULT_DOC_STRIDE, DEFAULT_POSITION_PROB, InformationExtractionPipeline
from nlp.tasks.extraction.preprocess import build_rows, encode_prompts, encode_texts, span_labels
from nlp.tasks.extraction.schema import schema_from_text
from nlp.tasks.extraction.serving import InformationExtractionAdapter
from nlp.tasks.options import CallOption
from nlp.tasks.spec import TaskSettings, TaskSpec
from nlp.tokenizer import DataCollatorWithPadding

__all__ = ["InformationExtractionSpec", "InformationExtractionSettings", "ExtractionCollator",
           "INFORMATION_EXTRACTION"]

_LABELS = ("start_labels", "end_labels")
# the export check asks each check text these prompts
_CHECK_PROMPTS = ("人物", "地点", "时间", "评价维度")


@dataclass
class InformationExtractionSettings(TaskSettings):
    """The recipe's task section for information extraction."""

    name: str = "information-extraction"
    doc_stride: int = DEFAULT_DOC_STRIDE  # tokens shared by consecutive windows of a long text
    # a pointer counts above this probability (Taskflow's position_prob), in scoring as in use
    position_prob: float = DEFAULT_POSITION_PROB
    # weight of the span tokens' terms in the pointers' cross-entropy (1: UIE's loss). Span
    # tokens are one or two in a hundred: a short run at 1 can settle on "no span anywhere"
    positive_weight: float = 1.0

    def problems(self) -> Iterator[Problem]:
        if self.positive_weight <= 0:
            yield Problem("positive_weight", f"positive_weight must be > 0, got {self.positive_weight}")
        if self.doc_stride < 0:
            yield Problem("doc_stride", f"doc_stride must be >= 0, got {self.doc_stride}")
        if not 0.0 <= self.position_prob < 1.0:
            yield Problem("position_prob", f"position_prob must be in [0, 1), got {self.position_prob}")


@dataclass
class ExtractionCollator:
    """Model inputs padded as every task's (DataCollatorWithPadding), and the 0/1 pointer labels
    padded with 0 to the same length, as float (B, T)."""

    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        inputs = DataCollatorWithPadding(pad_token_id=self.pad_token_id, pad_to_multiple_of=self.pad_to_multiple_of)
        batch = inputs([{k: v for k, v in f.items() if k not in _LABELS} for f in features])
        if all(k in features[0] for k in _LABELS):
            T = batch["input_ids"].shape[1]
            for key in _LABELS:
                rows = torch.zeros(len(features), T)
                for i, f in enumerate(features):
                    rows[i, : len(f[key])] = torch.tensor(f[key], dtype=torch.float32)
                batch[key] = rows
        return batch


class InformationExtractionSpec(TaskSpec):
    name = "information-extraction"
    aliases = ("ie", "uie")
    head = ErnieForInformationExtraction
    pipeline_class = InformationExtractionPipeline
    architecture_suffix = "ForInformationExtraction"
    label_column = "result_list"
    label_keys = _LABELS
    has_label_set = False
    packable = False  # pointer labels are per row
    default_max_length = 256
    input_fields = ("text",)
    result_field = "extraction"
    settings = InformationExtractionSettings
    serving = InformationExtractionAdapter()
    call_options = (
        CallOption("schema", str, None, "the types to extract: JSON as Taskflow takes it "
                   "('[\"时间\", {\"竞赛名称\": [\"主办方\"]}]') or names separated by commas", nullable=True,
                   uses=("predict",)),
        CallOption("position_prob", float, DEFAULT_POSITION_PROB, "a span's start and end each count above this "
                   "probability", minimum=0.0, maximum=0.999, uses=("predict", "serve", "evaluate")),
    )
    export_outputs = {"start_prob": ("batch", "sequence"), "end_prob": ("batch", "sequence")}
    reader = staticmethod(read_extraction)
    preprocess = None
    metric = staticmethod(span_f1)

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> Any:
        return read_extraction(path, **dict(data.reader))

    def summarize(self, ds: Any) -> list[str]:
        negatives = sum(1 for r in ds["result_list"] if not r)
        types = sorted(set(ds["type"]))
        return [f"{len(ds)} records ({negatives} negative prompts), {len(set(ds['text']))} texts",
                f"types: {', '.join(types[:20])}{' ...' if len(types) > 20 else ''}"]

    def training_texts(self, ds: Any) -> list[str]:
        return list(dict.fromkeys(ds["text"])) + list(dict.fromkeys(ds["prompt"]))

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        for col in ("id", "text", "prompt"):
            if col not in columns:
                raise DataError(f"information extraction records need a {col!r} column; columns are {sorted(columns)}")
        prompts = list(dict.fromkeys(columns["prompt"]))
        texts = list(dict.fromkeys(columns["text"]))
        p_index = {p: i for i, p in enumerate(prompts)}
        t_index = {t: i for i, t in enumerate(texts)}
        pairs = [(p_index[p], t_index[t]) for p, t in zip(columns["prompt"], columns["text"])]
        rows = build_rows(tokenizer, encode_prompts(tokenizer, prompts, data.max_length), encode_texts(tokenizer, texts),
                          pairs, data.max_length, self.task_settings(settings).doc_stride)
        out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "example_id": [],
                                "offset_mapping": []}
        gold = columns.get("result_list")
        if gold is not None:
            out.update(start_labels=[], end_labels=[])
        for row in rows:
            for k, v in row.features().items():
                out[k].append(v)
            out["example_id"].append(str(columns["id"][row.pair]))
            out["offset_mapping"].append([list(o) if o is not None else None for o in row.offsets])
            if gold is not None:
                g = gold[row.pair]
                start, end, _ = span_labels(row, [(x["start"], x["end"]) for x in g])
                out["start_labels"].append(start)
                out["end_labels"].append(end)
        return out

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> ExtractionCollator:
        return ExtractionCollator(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of)

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        weight = self.task_settings(settings).positive_weight
        return {} if weight == 1.0 else {POSITIVE_WEIGHT: weight}

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        return outputs.start_prob, outputs.end_prob

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any] | None, *, label_names: list[str] | None,
              examples: Any, features: Sequence[Mapping[str, Any]] | None, data: Any,
              settings: Any = None) -> dict[str, float]:
        if examples is None or features is None:
            raise NlpError("extraction scoring needs the records and features being scored")
        threshold = self.task_settings(settings).position_prob
        found: dict[str, list] = {}
        for (start, end), feat in zip(predictions, features):
            n = len(feat["input_ids"])
            offsets = [tuple(o) if o is not None else None for o in feat["offset_mapping"]]
            spans = row_spans(np.asarray(start)[:n], np.asarray(end)[:n], offsets, threshold)
            found.setdefault(feat["example_id"], []).extend(spans)
        ids = [str(i) for i in examples["id"]]
        predicted = [[(s, e) for s, e, _ in merge_spans(found.get(i, []))] for i in ids]
        gold = [[(x["start"], x["end"]) for x in g] for g in examples["result_list"]]
        return span_f1(predicted, gold, list(examples["type"]))

    def predict(self, pipe: Any, records: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        schema = options.pop("schema", None)
        if schema is not None:
            schema = schema_from_text(schema)
        elif pipe.schema is None:
            raise DataError("no schema: give --schema (JSON as Taskflow takes it, or names separated by commas: "
                            "--schema 时间,人物)")
        outputs = pipe([r["text"] for r in records], schema=schema, **options)
        return [{self.result_field: o} for o in outputs]

    def empty_prediction(self) -> dict[str, Any]:
        return {self.result_field: {}}

    def check_batch(self, tokenizer: Any, max_length: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        prompts = [_CHECK_PROMPTS[i % len(_CHECK_PROMPTS)] for i in range(len(texts))]
        rows = build_rows(tokenizer, encode_prompts(tokenizer, prompts, max_length), encode_texts(tokenizer, texts),
                          [(i, i) for i in range(len(texts))], max_length, 0)
        firsts = {}
        for r in rows:  # the first window of each text
            firsts.setdefault(r.pair, r)
        batch = DataCollatorWithPadding(pad_token_id=tokenizer.pad_token_id)([firsts[k].features() for k in sorted(firsts)])
        return {k: batch[k].numpy().astype(np.int64) for k in self.export_inputs}


for _dataset in builtin_datasets():
    register_dataset(_dataset)

INFORMATION_EXTRACTION = InformationExtractionSpec()
