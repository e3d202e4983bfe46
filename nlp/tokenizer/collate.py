"""Collators: turn a list of feature dicts (python lists of ints) into a batch of torch tensors.

Two ways to avoid computing on padding (DESIGN.md, "Performance principles"):

* `DataCollatorWithPadding` pads every sequence to the longest one *of the batch* (dynamic
  padding); combined with `LengthGroupedBatchSampler` almost nothing is padding.
* `PackingCollator` puts several short sequences in one row, with positions that restart at 0
  per sequence and a `pack_ids` tensor from which the model builds a block-diagonal attention
  mask (the model layer builds that mask itself: it must not import the tokenizer layer).

Collators are small dataclasses of plain values so that DataLoader workers can pickle them,
and they depend on nothing but torch: they work on lists of ints, never on a tokenizer object.

The `pack_ids` contract with nlp.models (sequences contiguous and left-aligned, padding at the
right end, ids 1..K per row, row-major order of sequences and of sequence labels) is written
down once, in nlp._packing, which both layers import.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Mapping, Sequence

import torch

from nlp._common import DataError, did_you_mean
from nlp._packing import cu_seqlens as pack_ids_to_cu_seqlens  # re-exported: (cu_seqlens, max_seqlen)

__all__ = [
    "DataCollatorWithPadding",
    "PackingCollator",
    "best_fit_decreasing",
    "pack_ids_to_cu_seqlens",
    "DEFAULT_DROP_KEYS",
]

# Keys padded alongside input_ids, with their pad value (input_ids uses `pad_token_id`).
_TOKEN_KEYS_PAD: dict[str, int] = {
    "attention_mask": 0,
    "token_type_ids": 0,
    "task_type_ids": 0,
    "position_ids": 0,
}
# Per-example integer keys stacked into a (B,) long tensor (extractive QA targets).
_STACKED_INT_KEYS = ("start_positions", "end_positions")

# Tokenizer by-products that are not model inputs. QA postprocessing reads offsets and
# example ids from the *features dataset*, not from batches, so by default they are dropped;
# list them in `keep_keys` to get them back in the batch as plain python lists.
DEFAULT_DROP_KEYS: tuple[str, ...] = (
    "offset_mapping",
    "special_tokens_mask",
    "overflow_to_sample_mapping",
    "length",
    "word_ids",
    "example_id",
    "sentence_index",
)

_LABEL_KINDS = ("auto", "token", "sequence")


def _as_list(value: Any) -> Any:
    """Tensors and numpy arrays (datasets with a torch/numpy format) become python lists."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def _check_features(features: Sequence[Mapping[str, Any]], who: str) -> list[dict[str, Any]]:
    """Validate the outer structure; return shallow dicts with tensors turned into lists."""
    if isinstance(features, Mapping) or not isinstance(features, Sequence) or not features:
        raise DataError(
            f"{who} expects a non-empty list of feature dicts, got {type(features).__name__}"
            + (" (empty)" if isinstance(features, Sequence) and not features else "")
            + ". Pass the list a DataLoader gives a collate_fn."
        )
    out: list[dict[str, Any]] = []
    first_keys: set[str] | None = None
    for i, feat in enumerate(features):
        if not isinstance(feat, Mapping):
            raise DataError(f"{who}: feature {i} is a {type(feat).__name__}, not a dict of lists")
        if "input_ids" not in feat:
            raise DataError(f"{who}: feature {i} has no 'input_ids' (keys: {sorted(feat)})")
        keys = set(feat)
        if first_keys is None:
            first_keys = keys
        elif keys != first_keys:
            missing = sorted(first_keys - keys)
            extra = sorted(keys - first_keys)
            detail = []
            if missing:
                detail.append(f"lacks {missing} that feature 0 has")
            if extra:
                detail.append(f"has {extra} that feature 0 lacks")
            raise DataError(
                f"{who}: feature {i} " + " and ".join(detail) + "; every feature of a batch needs "
                "the same keys (tokenize them with the same options)."
            )
        out.append({k: _as_list(v) for k, v in feat.items()})
    return out


def _check_int_seq(value: Any, i: int, key: str, who: str) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise DataError(f"{who}: feature {i} key {key!r} should be a list of ints, got {type(value).__name__}")
    return value  # element types are checked by torch.tensor (see _to_tensor)


