"""Reading reranking data: a query with its relevant passage and passages that are not.

    {"query": "...", "positive": "...", "negatives": ["...", "...", ...]}

JSON lines, a JSON array, or ``{"data": [...]}`` (field names are reader options:
``data.reader: {query_column: question}``). A record is one query group: the positive and its
negatives are scored together (listwise training puts a softmax over the group; evaluation
ranks the positive among them). `negatives` may be left out where the recipe mines them
(`task.negatives: bm25`, spec.py); a bad record (a missing field, a text that is not a string, a
blank text, a negative equal to the positive) is a DataError naming the file, the record and the
field, never skipped in silence. Records whose query is blank are the one thing skipped, counted
in the read stats.

Columns of the Dataset: ``query`` (str), ``positive`` (str), ``negatives`` (list of str).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, load_json_records

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_ranking", "FEATURES", "check_group"]


def _features() -> Any:
    return datasets.Features({"query": datasets.Value("string"), "positive": datasets.Value("string"),
                              "negatives": datasets.Sequence(datasets.Value("string"))})


FEATURES = _features  # called: datasets is imported lazily


def _text(record: dict, field: str, where: str) -> str:
    value = record.get(field)
    if not isinstance(value, str):
        got = "missing" if field not in record else f"a {type(value).__name__}"
        raise DataError(f"{where}: {field!r} is {got}; expected a string")
    if not value.strip():
        raise DataError(f"{where}: {field!r} is blank")
    return value


def check_group(record: Any, where: str, *, query: str = "query", positive: str = "positive",
                negatives: str = "negatives") -> tuple[str, str, list[str]]:
    """(query, positive, negatives) of one record, checked; DataError naming `where` and the field."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected an object {{\"{query}\": str, \"{positive}\": str, \"{negatives}\": "
                        f"[str, ...]}}, got a {type(record).__name__}")
    q = _text(record, query, where)
    p = _text(record, positive, where)
    negs = record.get(negatives, [])
    if not isinstance(negs, list):
        raise DataError(f"{where}: {negatives!r} is {f'{negs!r}'[:40]}; expected a list of strings (passages that "
                        "do not answer the query; or leave it out and mine them: task.negatives: bm25)")
    for i, n in enumerate(negs):
        _text({negatives: n}, negatives, f"{where}: {negatives}[{i}]")
        if n == p:
            raise DataError(f"{where}: {negatives}[{i}] is the positive itself; a passage cannot be both")
    return q, p, list(negs)


def read_ranking(path: str | Path, *, query_column: str = "query", positive_column: str = "positive",
                 negatives_column: str = "negatives", encoding: str = "utf-8", return_stats: bool = False) -> Any:
    """One file -> a Dataset of query groups (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    stats = ReadStats(str(path))
    rows: dict[str, list] = {"query": [], "positive": [], "negatives": []}
    for where, record in load_json_records(path, stats, encoding):
        if isinstance(record, dict) and isinstance(record.get(query_column), str) \
                and not record[query_column].strip():
            stats.skipped["records with a blank query"] += 1
            continue
        q, p, negs = check_group(record, where, query=query_column, positive=positive_column,
                                 negatives=negatives_column)
        rows["query"].append(q)
        rows["positive"].append(p)
        rows["negatives"].append(negs)
        stats.kept += 1
    ds = datasets.Dataset.from_dict(rows, features=_features())
    return (ds, stats) if return_stats else ds
