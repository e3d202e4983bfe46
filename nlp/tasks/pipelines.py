"""Inference pipelines: text in, labels / entities / answers with scores and offsets out.

    clf = pipeline("text-classification", model="out/")          # a local model directory
    clf(["服务很好", "太难吃了"], top_k=2)  # [[{"label", "score"}, ...], ...]
    ner = pipeline("token-classification", model="ner_out/")
    ner("张三在北京工作")   # [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": ...}, ...]
    qa = pipeline("question-answering", model="qa_out/")
    qa(question="谁在北京?", context="张三在北京工作")  # {"answer", "score", "start", "end"}

This module loads from local directories (or takes a model and tokenizer already loaded);
`nlp.pipeline` (nlp/auto.py) resolves hub names to directories first, then calls the factory
`nlp.tasks.pipeline` (nlp/tasks/registry.py), which picks the class by task name.

Long inputs are windowed, never silently truncated: NER runs overlapping windows over the whole
text and takes each character's tag from the window where it has the most context on both
sides; QA searches every window of the context. Text classification truncates to
`max_length` tokens, as the model was trained on one window per text.

NER reads the text character by character (each non-space character is one word fed with
`is_split_into_words=True`), matching the character-labelled corpora and the alignment of
nlp/tasks/ner/preprocess.py; entity offsets are character offsets into the text given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlp._common import ConfigError, DataError
from nlp.models import PreTrainedEncoder
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.tasks.ner.heads import ErnieForTokenClassification
from nlp.tasks.ner.postprocess import tags_to_entities
from nlp.tasks.qa.heads import ErnieForQuestionAnswering
from nlp.tasks.qa.postprocess import postprocess_qa
from nlp.tasks.qa.preprocess import preprocess_qa
from nlp.tokenizer import DataCollatorWithPadding, Tokenizer, load_tokenizer

__all__ = [
    "Pipeline",
    "QuestionAnsweringPipeline",
    "TextClassificationPipeline",
    "TokenClassificationPipeline",
]

logger = logging.getLogger(__name__)

_MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def _device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cpu")
    if isinstance(device, int):
        return torch.device("cpu") if device < 0 else torch.device("cuda", device)
    return torch.device(device)


class Pipeline:
    """Holds a head model and its tokenizer; runs features through the model in batches."""

    task: str = ""
    head_class: type[PreTrainedEncoder] = PreTrainedEncoder

    def __init__(self, model: PreTrainedEncoder | str | os.PathLike, tokenizer: Tokenizer | str | os.PathLike | None = None,
                 *, device: Any = None, batch_size: int = 8, max_length: int | None = None) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if isinstance(model, PreTrainedEncoder):
            if not isinstance(model, self.head_class):
                raise ConfigError(f"{self.task!r} needs a {self.head_class.__name__}, got {type(model).__name__}")
            if tokenizer is None:
                raise ConfigError("give tokenizer= (a Tokenizer or a directory) with a model object")
        else:
            path = Path(model).expanduser()
            if not path.is_dir():
                raise ConfigError(f"model {str(model)!r} is not a local directory. To use a hub name, "
                                  "call nlp.pipeline(...), which downloads it first.")
            model = self.head_class.from_pretrained(path)
            tokenizer = path if tokenizer is None else tokenizer
        if not isinstance(tokenizer, Tokenizer):
            tokenizer = load_tokenizer(Path(tokenizer).expanduser())
        self.device = _device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        limit = min(tokenizer.model_max_length, model.config.max_position_embeddings)
        self.max_length = min(max_length or 512, limit)
        self._collate = DataCollatorWithPadding(pad_token_id=tokenizer.pad_token_id)

    @torch.inference_mode()
    def _forward(self, features: list[dict[str, list]]) -> list[Any]:
        """Model outputs per feature, batched; each row trimmed to its own length."""
        outs: list[Any] = []
        for i in range(0, len(features), self.batch_size):
            chunk = [{k: f[k] for k in _MODEL_INPUTS if k in f} for f in features[i:i + self.batch_size]]
            batch = {k: v.to(self.device) for k, v in self._collate(chunk).items()}
            out = self.model(**batch)
            outs += self._split(out, [len(f["input_ids"]) for f in chunk])
        return outs

    def _split(self, out: Any, lengths: list[int]) -> list[Any]:
        logits = out.logits.float().cpu().numpy()
        return [logits[i, :n] if logits.ndim == 3 else logits[i] for i, n in enumerate(lengths)]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task!r}, model={type(self.model).__name__}, "
                f"device={self.device}, batch_size={self.batch_size}, max_length={self.max_length})")


def _as_batch(inputs: Any, what: str) -> tuple[list[str], bool]:
    single = isinstance(inputs, str)
    texts = [inputs] if single else list(inputs)
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise DataError(f"{what} {i} is empty or not a string: {t!r}")
    return texts, single


class TextClassificationPipeline(Pipeline):
    """Labels with scores: softmax (single-label), sigmoid (multi-label) or the value (regression)."""

    task = "text-classification"
    head_class = ErnieForSequenceClassification

    def __call__(self, texts: str | Sequence[str], text_pair: str | Sequence[str] | None = None,
                 *, top_k: int | None = 1) -> list[dict] | list[list[dict]]:
        """Per text, the `top_k` labels by score ({"label", "score"}); top_k=None gives all."""
        batch, single = _as_batch(texts, "text")
        pairs = None
        if text_pair is not None:
            pairs, _ = _as_batch(text_pair, "text_pair")
            if len(pairs) != len(batch):
                raise DataError(f"{len(batch)} texts but {len(pairs)} text pairs")
        enc = self.tokenizer(batch, pairs, truncation=True, max_length=self.max_length)
        feats = [{k: enc[k][i] for k in _MODEL_INPUTS if k in enc} for i in range(len(batch))]
        cfg = self.model.config
        results = []
        for logits in self._forward(feats):
            problem = cfg.problem_type or ("regression" if cfg.num_labels == 1 else "single_label_classification")
            if problem == "regression":
                scores = logits
            elif problem == "multi_label_classification":
                scores = 1.0 / (1.0 + np.exp(-logits))
            else:
                e = np.exp(logits - logits.max())
                scores = e / e.sum()
            order = np.argsort(-scores, kind="stable")[: top_k or len(scores)]
            results.append([{"label": cfg.id2label[int(i)], "score": float(scores[i])} for i in order])
        return results[0] if single else results


class TokenClassificationPipeline(Pipeline):
    """Entities with type, text, score and character offsets, over texts of any length."""

    task = "token-classification"
    head_class = ErnieForTokenClassification

    def __call__(self, texts: str | Sequence[str], *, stride: int | None = None) -> list[dict] | list[list[dict]]:
        """Per text, its entities ({"type", "text", "start", "end", "score"}, `end` exclusive).

        `stride`: tokens shared by consecutive windows of a long text (default a quarter of
        the window); each character takes its tag from the window where it is most central.
        """
        batch, single = _as_batch(texts, "text")
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}")
        words = [[(i, c) for i, c in enumerate(t) if not c.isspace()] for t in batch]
        enc = self.tokenizer([[c for _, c in ws] for ws in words], is_split_into_words=True,
                             truncation=True, max_length=self.max_length, stride=stride,
                             return_overflowing_tokens=True)
        n_rows = len(enc["input_ids"])
        feats = [{k: enc[k][r] for k in _MODEL_INPUTS if k in enc} for r in range(n_rows)]
        word_ids = [enc.word_ids(r) for r in range(n_rows)]
        sample = enc["overflow_to_sample_mapping"]
        id2label = self.model.config.id2label
        # per text: word -> (centrality, tag id, prob) of the best window seen so far
        best: list[dict[int, tuple[int, int, float]]] = [{} for _ in batch]
        for r0 in range(0, n_rows, self.batch_size):
            rows = list(range(r0, min(n_rows, r0 + self.batch_size)))
            logits_rows = self._forward([feats[r] for r in rows])
            T = max(len(l) for l in logits_rows)
            padded = torch.full((len(rows), T, len(id2label)), 0.0)
            mask = torch.zeros(len(rows), T, dtype=torch.bool)
            for j, (r, lg) in enumerate(zip(rows, logits_rows)):
                padded[j, : len(lg)] = torch.from_numpy(lg)
                prev = None
                for t, w in enumerate(word_ids[r]):
                    mask[j, t] = w is not None and w != prev
                    prev = w
            decoded = self.model.decode(padded.to(self.device), mask.to(self.device))
            probs = torch.softmax(padded, -1)
            for j, r in enumerate(rows):
                positions = mask[j].nonzero().flatten().tolist()
                wids = word_ids[r]
                content = [t for t, w in enumerate(wids) if w is not None]
                lo, hi = content[0], content[-1]
                seen = best[sample[r]]
                for t, tag in zip(positions, decoded[j]):
                    w = wids[t]
                    centrality = min(t - lo, hi - t)
                    if w not in seen or centrality > seen[w][0]:
                        seen[w] = (centrality, int(tag), float(probs[j, t, tag]))
        results = []
        for text, ws, seen in zip(batch, words, best):
            tags = [id2label[seen[w][1]] if w in seen else "O" for w in range(len(ws))]
            scores = [seen[w][2] if w in seen else 1.0 for w in range(len(ws))]
            spans = [(i, i + 1) for i, _ in ws]
            results.append(tags_to_entities(text, tags, spans, scores))
        return results[0] if single else results


class QuestionAnsweringPipeline(Pipeline):
    """Answers with score and character offsets into the context, searched over all windows."""

    task = "question-answering"
    head_class = ErnieForQuestionAnswering

    def _split(self, out: Any, lengths: list[int]) -> list[Any]:
        s = out.start_logits.float().cpu().numpy()
        e = out.end_logits.float().cpu().numpy()
        return [(s[i, :n], e[i, :n]) for i, n in enumerate(lengths)]

    def __call__(self, question: str | Sequence[str], context: str | Sequence[str], *, top_k: int = 1,
                 doc_stride: int = 128, max_answer_length: int = 30,
                 handle_impossible_answer: bool = False) -> dict | list:
        """{"answer", "score", "start", "end"} per question (a list of `top_k` of them when top_k > 1).

        With `handle_impossible_answer`, the answer is "" when [CLS] outscores every span.
        """
        questions, single = _as_batch(question, "question")
        contexts, _ = _as_batch(context, "context")
        if len(contexts) == 1 and len(questions) > 1:
            contexts = contexts * len(questions)
        if len(contexts) != len(questions):
            raise DataError(f"{len(questions)} questions but {len(contexts)} contexts")
        stride = min(doc_stride, self.max_length // 2)
        examples = {"id": [str(i) for i in range(len(questions))], "question": questions, "context": contexts}
        feats = preprocess_qa(examples, self.tokenizer, max_length=self.max_length, doc_stride=stride)
        rows = [{k: feats[k][r] for k in _MODEL_INPUTS if k in feats} for r in range(len(feats["input_ids"]))]
        outs = self._forward(rows)
        T = max(len(s) for s, _ in outs)
        start = np.full((len(outs), T), -1e9)
        end = np.full((len(outs), T), -1e9)
        for r, (s, e) in enumerate(outs):
            start[r, : len(s)] = s
            end[r, : len(e)] = e
        preds = postprocess_qa(examples, feats, start, end, n_best=max(20, top_k),
                               max_answer_length=max_answer_length,
                               allow_impossible=handle_impossible_answer)
        results = []
        for eid in examples["id"]:
            p = preds[eid]
            if p["text"] == "" or top_k == 1:
                results.append({"answer": p["text"], "score": p["score"], "start": p["start"], "end": p["end"]})
            else:
                results.append([{"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
                                for c in p["n_best"][:top_k]])
        return results[0] if single else results

