"""Training records of information extraction, read from annotation tools' exports.

A record is one (text, prompt) question and its answers: columns `id`, `text`, `prompt`, `type`
(the entity type or role the prompt asks for: per-type scores group by it) and `result_list`
({"text", "start", "end"} lists: character offsets into the text, end exclusive; empty for a
negative prompt). Three file formats, told apart by their content (`format="auto"`) or named:

- `uie`: the JSON lines PaddleNLP's `doccano.py` writes, `{"content", "result_list": [{"text",
  "start", "end"}], "prompt"}`; a prompt `"<span>的<role>"` whose span (of two characters or
  more) is in the text has the role as its type, any other prompt is its own type.
- `doccano`: doccano's JSONL export. Relation projects: `{"text", "entities": [{"id", "label",
  "start_offset", "end_offset"}], "relations": [{"id", "from_id", "to_id", "type"}]}`; sequence
  labeling projects: `{"text", "label": [[start, end, "TYPE"], ...]}`.
- `label-studio`: Label Studio's JSON export, a list of tasks `{"data": {"text"}, "annotations":
  [{"result": [{"id", "type": "labels", "value": {"start", "end", "text", "labels": [TYPE]}},
  {"type": "relation", "from_id", "to_id", "labels": [ROLE]}]}]}` (the first annotation not
  cancelled is read).

Annotations become records as UIE's `doccano.py` makes them: per text, one record per entity
type present (every span of that type), one per (subject span, relation type) with the prompt
`"<subject>的<relation>"` (its objects), and negative records (no answer) sampled at
`negative_ratio` times the positives: entity types of the file absent from the text, and
relation types of the file a subject of the text does not have. A record whose offsets do not
hold its text, a relation naming an entity that does not exist, a label that is not a string:
DataError naming the file, the record and the field.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, load_json_records
from nlp.tasks.extraction.schema import chained_prompt

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_extraction", "extraction_features", "Annotated", "records_from_annotations", "FORMATS",
           "type_of_prompt", "DEFAULT_NEGATIVE_RATIO"]

FORMATS = ("auto", "uie", "doccano", "label-studio")
DEFAULT_NEGATIVE_RATIO = 5  # UIE's doccano.py default: negatives per positive prompt of a text


@functools.cache
def extraction_features() -> datasets.Features:
    return datasets.Features({
        "id": datasets.Value("string"),
        "text": datasets.Value("string"),
        "prompt": datasets.Value("string"),
        "type": datasets.Value("string"),
        "result_list": datasets.List({"text": datasets.Value("string"), "start": datasets.Value("int32"),
                                      "end": datasets.Value("int32")}),
    })


@dataclass
class Annotated:
    """One annotated text: entities (id -> (type, start, end)) and relations (subject id, type,
    object id), read from an export."""

    where: str
    text: str
    entities: dict[Any, tuple[str, int, int]] = field(default_factory=dict)
    relations: list[tuple[Any, str, Any]] = field(default_factory=list)


def type_of_prompt(prompt: str, text: str) -> str:
    """The type a prompt asks for: the role of a chained prompt "<span>的<role>" whose span (two
    characters or more: "目的地" is a type, not the 地 of 目) is in the text, else the prompt itself."""
    head, sep, role = prompt.rpartition("的")
    return role if sep and len(head) >= 2 and role and head in text else prompt


def _span(where: str, text: str, start: Any, end: Any, fields: tuple[str, str]) -> tuple[int, int]:
    for name, value in zip(fields, (start, end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"{where}: {name} is {value!r}; expected a character offset (an integer)")
    if not 0 <= start < end <= len(text):
        raise DataError(f"{where}: {fields[0]}={start}, {fields[1]}={end} is not a span of the text's {len(text)} "
                        "characters (0 <= start < end <= length, end exclusive)")
    return start, end


def _label(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where} is {value!r}; expected a non-empty label (a string)")
    return value.strip()


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where} is {value!r}; expected the annotated text (a non-empty string)")
    return value


def _doccano(where: str, rec: Any) -> Annotated:
    if not isinstance(rec, dict):
        raise DataError(f"{where}: expected a doccano record (an object with 'text'), got {type(rec).__name__}")
    text = _text(f"{where}: field 'text'", rec.get("text", rec.get("data")))
    out = Annotated(where, text)
    if "entities" in rec:
        for k, ent in enumerate(rec.get("entities") or []):
            at = f"{where}: entities[{k}]"
            if not isinstance(ent, dict) or "id" not in ent:
                raise DataError(f"{at}: expected {{\"id\", \"label\", \"start_offset\", \"end_offset\"}}, got {ent!r:.60}")
            if ent["id"] in out.entities:
                raise DataError(f"{at}.id {ent['id']!r} is used twice in this record")
            s, e = _span(at, text, ent.get("start_offset"), ent.get("end_offset"), ("start_offset", "end_offset"))
            out.entities[ent["id"]] = (_label(f"{at}.label", ent.get("label")), s, e)
        for k, rel in enumerate(rec.get("relations") or []):
            at = f"{where}: relations[{k}]"
            if not isinstance(rel, dict):
                raise DataError(f"{at}: expected {{\"from_id\", \"to_id\", \"type\"}}, got {rel!r:.60}")
            for end in ("from_id", "to_id"):
                if rel.get(end) not in out.entities:
                    raise DataError(f"{at}.{end} {rel.get(end)!r} names no entity of this record "
                                    f"(its entity ids: {sorted(map(str, out.entities))})")
            out.relations.append((rel["from_id"], _label(f"{at}.type", rel.get("type")), rel["to_id"]))
        return out
    labels = rec.get("label", rec.get("labels"))
    if labels is None:
        raise DataError(f"{where}: no 'entities' (relation project) or 'label' (sequence labeling) field; "
                        "export the project as JSONL from doccano")
    if not isinstance(labels, list):
        raise DataError(f"{where}: field 'label' must be a list of [start, end, label], got {labels!r:.60}")
    for k, item in enumerate(labels):
        at = f"{where}: label[{k}]"
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise DataError(f"{at}: expected [start, end, label], got {item!r:.60}")
        s, e = _span(at, text, item[0], item[1], ("start", "end"))
        out.entities[k] = (_label(f"{at} label", item[2]), s, e)
    return out


def _label_studio(where: str, task: Any, text_key: str) -> Annotated | None:
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        raise DataError(f"{where}: expected a Label Studio task (an object with 'data' and 'annotations')")
    text = _text(f"{where}: field data.{text_key}", task["data"].get(text_key))
    annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict) and not a.get("was_cancelled")]
    if not annotations:
        return None  # not annotated (yet): nothing to learn from it
    out = Annotated(where, text)
    results = annotations[0].get("result")
    if not isinstance(results, list):
        raise DataError(f"{where}: annotations[0].result must be a list, got {results!r:.60}")
    for k, res in enumerate(results):
        at = f"{where}: annotations[0].result[{k}]"
        if not isinstance(res, dict):
            raise DataError(f"{at}: expected an object, got {res!r:.60}")
        if res.get("type") == "labels":
            value = res.get("value")
            if not isinstance(value, dict):
                raise DataError(f"{at}.value must be an object with start, end, labels")
            s, e = _span(f"{at}.value", text, value.get("start"), value.get("end"), ("start", "end"))
            labels = value.get("labels")
            if not isinstance(labels, list) or len(labels) != 1:
                raise DataError(f"{at}.value.labels must be a list of one label, got {labels!r:.60}")
            if "id" not in res:
                raise DataError(f"{at}: a labelled span without its 'id' (relations point at it)")
            out.entities[res["id"]] = (_label(f"{at}.value.labels[0]", labels[0]), s, e)
    for k, res in enumerate(results):
        at = f"{where}: annotations[0].result[{k}]"
        if res.get("type") == "relation":
            for end in ("from_id", "to_id"):
                if res.get(end) not in out.entities:
                    raise DataError(f"{at}.{end} {res.get(end)!r} names no labelled span of this task")
            labels = res.get("labels")
            if not isinstance(labels, list) or not labels:
                raise DataError(f"{at}.labels must name the relation (a list of one label), got {labels!r:.60}")
            subject, obj = res["from_id"], res["to_id"]
            if res.get("direction") == "left":
                subject, obj = obj, subject
            for label in labels:
                out.relations.append((subject, _label(f"{at}.labels", label), obj))
    return out


def _result(text: str, spans: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"text": text[s:e], "start": s, "end": e} for s, e in sorted(set(spans))]


def records_from_annotations(items: list[Annotated], *, negative_ratio: int = DEFAULT_NEGATIVE_RATIO,
                             seed: int = 1000) -> list[dict[str, Any]]:
    """UIE records of annotated texts: positives per entity type and per (subject, relation),
    negatives sampled at `negative_ratio` per positive from the types of all `items`."""
    entity_types = sorted({t for a in items for t, _, _ in a.entities.values()})
    relation_types = sorted({r for a in items for _, r, _ in a.relations})
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for n, a in enumerate(items):
        by_type: dict[str, list[tuple[int, int]]] = {}
        for t, s, e in a.entities.values():
            by_type.setdefault(t, []).append((s, e))
        positives = [(t, t, spans) for t, spans in by_type.items()]
        objects: dict[tuple[Any, str], list[tuple[int, int]]] = {}
        for subj, rel, obj in a.relations:
            objects.setdefault((subj, rel), []).append(a.entities[obj][1:])
        for (subj, rel), spans in objects.items():
            _, s, e = a.entities[subj]
            positives.append((chained_prompt(a.text[s:e], rel), rel, spans))
        negatives = [(t, t) for t in entity_types if t not in by_type]
        subjects = dict.fromkeys(a.text[s:e] for subj, _, _ in a.relations for _, s, e in [a.entities[subj]])
        have = {(a.text[a.entities[subj][1]:a.entities[subj][2]], rel) for subj, rel, _ in a.relations}
        negatives += [(chained_prompt(x, r), r) for x in subjects for r in relation_types if (x, r) not in have]
        rng.shuffle(negatives)
        negatives = negatives[:negative_ratio * max(1, len(positives))]
        for prompt, type_, spans in positives:
            rows.append({"text": a.text, "prompt": prompt, "type": type_, "result_list": _result(a.text, spans)})
        for prompt, type_ in negatives:
            rows.append({"text": a.text, "prompt": prompt, "type": type_, "result_list": []})
    for i, r in enumerate(rows):
        r["id"] = str(i)
    return rows


def _uie_record(where: str, rec: Any) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise DataError(f"{where}: expected a UIE record {{\"content\", \"result_list\", \"prompt\"}}")
    text = _text(f"{where}: field 'content'", rec.get("content"))
    prompt = _label(f"{where}: field 'prompt'", rec.get("prompt"))
    results = rec.get("result_list")
    if not isinstance(results, list):
        raise DataError(f"{where}: field 'result_list' must be a list (empty for a negative prompt), got {results!r:.60}")
    spans = []
    for k, res in enumerate(results):
        at = f"{where}: result_list[{k}]"
        if not isinstance(res, dict):
            raise DataError(f"{at}: expected {{\"text\", \"start\", \"end\"}}, got {res!r:.60}")
        s, e = _span(at, text, res.get("start"), res.get("end"), ("start", "end"))
        if "text" in res and res["text"] != text[s:e]:
            raise DataError(f"{at}: text {res['text']!r} is not the text at start={s}, end={e} ({text[s:e]!r})")
        spans.append((s, e))
    return {"text": text, "prompt": prompt, "type": type_of_prompt(prompt, text), "result_list": _result(text, spans)}


def _detect(first: Any, where: str) -> str:
    if isinstance(first, dict):
        if "content" in first and "prompt" in first:
            return "uie"
        if "data" in first and ("annotations" in first or "predictions" in first):
            return "label-studio"
        if "text" in first and ("entities" in first or "label" in first or "labels" in first):
            return "doccano"
    raise DataError(f"{where}: cannot tell the format of this record ({str(first)[:60]}); it is none of UIE's "
                    "{content, result_list, prompt}, doccano's {text, entities, relations} / {text, label} or "
                    "Label Studio's {data, annotations}. Name it: data.reader.format")


def read_extraction(path: str | os.PathLike, *, format: str = "auto", negative_ratio: int = DEFAULT_NEGATIVE_RATIO,
                    seed: int = 1000, text_key: str = "text", encoding: str = "utf-8",
                    return_stats: bool = False) -> Any:
    """A file of one of `FORMATS` -> a Dataset of UIE records (module docstring)."""
    if format not in FORMATS:
        raise DataError(f"unknown format {format!r}; valid: {', '.join(FORMATS)}")
    if isinstance(negative_ratio, bool) or not isinstance(negative_ratio, int) or negative_ratio < 0:
        raise DataError(f"negative_ratio must be an int >= 0, got {negative_ratio!r}")
    path = Path(path)
    stats = ReadStats(str(path))
    records = list(load_json_records(path, stats, encoding))
    kind = format if format != "auto" or not records else _detect(records[0][1], records[0][0])
    if kind == "uie":
        rows = [_uie_record(where, rec) for where, rec in records]
        for i, r in enumerate(rows):
            r["id"] = str(i)
    else:
        items = []
        for where, rec in records:
            a = _doccano(where, rec) if kind == "doccano" else _label_studio(where, rec, text_key)
            if a is None:
                stats.skip("tasks without an annotation")
                continue
            items.append(a)
        rows = records_from_annotations(items, negative_ratio=negative_ratio, seed=_seed(seed, path))
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in extraction_features()},
                                    features=extraction_features())
    stats.kept = len(ds)
    stats.log()
    return (ds, stats) if return_stats else ds


def _seed(seed: int, path: Path) -> int:
    # the same file gives the same negatives whatever else is read in the process
    return seed + int(hashlib.md5(path.name.encode("utf-8")).hexdigest()[:8], 16)
