"""Inference pipelines: text in, labels / entities / answers with scores and offsets out.

    clf = pipeline("text-classification", model="out/")          # a local model directory
    clf(["服务很好", "太难吃了"], top_k=2)  # [[{"label", "score"}, ...], ...]
    ner = pipeline("token-classification", model="ner_out/")
    ner("张三在北京工作")   # [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": ...}, ...]
    qa = pipeline("question-answering", model="qa_out/")
    qa(question="谁在北京?", context="张三在北京工作")  # {"answer", "score", "start", "end"}

A pipeline's forward pass is a backend (nlp/tasks/backend.py): a PyTorch head model wrapped in
`TorchBackend`, or an exported model on onnxruntime (`nlp.deploy.OnnxBackend`), so the same
pre- and post-processing serves both. This module loads PyTorch models from local directories
(or takes a model, or a backend, and a tokenizer already loaded); `nlp.pipeline` (nlp/auto.py)
resolves hub names to directories and export directories to onnxruntime backends first, then
calls the factory `nlp.tasks.pipeline` (nlp/tasks/registry.py), which picks the class by task.

Inputs: a str or a list of str (QA: question and context). `[]` gives `[]`; any string is
accepted (an empty or invisible-only text has no entities; classification still scores it).
Batches are formed from all features at once, shortest first, `batch_size` rows per forward
call: the windows of a long document run together, not one at a time.

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
from nlp.tasks.backend import CRF_KEYS, Backend, TorchBackend
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.tasks.ner.heads import ErnieForTokenClassification, decode_tags
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
# What `nlp export` writes (nlp.deploy); a directory holding it runs through nlp.pipeline.
_EXPORT_MANIFEST = "manifest.json"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Pipeline:
    """Holds a backend (the forward pass) and a tokenizer; runs features through it in batches."""

    task: str = ""
    head_class: type[PreTrainedEncoder] = PreTrainedEncoder

    def __init__(self, model: PreTrainedEncoder | Backend | str | os.PathLike,
                 tokenizer: Tokenizer | str | os.PathLike | None = None,
                 *, device: Any = None, batch_size: int = 8, max_length: int | None = None,
                 pad_to_multiple_of: int | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model: PreTrainedEncoder | None = None
        if isinstance(model, PreTrainedEncoder):
            if not isinstance(model, self.head_class):
                raise ConfigError(f"{self.task!r} needs a {self.head_class.__name__}, got {type(model).__name__}")
            if tokenizer is None:
                raise ConfigError("give tokenizer= (a Tokenizer or a directory) with a model object")
            backend: Backend = TorchBackend(model, device)
        elif isinstance(model, Backend):
            if tokenizer is None:
                raise ConfigError("give tokenizer= (a Tokenizer or a directory) with a backend")
            backend = model
        elif isinstance(model, (str, os.PathLike)):
            path = Path(model).expanduser()
            if not path.is_dir():
                raise ConfigError(f"model {str(model)!r} is not a local directory. To use a hub name, "
                                  "call nlp.pipeline(...), which downloads it first.")
            if (path / _EXPORT_MANIFEST).is_file():
                raise ConfigError(f"{str(path)!r} is an export directory (nlp export); run it with "
                                  f"nlp.pipeline({self.task!r}, model={str(path)!r}), which loads it on onnxruntime")
            backend = TorchBackend(self.head_class.from_pretrained(path), device)
            tokenizer = path if tokenizer is None else tokenizer
        else:
            raise TypeError(f"model must be a local directory (str or os.PathLike), a {self.head_class.__name__} "
                            f"or a backend (nlp.tasks.backend.Backend); got {type(model).__name__} {_short(model)}")
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = load_tokenizer(Path(tokenizer).expanduser())
        elif not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a Tokenizer or a local directory (str or os.PathLike); "
                            f"got {type(tokenizer).__name__} {_short(tokenizer)}")
        self.backend = backend
        self.config = backend.config
        if isinstance(backend, TorchBackend):
            self.model, self.device = backend.model, backend.device
        else:
            self.device = torch.device("cpu")  # where the pipeline's own decoding runs
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        limit = min(tokenizer.model_max_length, self.config.max_position_embeddings)
        self.max_length = min(max_length or 512, limit)
        self.pad_to_multiple_of = pad_to_multiple_of

    @property
    def pad_to_multiple_of(self) -> int | None:
        """None: each batch pads to its longest row; n: up to a multiple of n, so that batches
        come in fewer shapes (a server keeps one set of kernels per shape: nlp/deploy/server_model.py)."""
        return self._pad_to_multiple_of

    @pad_to_multiple_of.setter
    def pad_to_multiple_of(self, multiple: int | None) -> None:
        if multiple is not None:
            if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
                raise ConfigError(f"pad_to_multiple_of must be a positive int or None, got {multiple!r}")
            padded = -(-self.max_length // multiple) * multiple
            positions = self.config.max_position_embeddings
            if padded > positions:
                raise ConfigError(f"pad_to_multiple_of={multiple} pads rows of max_length={self.max_length} "
                                  f"to {padded} tokens, past the model's {positions} positions; give a "
                                  f"max_length of at most {positions // multiple * multiple}")
        self._pad_to_multiple_of = multiple
        self._collate = DataCollatorWithPadding(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    def _forward(self, features: list[dict[str, list]]) -> list[Any]:
        """Backend outputs per feature, each row trimmed to its own length. Features run
        shortest first, `batch_size` per backend call (less padding); results come back in order."""
        outs: list[Any] = [None] * len(features)
        order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
        for i in range(0, len(order), self.batch_size):
            rows = order[i:i + self.batch_size]
            chunk = [{k: features[r][k] for k in _MODEL_INPUTS if k in features[r]} for r in rows]
            batch = {k: v.numpy().astype(np.int64, copy=False) for k, v in self._collate(chunk).items()}
            out = self.backend(batch)
            for j, r in enumerate(rows):
                outs[r] = self._row(out, j, len(features[r]["input_ids"]))
        return outs

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        logits = out["logits"]
        return logits[j, :length] if logits.ndim == 3 else logits[j]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task!r}, backend={self.backend!r}, "
                f"batch_size={self.batch_size}, max_length={self.max_length})")


def _as_batch(inputs: Any, what: str) -> tuple[list[str], bool]:
    """(texts, single): a str is one text, a list or tuple of str a batch (possibly empty)."""
    if isinstance(inputs, str):
        return [inputs], True
    if not isinstance(inputs, Sequence) or isinstance(inputs, (bytes, bytearray)):
        raise TypeError(f"{what} must be a str or a list of str; got {type(inputs).__name__} {_short(inputs)}")
    texts = list(inputs)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what} {i} must be a str; got {type(t).__name__} {_short(t)} "
                            f"(give a str or a list of str)")
    return texts, False


def _check_unicode(texts: list[str], what: str, single: bool) -> None:
    """DataError naming the text and the character of a lone surrogate (not valid UTF-8)."""
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            name = what if single else f"{what} {i}"
            raise DataError(f"{name} holds a lone surrogate {text[err.start]!r} at character {err.start}; "
                            "text must be valid Unicode (decode bytes with errors='replace')") from None


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
        if not batch:
            return []
        enc = self.tokenizer(batch, pairs, truncation=True, max_length=self.max_length)
        feats = [{k: enc[k][i] for k in _MODEL_INPUTS if k in enc} for i in range(len(batch))]
        cfg = self.config
        problem = cfg.problem_type or ("regression" if cfg.num_labels == 1 else "single_label_classification")
        results = []
        for logits in self._forward(feats):
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
        _check_unicode(batch, "text", single)
        room = self.max_length - 2
        stride = max(1, room // 4) if stride is None else stride
        if not 0 <= stride < room:
            raise ConfigError(f"stride={stride} must be in [0, {room}) for max_length={self.max_length}")
        words = [[(i, c) for i, c in enumerate(t) if not c.isspace()] for t in batch]
        # per text: word -> (centrality, tag id, prob) of the best window seen so far
        best: list[dict[int, tuple[int, int, float]]] = [{} for _ in batch]
        todo = [i for i, ws in enumerate(words) if ws]  # a text without words has no entities
        if todo:
            self._tag_words([[c for _, c in words[i]] for i in todo], [best[i] for i in todo], stride)
        id2label = self.config.id2label
        results = []
        for text, ws, seen in zip(batch, words, best):
            tags = [id2label[seen[w][1]] if w in seen else "O" for w in range(len(ws))]
            scores = [seen[w][2] if w in seen else 1.0 for w in range(len(ws))]
            spans = [(i, i + 1) for i, _ in ws]
            results.append(tags_to_entities(text, tags, spans, scores))
        return results[0] if single else results

    def _tag_words(self, words: list[list[str]], best: list[dict], stride: int) -> None:
        """Fill `best[i]` (word -> (centrality, tag, prob)) for the words of each text, all
        windows of all texts batched together."""
        enc = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=self.max_length,
                             stride=stride, return_overflowing_tokens=True)
        n_rows = len(enc["input_ids"])
        word_ids = [enc.word_ids(r) for r in range(n_rows)]
        sample = enc["overflow_to_sample_mapping"]
        # rows whose words all vanished in the tokenizer (zero-width and other ignored characters)
        rows = [r for r in range(n_rows) if any(w is not None for w in word_ids[r])]
        if not rows:
            return
        logits_rows = self._forward([{k: enc[k][r] for k in _MODEL_INPUTS if k in enc} for r in rows])
        num_labels = logits_rows[0].shape[-1]
        T = max(len(lg) for lg in logits_rows)
        padded = torch.zeros((len(rows), T, num_labels))
        mask = torch.zeros(len(rows), T, dtype=torch.bool)
        for j, (r, lg) in enumerate(zip(rows, logits_rows)):
            padded[j, : len(lg)] = torch.from_numpy(np.ascontiguousarray(lg, dtype=np.float32))
            prev = None
            for t, w in enumerate(word_ids[r]):
                mask[j, t] = w is not None and w != prev
                prev = w
        crf = self.backend.crf
        crf = None if crf is None else tuple(torch.from_numpy(np.asarray(crf[k], dtype=np.float32)) for k in CRF_KEYS)
        decoded = decode_tags(padded, mask, self.config.id2label, crf=crf)
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


class QuestionAnsweringPipeline(Pipeline):
    """Answers with score and character offsets into the context, searched over all windows."""

    task = "question-answering"
    head_class = ErnieForQuestionAnswering

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return out["start_logits"][j, :length], out["end_logits"][j, :length]

    def __call__(self, question: str | Sequence[str], context: str | Sequence[str], *, top_k: int = 1,
                 doc_stride: int = 128, max_answer_length: int = 30,
                 handle_impossible_answer: bool = False) -> dict | list:
        """{"answer", "score", "start", "end"} per question (a list of `top_k` of them when top_k > 1).

        With `handle_impossible_answer`, the answer is "" when [CLS] outscores every span.
        A blank question or context has no answer: {"answer": "", "score": 0.0, "start": 0, "end": 0}.
        """
        questions, single = _as_batch(question, "question")
        contexts, _ = _as_batch(context, "context")
        if len(contexts) == 1 and len(questions) > 1:
            contexts = contexts * len(questions)
        if len(contexts) != len(questions):
            raise DataError(f"{len(questions)} questions but {len(contexts)} contexts")
        if not questions:
            return []
        none = {"answer": "", "score": 0.0, "start": 0, "end": 0}
        results: list[Any] = [dict(none) for _ in questions]
        # a blank question or context has no answer (and is not a window to run)
        todo = [i for i, (q, c) in enumerate(zip(questions, contexts)) if q.strip() and c.strip()]
        if not todo:
            return results[0] if single else results
        stride = min(doc_stride, self.max_length // 2)
        examples = {"id": [str(i) for i in todo], "question": [questions[i] for i in todo],
                    "context": [contexts[i] for i in todo]}
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
        for eid in examples["id"]:
            p = preds[eid]
            if p["text"] == "" or top_k == 1:
                results[int(eid)] = {"answer": p["text"], "score": p["score"], "start": p["start"], "end": p["end"]}
            else:
                results[int(eid)] = [{"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
                                     for c in p["n_best"][:top_k]]
        return results[0] if single else results

