"""The reader: JSON lines {"question": str, "choices": [str, ...], "label": int}."""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from nlp._common import DataError

__all__ = ["read_multiple_choice"]

FEATURES = datasets.Features({"question": datasets.Value("string"),
                              "choices": datasets.Sequence(datasets.Value("string")),
                              "label": datasets.Value("int64")})


def read_multiple_choice(path: str | Path, *, encoding: str = "utf-8", num_choices: int | None = None,
                         require_labels: bool = False) -> datasets.Dataset:
    """One example per line; DataError naming the file and line on a bad record."""
    path = Path(path)
    rows: dict[str, list] = {"question": [], "choices": [], "label": []}
    for n, line in enumerate(path.read_text(encoding=encoding).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{n}: not a JSON object: {err}") from None
        choices = rec.get("choices") if isinstance(rec, dict) else None
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not isinstance(choices, list) \
                or not all(isinstance(c, str) for c in choices) or len(choices) < 2:
            raise DataError(f"{path}:{n}: expected {{\"question\": str, \"choices\": [str, str, ...], \"label\": int}}")
        if num_choices is not None and len(choices) != num_choices:
            raise DataError(f"{path}:{n}: {len(choices)} choices; task.num_choices is {num_choices}")
        label = rec.get("label", -1)
        if require_labels and not (isinstance(label, int) and 0 <= label < len(choices)):
            raise DataError(f"{path}:{n}: label {label!r} is not a choice index in [0, {len(choices)})")
        rows["question"].append(rec["question"])
        rows["choices"].append(choices)
        rows["label"].append(label if isinstance(label, int) else -1)
    return datasets.Dataset.from_dict(rows, features=FEATURES)