def _to_tensor(rows: list[list[Any]], dtype: torch.dtype, key: str, who: str) -> torch.Tensor:
    try:
        return torch.tensor(rows, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as e:
        raise DataError(f"{who}: could not make a {dtype} tensor of {key!r}: {e}") from None


def _round_up(n: int, multiple: int | None) -> int:
    if not multiple:
        return n
    return -(-n // multiple) * multiple


def _sequence_labels(labels: list[Any], who: str) -> torch.Tensor:
    """int -> (B,) long; float -> (B,) float; fixed-size lists (multi-label) -> (B, L) float."""
    if all(isinstance(x, (list, tuple)) for x in labels):
        sizes = {len(x) for x in labels}
        if len(sizes) != 1:
            i = next(j for j, x in enumerate(labels) if len(x) != len(labels[0]))
            raise DataError(
                f"{who}: multi-label 'labels' must all have the same size; feature 0 has "
                f"{len(labels[0])}, feature {i} has {len(labels[i])}"
            )
        return _to_tensor(labels, torch.float32, "labels", who)
    for i, x in enumerate(labels):
        if not _is_number(x):
            raise DataError(
                f"{who}: feature {i} 'labels' is {type(x).__name__}; sequence labels are ints "
                "(classes), floats (regression) or same-size lists (multi-label), one kind per batch"
            )
    if all(isinstance(x, numbers.Integral) for x in labels):
        return torch.tensor([int(x) for x in labels], dtype=torch.long)
    return torch.tensor([float(x) for x in labels], dtype=torch.float32)


def _is_token_labels(feats: list[dict[str, Any]], kind: str, who: str) -> bool:
    """Decide whether `labels` is per token (padded -100) or per sequence (stacked).

    "auto": lists of ints each as long as its input_ids are token labels; lists containing a
    float are multi-label. Use label_kind="sequence" when multi-label lists happen to be as
    long as every input_ids of the batch.
    """
    labels = [f["labels"] for f in feats]
    if kind == "sequence":
        return False
    is_list = [isinstance(x, (list, tuple)) for x in labels]
    if kind == "token":
        for i, (f, lst) in enumerate(zip(feats, is_list)):
            if not lst or len(f["labels"]) != len(f["input_ids"]):
                n = len(f["labels"]) if lst else type(f["labels"]).__name__
                raise DataError(
                    f"{who}: feature {i} token 'labels' ({n}) do not match its "
                    f"{len(f['input_ids'])} input_ids (label_kind='token')"
                )
        return True
    if not any(is_list):
        return False
    if not all(is_list):
        i = is_list.index(False)
        raise DataError(f"{who}: feature {i} 'labels' is a scalar but feature {is_list.index(True)}'s is a list")
    if any(isinstance(v, float) for x in labels for v in x):
        return False  # multi-label targets (token labels are class ids)
    if all(len(f["labels"]) == len(f["input_ids"]) for f in feats):
        return True
    if len({len(x) for x in labels}) == 1:
        return False  # same-size int lists: multi-label
    i = next(j for j, f in enumerate(feats) if len(f["labels"]) != len(f["input_ids"]))
    raise DataError(
        f"{who}: feature {i} 'labels' has {len(feats[i]['labels'])} items but 'input_ids' has "
        f"{len(feats[i]['input_ids'])}; token labels need one label per token (use -100 for "
        "tokens without a label)"
    )


def _split_keys(
    feats: list[dict[str, Any]], handled: Sequence[str], keep: Sequence[str] | None, drop: Sequence[str], who: str
) -> tuple[list[str], list[str]]:
    """Return (keys to process, keys to pass through); raise on any key we do not know.
    keep=None: the collator cannot pass keys through (packing reorders sequences)."""
    process, passthrough = [], []
    for key in feats[0]:
        if keep and key in keep:
            passthrough.append(key)
        elif key in handled:
            process.append(key)
        elif key in drop:
            continue
        else:
            fix = "add it to drop_keys=(...) to drop it"
            if keep is not None:
                fix = "add it to keep_keys=(...) to pass it through as a python list, or " + fix
            raise DataError(
                f"{who}: unknown feature key {key!r}.{did_you_mean(key, handled)} Known keys: "
                f"{sorted(handled)}; {fix}."
            )
    return process, passthrough


@dataclasses.dataclass
class DataCollatorWithPadding:
    """Dynamic padding: pad every sequence to the longest of the batch.

    Keys: `input_ids` (padded with `pad_token_id`); `attention_mask` (created as 1 on real
    tokens when absent), `token_type_ids`, `task_type_ids`, `position_ids` (padded with 0);
    `labels` per token (padded with `label_pad_id`) or per sequence (int -> long (B,), float ->
    float (B,), same-size lists for multi-label -> float (B, L)); `start_positions` /
    `end_positions` stacked to long (B,). Keys in `drop_keys` are dropped (default: tokenizer
    by-products such as offset_mapping that are no model input); keys in `keep_keys` come back
    unchanged as python lists; any other key is an error, so a typo ('label') or a forgotten
    column never reaches the model silently.
    """

    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None  # e.g. 8 for tensor cores; padded length rounds up
    label_pad_id: int = -100  # ignored by torch's cross-entropy
    padding_side: str = "right"  # "left" for decoder-style generation
    max_length: int | None = None  # fixed shape: pad every batch to this (longer is an error)
    label_kind: str = "auto"  # "token" | "sequence" to resolve the rare ambiguous case
    keep_keys: tuple[str, ...] = ()
    drop_keys: tuple[str, ...] = DEFAULT_DROP_KEYS

    def __post_init__(self) -> None:
        if self.padding_side not in ("right", "left"):
            raise DataError(f"padding_side={self.padding_side!r}; valid: 'right', 'left'")
        if self.pad_to_multiple_of is not None and self.pad_to_multiple_of < 1:
            raise DataError(f"pad_to_multiple_of={self.pad_to_multiple_of}; use a positive int or None")
        if self.max_length is not None and self.max_length < 1:
            raise DataError(f"max_length={self.max_length}; use a positive int or None")
        if self.label_kind not in _LABEL_KINDS:
            raise DataError(f"label_kind={self.label_kind!r}; valid: {_LABEL_KINDS}")
        self.keep_keys = tuple(self.keep_keys)
        self.drop_keys = tuple(self.drop_keys)

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        who = type(self).__name__
        feats = _check_features(features, who)
        handled = ["input_ids", *_TOKEN_KEYS_PAD, "labels", *_STACKED_INT_KEYS]
        process, passthrough = _split_keys(feats, handled, self.keep_keys, self.drop_keys, who)

        ids = [_check_int_seq(f["input_ids"], i, "input_ids", who) for i, f in enumerate(feats)]
        lengths = [len(x) for x in ids]
        longest = max(lengths)
        if self.max_length is not None:
            if longest > self.max_length:
                i = lengths.index(longest)
                raise DataError(
                    f"{who}: feature {i} has {longest} input_ids, more than max_length="
                    f"{self.max_length}; truncate when tokenizing (truncation=True, max_length=...)"
                )
            longest = self.max_length
        target = _round_up(longest, self.pad_to_multiple_of)
        left = self.padding_side == "left"

        def pad(rows: list[list[Any]], value: Any) -> list[list[Any]]:
            if left:
                return [[value] * (target - len(r)) + list(r) for r in rows]
            return [list(r) + [value] * (target - len(r)) for r in rows]

        batch: dict[str, Any] = {"input_ids": _to_tensor(pad(ids, self.pad_token_id), torch.long, "input_ids", who)}
        for key, value in _TOKEN_KEYS_PAD.items():
            if key not in process:
                continue
            rows = [_check_int_seq(f[key], i, key, who) for i, f in enumerate(feats)]
            for i, (r, n) in enumerate(zip(rows, lengths)):
                if len(r) != n:
                    raise DataError(f"{who}: feature {i} {key!r} has {len(r)} items but 'input_ids' has {n}")
            batch[key] = _to_tensor(pad(rows, value), torch.long, key, who)
        if "attention_mask" not in batch:
            batch["attention_mask"] = _to_tensor(pad([[1] * n for n in lengths], 0), torch.long, "attention_mask", who)
        if "labels" in process:
            if _is_token_labels(feats, self.label_kind, who):
                rows = [f["labels"] for f in feats]
                batch["labels"] = _to_tensor(pad(rows, self.label_pad_id), torch.long, "labels", who)
            else:
                batch["labels"] = _sequence_labels([f["labels"] for f in feats], who)
        for key in _STACKED_INT_KEYS:
            if key in process:
                batch[key] = _stack_ints(feats, key, who)
        for key in passthrough:
            batch[key] = [f[key] for f in feats]
        return batch


def _stack_ints(feats: list[dict[str, Any]], key: str, who: str) -> torch.Tensor:
    values = [f[key] for f in feats]
    for i, v in enumerate(values):
        if not isinstance(v, numbers.Integral):
            raise DataError(f"{who}: feature {i} {key!r} should be one int, got {v!r}")
    return torch.tensor([int(v) for v in values], dtype=torch.long)


def _next_fit_rows(lengths: Sequence[int], max_length: int) -> list[list[int]]:
    """Pack in the given order: start a new row when the next sequence does not fit.

    Keeping the order keeps the row-major order of sequences equal to the input order (so
    sequence labels line up without bookkeeping), and when the input is a concatenation of
    bins that each fit (as `PackedBatchSampler` yields), it never uses more rows than bins.
    """
    rows: list[list[int]] = []
    used = max_length + 1  # forces a first row
    for i, n in enumerate(lengths):
        if used + n > max_length:
            rows.append([i])
            used = n
        else:
            rows[-1].append(i)
            used += n
    return rows


def best_fit_decreasing(
    lengths: Sequence[int], max_length: int, order: Sequence[int] | None = None
) -> list[list[int]]:
    """Bin packing: longest first, each into the fullest bin where it fits. O(n * max_length).

    Bins are indexed by remaining capacity, so the search is a scan of at most max_length
    buckets, not of every open bin. `order` breaks ties between equal lengths (a shuffled
    order gives different bins each epoch). Bins list their items longest first.
    """
    idx = list(range(len(lengths))) if order is None else list(order)
    idx.sort(key=lambda i: -lengths[i])  # stable: ties keep `order`
    by_free: list[list[int]] = [[] for _ in range(max_length + 1)]  # free capacity -> bin ids
    bins: list[list[int]] = []
    free: list[int] = []
    for i in idx:
        n = lengths[i]
        for c in range(n, max_length + 1):
            if by_free[c]:
                b = by_free[c].pop()
                break
        else:
            b = len(bins)
            bins.append([])
            free.append(max_length)
        bins[b].append(i)
        free[b] -= n
        by_free[free[b]].append(b)
    return bins


_PACK_STRATEGIES = ("next_fit", "best_fit_decreasing")


@dataclasses.dataclass
class PackingCollator:
    """Pack several sequences into each row of length <= `max_length`.

    Output keys: `input_ids` (pad_token_id on padding), `token_type_ids`, `position_ids`
    (restart at 0 per sequence, or the features' own position_ids when given), `attention_mask`
    (1 on real tokens), `pack_ids` (the contract: nlp._packing), `task_type_ids`
    if the features have them, and `labels`: per-token labels as (B, T) padded with
    `label_pad_id`; sequence labels as a 1-D (N,) tensor (or (N, L) multi-label) in row-major
    order — row 0's sequences first, left to right.

    strategy="next_fit" (default) packs in input order, so sequence labels come out in the
    order of the features; use it with `PackedBatchSampler`, which plans tight bins per epoch.
    strategy="best_fit_decreasing" packs an unplanned (random) batch tighter; the row-major
    order of sequences then differs from the input order (labels follow the packed order).

    Sequences longer than max_length are an error unless `truncate=True` (keeps the first
    max_length tokens, so a trailing [SEP] is lost). Extractive QA targets are not packable:
    their positions and the per-row span logits would mix sequences; use
    DataCollatorWithPadding.
    """

    max_length: int
    pad_token_id: int = 0
    label_pad_id: int = -100
    pad_to_multiple_of: int | None = None
    pad_to_max_length: bool = False  # True: every batch is (B, max_length), a fixed shape
    strategy: str = "next_fit"
    truncate: bool = False
    label_kind: str = "auto"
    drop_keys: tuple[str, ...] = DEFAULT_DROP_KEYS

    def __post_init__(self) -> None:
        if not isinstance(self.max_length, int) or self.max_length < 1:
            raise DataError(f"max_length={self.max_length!r}; use a positive int")
        if self.strategy not in _PACK_STRATEGIES:
            hint = did_you_mean(self.strategy, _PACK_STRATEGIES)
            raise DataError(f"strategy={self.strategy!r}.{hint} Valid: {_PACK_STRATEGIES}")
        if self.pad_to_multiple_of is not None and self.pad_to_multiple_of < 1:
            raise DataError(f"pad_to_multiple_of={self.pad_to_multiple_of}; use a positive int or None")
        if self.label_kind not in _LABEL_KINDS:
            raise DataError(f"label_kind={self.label_kind!r}; valid: {_LABEL_KINDS}")
        self.drop_keys = tuple(self.drop_keys)

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        who = type(self).__name__
        feats = _check_features(features, who)
        handled = ["input_ids", *_TOKEN_KEYS_PAD, "labels"]
        for key in _STACKED_INT_KEYS:
            if key in feats[0]:
                raise DataError(
                    f"{who}: {key!r} (extractive QA) cannot be packed: span logits over a packed "
                    "row mix sequences. Use DataCollatorWithPadding for QA."
                )
        process, _ = _split_keys(feats, handled, None, self.drop_keys, who)

        seq_keys = [k for k in ("input_ids", *_TOKEN_KEYS_PAD) if k in process]
        token_labels = "labels" in process and _is_token_labels(feats, self.label_kind, who)
        if token_labels:
            seq_keys.append("labels")
        lengths = []
        for i, f in enumerate(feats):
            n = len(_check_int_seq(f["input_ids"], i, "input_ids", who))
            for key in seq_keys:
                r = _check_int_seq(f[key], i, key, who)
                if len(r) != n:
                    raise DataError(f"{who}: feature {i} {key!r} has {len(r)} items but 'input_ids' has {n}")
            if n == 0:
                raise DataError(f"{who}: feature {i} has no input_ids; an empty sequence cannot be packed")
            if "attention_mask" in f and 0 in f["attention_mask"]:
                raise DataError(
                    f"{who}: feature {i} is already padded (attention_mask has 0s); pack unpadded "
                    "features (tokenize with padding=False)"
                )
            if n > self.max_length:
                if not self.truncate:
                    raise DataError(
                        f"{who}: feature {i} has {n} tokens, more than max_length={self.max_length}; "
                        "truncate when tokenizing, or pass truncate=True to keep the first max_length"
                    )
                n = self.max_length
            lengths.append(n)

        if self.strategy == "next_fit":
            rows = _next_fit_rows(lengths, self.max_length)
        else:
            rows = best_fit_decreasing(lengths, self.max_length)
        used = [sum(lengths[i] for i in r) for r in rows]
        T = self.max_length if self.pad_to_max_length else max(used)
        T = _round_up(T, self.pad_to_multiple_of)
        B = len(rows)

        pad_values = {"input_ids": self.pad_token_id, "labels": self.label_pad_id, **_TOKEN_KEYS_PAD}
        out_keys = ["input_ids", "token_type_ids", "position_ids", "attention_mask", "pack_ids"]
        out_keys += [k for k in ("task_type_ids",) if k in process]
        if token_labels:
            out_keys.append("labels")
        flat: dict[str, list[int]] = {k: [] for k in out_keys}
        for r, n_used in zip(rows, used):
            for k_in_row, i in enumerate(r, start=1):
                f, n = feats[i], lengths[i]
                flat["input_ids"].extend(f["input_ids"][:n])
                for key in ("token_type_ids", "task_type_ids", "labels"):
                    if key in flat:
                        flat[key].extend(f[key][:n] if key in f else [0] * n)
                flat["position_ids"].extend(f["position_ids"][:n] if "position_ids" in f else range(n))
                flat["attention_mask"].extend([1] * n)
                flat["pack_ids"].extend([k_in_row] * n)
            for key in out_keys:
                value = 0 if key == "pack_ids" else pad_values[key]
                flat[key].extend([value] * (T - n_used))
        batch = {k: _to_tensor(v, torch.long, k, who).view(B, T) for k, v in flat.items()}
        if "labels" in process and not token_labels:
            order = [i for r in rows for i in r]
            batch["labels"] = _sequence_labels([feats[i]["labels"] for i in order], who)
        return batch
