"""Classification features: text (+ text_pair) + label -> input_ids, token_type_ids, labels.

Use with `datasets.Dataset.map(..., batched=True)`::

    fn = functools.partial(preprocess_classification, tokenizer=tok, max_length=128,
                           label2id=model.config.label2id)
    feats = ds.map(fn, batched=True, remove_columns=ds.column_names)

No padding here: `DataCollatorWithPadding` (or `PackingCollator`) pads per batch. Labels may be
class ids, label names (mapped through `label2id`, usually `config.label2id`), lists of names
or ids (multi-label: a multi-hot float vector of length `num_labels`) or floats (regression).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from nlp._common import DataError, did_you_mean
from nlp.tokenizer import Tokenizer

__all__ = ["encode_label", "preprocess_classification"]


def encode_label(label: Any, label2id: Mapping[str, int] | None, num_labels: int | None, where: str) -> Any:
    """One label as the model wants it: an int id, a float, or a multi-hot list of floats."""
    def one(x: Any) -> int:
        if isinstance(x, str):
            if label2id is None:
                raise DataError(f"{where}: label {x!r} is a name but no label2id was given; "
                                "pass label2id=model.config.label2id")
            if x not in label2id:
                raise DataError(f"{where}: label {x!r} is not in the label set "
                                f"{sorted(label2id)}.{did_you_mean(x, label2id)}")
            return int(label2id[x])
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise DataError(f"{where}: multi-label entries must be names or ids, got {x!r}")
        n = num_labels if num_labels is not None else (len(label2id) if label2id else None)
        if n is not None and not 0 <= int(x) < n:
            raise DataError(f"{where}: label id {x} is outside [0, {n})")
        return int(x)

    if isinstance(label, (list, tuple)):  # multi-label -> multi-hot
        n = num_labels if num_labels is not None else (len(label2id) if label2id else None)
        if n is None:
            raise DataError(f"{where}: multi-label targets need num_labels or label2id")
        vec = [0.0] * n
        for x in label:
            vec[one(x)] = 1.0
        return vec
    if isinstance(label, str) or (isinstance(label, numbers.Integral) and not isinstance(label, bool)):
        return one(label)
    if isinstance(label, numbers.Real) and not isinstance(label, bool):
        return float(label)  # regression target
    raise DataError(f"{where}: cannot use label {label!r} ({type(label).__name__}); give a class "
                    "name or id, a list of them (multi-label), or a float (regression)")


def preprocess_classification(
    examples: Mapping[str, Sequence[Any]],
    tokenizer: Tokenizer,
    *,
    max_length: int = 128,
    text_column: str = "text",
    pair_column: str = "text_pair",
    label_column: str = "label",
    label2id: Mapping[str, int] | None = None,
    num_labels: int | None = None,
) -> dict[str, list]:
    """Tokenize a batch of examples (a dict of columns); labels go to `labels`.

    Texts longer than `max_length` tokens are truncated (longest_first for pairs), as the
    model sees one window per example. An empty text is an error naming its row.
    """
    if text_column not in examples:
        raise DataError(f"no {text_column!r} column; columns are {sorted(examples)}."
                        f"{did_you_mean(text_column, examples)}")
    texts = list(examples[text_column])
    pairs = list(examples[pair_column]) if pair_column in examples else None
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise DataError(f"row {i} of the batch has an empty or non-text {text_column!r}: {t!r}")
    if pairs is not None:
        for i, t in enumerate(pairs):
            if not isinstance(t, str) or not t.strip():
                raise DataError(f"row {i} of the batch has an empty or non-text {pair_column!r}: {t!r}")
    enc = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    out: dict[str, list] = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}
    if label_column in examples:
        out["labels"] = [encode_label(y, label2id, num_labels, f"row {i}")
                         for i, y in enumerate(examples[label_column])]
    return out
