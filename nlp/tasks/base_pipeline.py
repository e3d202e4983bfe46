"""The base of every task's inference pipeline: a backend, a tokenizer, batched forwards.

Each task's pipeline class lives in its package (`nlp.tasks.<task>.pipeline`, its spec's
`pipeline_class`); `nlp.pipeline` is the one entry point that builds them:

    clf = nlp.pipeline("text-classification", model="out/")          # a local model directory
    clf(["服务很好", "太难吃了"], top_k=2)  # [[{"label", "score"}, ...], ...]
    ner = nlp.pipeline("token-classification", model="ner_out/")
    ner("张三在北京工作")   # [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": ...}, ...]
    qa = nlp.pipeline("question-answering", model="qa_out/")
    qa(question="谁在北京?", context="张三在北京工作")  # {"answer", "score", "start", "end"}

A pipeline's forward pass is a backend (nlp/tasks/backend.py): a PyTorch head model wrapped in
`TorchBackend`, or an exported model on onnxruntime (`nlp.deploy.OnnxBackend`), so the same
pre- and post-processing serves both. This module loads PyTorch models from local directories
(or takes a model, or a backend, and a tokenizer already loaded); `nlp.pipeline` (nlp/auto.py)
resolves hub names to directories and export directories to onnxruntime backends first, then
calls `nlp.tasks.build_pipeline` (nlp/tasks/registry.py), which picks the class by task.

Inputs: a str or a list of str (QA: question and context). `[]` gives `[]`. A text with no
tokens (blank, or only characters the tokenizer drops: NUL, ZWSP, BOM, U+FE0F, a lone combining
mark) is blank to the model, and every task treats it so (`tokenless`, `on_tokenless`): NER and
the lexical tasks give no entities and no words, QA no answer; classification and embeddings,
whose answer would be the model's output for [CLS] [SEP] alone, the same for every such text,
raise DataError naming the text; the server answers 422 naming the field for every task. White
space that a tokenizer makes a bare word-start mark of (XLM-R's) counts as no token. Those tasks
refuse a text whose every token is the unknown one as well ("😡" to a vocabulary without it:
`unknown_only`), for the same reason; NER and the lexical tasks answer it (nlp/tasks/unreadable.py).
Batches are formed from all features at once, shortest first, `batch_size` rows per forward
call: the windows of a long document run together, not one at a time. A PyTorch model on the CPU
pads each batch's length up to a multiple of 8 (`pad_to_multiple_of="auto"`; None: to its
longest row), so that oneDNN builds kernels for a few shapes rather than one per length.

`precision=`: None runs a PyTorch model in the dtype it loads in (fp32); "auto" in what is fast
on the device (bf16 on a CPU with AVX512-BF16 or AMX, and on Ampere+ GPUs), or "fp32", "bf16",
"fp16" (GPU only): the weights are cast once (nlp/models/precision.py). A backend (an export on
onnxruntime) runs in the precision it was made in.

Long inputs are windowed, never silently truncated: NER runs overlapping windows over the whole
text and takes each character's tag from the window where it has the most context on both
sides; QA searches every window of the context. Text classification truncates to
`max_length` tokens, as the model was trained on one window per text.

NER reads the text character by character (each non-space character is one word fed with
`is_split_into_words=True`), matching the character-labelled corpora and the alignment of
nlp/tasks/ner/preprocess.py; entity offsets are character offsets into the text given.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nlp._common import ConfigError, DataError
from nlp.models import PreTrainedEncoder
from nlp.tasks.backend import Backend, TorchBackend
from nlp.tasks.model_io import EXPORT_MANIFEST, MODEL_INPUTS, feature_length
from nlp.tasks.unreadable import KnownCharacters
from nlp.tokenizer import DataCollatorWithPadding, Tokenizer, load_tokenizer

__all__ = ["Pipeline", "MODEL_INPUTS", "CPU_PAD_MULTIPLE", "TOKENLESS", "UNKNOWN_ONLY", "as_batch", "check_unicode",
           "fitting_pad_multiple"]

logger = logging.getLogger(__name__)

# what a PyTorch model on the CPU pads each batch's length up to, by default (Pipeline._auto_pad_multiple)
CPU_PAD_MULTIPLE = 8
# A character every tokenizer of this toolkit makes a token of (or [UNK]): a text holding one
# has tokens without running the tokenizer, which only the rest (an odd text) then needs.
_SURELY_TOKENS = re.compile(r"[0-9A-Za-z\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Characters before a cut whose tokens a prefix must hold (`kept_prefixes`): past the longest
# word WordPiece splits into pieces (100 characters; a longer one is one [UNK])
_CUT_MARGIN = 128
# What a text with no tokens is (blank, or only characters the tokenizer drops), said once for
# every task's message.
TOKENLESS = ("has no tokens: it is blank or holds only characters the tokenizer drops (controls such as NUL, "
             "format characters such as ZWSP or BOM, variation selectors, lone combining marks)")
# What a text whose every token is the unknown one is, likewise (nlp/tasks/unreadable.py).
UNKNOWN_ONLY = ("holds no character the model knows: every one is outside its vocabulary (an emoji or a "
                "character it lacks, read as the unknown token)")


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
                 pad_to_multiple_of: int | None | str = "auto", precision: str | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model: PreTrainedEncoder | None = None
        if isinstance(model, PreTrainedEncoder):
            if not isinstance(model, self.head_class):
                raise ConfigError(f"{self.task!r} needs a {self.head_class.__name__}, got {type(model).__name__}")
            if tokenizer is None:
                raise ConfigError("give tokenizer= (a Tokenizer or a directory) with a model object")
            backend: Backend = TorchBackend(model, device, precision)
        elif isinstance(model, Backend):
            if tokenizer is None:
                raise ConfigError("give tokenizer= (a Tokenizer or a directory) with a backend")
            if precision not in (None, "auto", model.precision):
                raise ConfigError(f"precision={precision!r}: this {model.name} backend runs in the precision its "
                                  f"model was made in ({model.precision}); leave precision out")
            backend = model
        elif isinstance(model, (str, os.PathLike)):
            path = Path(model).expanduser()
            if not path.is_dir():
                raise ConfigError(f"model {str(model)!r} is not a local directory. To use a hub name, "
                                  "call nlp.pipeline(...), which downloads it first.")
            if (path / EXPORT_MANIFEST).is_file():
                raise ConfigError(f"{str(path)!r} is an export directory (nlp export); run it with "
                                  f"nlp.pipeline({self.task!r}, model={str(path)!r}), which loads it on onnxruntime")
            from nlp.tasks.model_dirs import load_trained_head  # the registry it asks imports the task pipelines

            backend = TorchBackend(load_trained_head(path, self.task, self.head_class), device, precision)
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
        limit = min(tokenizer.model_max_length, self.config.max_sequence_length)
        self.max_length = min(max_length or 512, limit)
        self.pad_to_multiple_of = self._auto_pad_multiple() if pad_to_multiple_of == "auto" else pad_to_multiple_of

    # What the pipeline answers for a text with no tokens (`tokenless`): "error" where an answer
    # would be the model's output for [CLS] [SEP] alone, the same for every such text and so
    # silently wrong (a vector, a label); "empty" where nothing in the text is the right answer
    # (no entities, no words, no answer span).
    on_tokenless: str = "empty"

    def tokenless(self, texts: Sequence[str]) -> list[int]:
        """The indices of the texts the tokenizer makes no token of, or only tokens that stand for
        no character (XLM-R's tokenizer makes a bare word-start mark of white space)."""
        suspects = [i for i, t in enumerate(texts) if not _SURELY_TOKENS.search(t)]
        if not suspects:
            return []
        enc = self.tokenizer([texts[i] for i in suspects], add_special_tokens=False)
        blank = self.tokenizer.contentless_ids
        return [i for i, ids in zip(suspects, enc["input_ids"]) if blank.issuperset(ids)]

    def unknown_only(self, texts: Sequence[str]) -> list[int]:
        """The indices of the texts with tokens, all of them the unknown one (or a bare word-start
        mark): "😡" to a vocabulary without it. Their answer is the model's for `[UNK]` alone."""
        known = self._known_characters
        suspects = [i for i, t in enumerate(texts) if not known.any_in(t)]
        if not suspects:
            return []
        enc = self.tokenizer([texts[i] for i in suspects], add_special_tokens=False)
        return [i for i, ids in zip(suspects, enc["input_ids"]) if ids and known.unknown.issuperset(ids)
                and not self.tokenizer.contentless_ids.issuperset(ids)]

    @functools.cached_property
    def _known_characters(self) -> KnownCharacters:
        return KnownCharacters(self.tokenizer)

    def check_tokens(self, texts: Sequence[str], what: str, single: bool) -> None:
        """DataError naming the first text with no tokens, or none but unknown ones, for a pipeline
        whose answer to one would be silently wrong (`on_tokenless = "error"`)."""
        if self.on_tokenless != "error":
            return
        for bad, why in ((self.tokenless(texts), TOKENLESS), (self.unknown_only(texts), UNKNOWN_ONLY)):
            if bad:
                i = bad[0]
                name = what if single else f"{what} {i}"
                more = f" (and {len(bad) - 1} more: {', '.join(map(str, bad[1:6]))}{', ...' if len(bad) > 6 else ''})" \
                    if len(bad) > 1 else ""
                raise DataError(f"{name} {_short(texts[i])} {why}{more}; a {self.task} answer to it would be the "
                                "same for every such text. Drop such texts, or give text with some content")

    def kept_prefixes(self, texts: Sequence[str], tokens: int) -> list[str]:
        """Each text cut to a prefix that holds its first `tokens` tokens exactly as the whole text
        does, so that a caller keeping only those (a truncated window) tokenizes what it keeps,
        not a 100,000-character text for one window. A prefix is grown by doubling until its tokens
        that end `_CUT_MARGIN` characters before the cut number `tokens`: a cut changes only the
        tokens of the word it falls in, and no tokenizer here reads further than a word (WordPiece
        splits at white space, punctuation and each CJK character, and makes one [UNK] of a word of
        over 100 characters; the hybrid tokenizer's segmenter works between punctuation)."""
        out = []
        for text in texts:
            n = max(4 * tokens, 256)
            while n + _CUT_MARGIN < len(text):
                enc = self.tokenizer(text[:n], add_special_tokens=False, return_offsets_mapping=True)
                if sum(1 for _, end in enc["offset_mapping"] if end <= n - _CUT_MARGIN) >= tokens:
                    break
                n *= 2
            out.append(text[:n] if n + _CUT_MARGIN < len(text) else text)
        return out

    def _auto_pad_multiple(self) -> int | None:
        """`pad_to_multiple_of="auto"`: CPU_PAD_MULTIPLE for a PyTorch model on the CPU, else None.

        oneDNN builds its GEMM and attention kernels for each shape it meets, and a pipeline's
        batches, padded to their longest row, come in as many lengths as the texts have: rounding
        the lengths up to a multiple of 8 bounds the shapes it builds for, so a first pass over
        varied texts does not keep paying for new kernels, and costs a few padded tokens per row
        (benchmarks/padding.py measures both). onnxruntime and GPUs take every length as it comes."""
        if not isinstance(self.backend, TorchBackend) or self.device.type != "cpu":
            return None
        return fitting_pad_multiple(CPU_PAD_MULTIPLE, self.max_length, self.config.max_sequence_length)

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
            positions = self.config.max_sequence_length
            if fitting_pad_multiple(multiple, self.max_length, positions) is None:
                raise ConfigError(f"pad_to_multiple_of={multiple} pads rows of max_length={self.max_length} "
                                  f"to {_round_up(self.max_length, multiple)} tokens, past the model's {positions} "
                                  f"positions; give a max_length of at most {positions // multiple * multiple}")
        self._pad_to_multiple_of = multiple
        self._collate = self._make_collator(multiple)

    def _make_collator(self, multiple: int | None) -> Any:
        """Feature dicts -> a padded batch of tensors (a task with 3-D features pads its own)."""
        return DataCollatorWithPadding(pad_token_id=self.tokenizer.pad_token_id, pad_to_multiple_of=multiple)

    def _length(self, feature: dict[str, list]) -> int:
        """A feature's length in tokens: what its forward is sorted by and trimmed to."""
        return feature_length(feature)

    def _forward(self, features: list[dict[str, list]]) -> list[Any]:
        """Backend outputs per feature, each row trimmed to its own length. Features run
        shortest first, `batch_size` per backend call (less padding); results come back in order."""
        outs: list[Any] = [None] * len(features)
        order = sorted(range(len(features)), key=lambda i: self._length(features[i]))
        for i in range(0, len(order), self.batch_size):
            rows = order[i:i + self.batch_size]
            chunk = [{k: features[r][k] for k in MODEL_INPUTS if k in features[r]} for r in rows]
            batch = {k: v.numpy().astype(np.int64, copy=False) for k, v in self._collate(chunk).items()}
            out = self.backend(batch)
            for j, r in enumerate(rows):
                outs[r] = self._row(out, j, self._length(features[r]))
        return outs

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        logits = out["logits"]
        return logits[j, :length] if logits.ndim == 3 else logits[j]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task!r}, backend={self.backend!r}, "
                f"batch_size={self.batch_size}, max_length={self.max_length})")


def _round_up(length: int, multiple: int) -> int:
    return -(-length // multiple) * multiple


def fitting_pad_multiple(multiple: int, max_length: int, max_positions: int) -> int | None:
    """`multiple`, where rows of `max_length` tokens padded up to a multiple of it still fit the
    model's `max_positions` position embeddings; else None (pad to the longest row)."""
    return multiple if _round_up(max_length, multiple) <= max_positions else None


def as_batch(inputs: Any, what: str) -> tuple[list[str], bool]:
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


def check_unicode(texts: list[str], what: str, single: bool) -> None:
    """DataError naming the text and the character of a lone surrogate (not valid UTF-8)."""
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            name = what if single else f"{what} {i}"
            raise DataError(f"{name} holds a lone surrogate {text[err.start]!r} at character {err.start}; "
                            "text must be valid Unicode (decode bytes with errors='replace')") from None
