"""Read SQuAD-format QA files (CMRC2018, DRCD, DuReader-robust, SQuAD 2.0) into a Dataset.

Columns follow Hugging Face's ``squad``: ``id``, ``title``, ``context``, ``question``,
``answers`` (``{"text": [...], "answer_start": [...]}``) and ``is_impossible``. Contexts are
kept byte for byte (not stripped: stripping would shift every ``answer_start``). Every answer
is checked: ``context[answer_start:answer_start + len(text)] == text``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, load_json_records

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_squad", "qa_features"]


@functools.cache
def qa_features() -> datasets.Features:
    """The columns of a QA dataset (built on first use: `datasets` comes with the train extra)."""
    return datasets.Features({
        "id": datasets.Value("string"),
        "title": datasets.Value("string"),
        "context": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answers": datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}),
        "is_impossible": datasets.Value("bool"),
    })
_ON_BAD = ("error", "skip", "relocate")


def _check_answer(context: str, text: str, start, where: str, on_bad: str, stats: ReadStats) -> int | None:
    """The verified start of `text`, relocated or None (skip) per `on_bad`."""
    is_offset = isinstance(start, int) and not isinstance(start, bool)
    if is_offset and start < 0:
        # context[-5:-3] may well equal the text: Python's negative slicing would accept it
        raise DataError(f"{where}: answer_start={start} is negative; it is the character offset "
                        f"of the answer {text!r} in the context (0 for its first character)")
    if is_offset and context[start : start + len(text)] == text:
        return start
    if on_bad == "relocate" and text and text in context:
        # the occurrence nearest the given start: annotators' offsets are usually close
        occurrences, pos = [], context.find(text)
        while pos != -1:
            occurrences.append(pos)
            pos = context.find(text, pos + 1)
        near = start if isinstance(start, int) else 0
        stats.repair("answers relocated to the text's nearest occurrence")
        return min(occurrences, key=lambda p: abs(p - near))
    if on_bad == "skip":
        stats.skip("questions with an answer not found at answer_start")
        return None
    found = context[start : start + len(text)] if isinstance(start, int) else "?"
    raise DataError(f"{where}: answer {text!r} not found at answer_start={start!r} "
                    f"(the context has {found!r} there). Pass on_bad_answer='relocate' to search "
                    "the context for it, or 'skip'.")


def read_squad(
    path: str | os.PathLike, *, on_bad_answer: str = "error", encoding: str = "utf-8",
    return_stats: bool = False,
) -> datasets.Dataset | tuple[datasets.Dataset, ReadStats]:
    """Read ``{"data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]}``.

    Args:
        on_bad_answer: an answer whose text is not at its ``answer_start``: "error" (names the
            question id), "skip" the question (counted), or "relocate" to the occurrence of
            the text nearest the given start (counted; an error if the text is absent).
            A negative ``answer_start`` is always an error naming the question id.
        encoding: the file's text encoding, e.g. "gbk" (default UTF-8).
    Questions with ``is_impossible: true`` keep an empty answer list. A question without
    answers and not marked impossible (a test split) keeps an empty list too.
    """
    if on_bad_answer not in _ON_BAD:
        raise DataError(f"Unknown on_bad_answer {on_bad_answer!r}; valid: {', '.join(_ON_BAD)}")
    path = Path(path)
    stats = ReadStats(str(path))
    rows: list[dict] = []
    seen: set[str] = set()
    for where, article in load_json_records(path, stats, encoding):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise DataError(f"{where}: expected an article with 'paragraphs' (SQuAD format)")
        title = str(article.get("title", ""))
        for p_i, para in enumerate(article["paragraphs"]):
            context = para.get("context")
            if not isinstance(context, str) or not context.strip():
                raise DataError(f"{where} paragraph {p_i}: empty or missing 'context'")
            for qa in para.get("qas", []):
                qid = str(qa.get("id", "")).strip()
                q_where = f"{path}: question id {qid!r}" if qid else f"{where} paragraph {p_i}"
                if not qid:
                    raise DataError(f"{q_where}: question without an 'id'")
                if qid in seen:
                    raise DataError(f"{q_where}: duplicate question id")
                seen.add(qid)
                question = str(qa.get("question", "")).strip()
                if not question:
                    raise DataError(f"{q_where}: empty question")
                impossible = bool(qa.get("is_impossible", False))
                texts, starts, ok = [], [], True
                for ans in [] if impossible else qa.get("answers", []):
                    text = ans.get("text")
                    if not isinstance(text, str) or not text:
                        raise DataError(f"{q_where}: empty answer text")
                    start = _check_answer(context, text, ans.get("answer_start"), q_where, on_bad_answer, stats)
                    if start is None:
                        ok = False
                        break
                    texts.append(text)
                    starts.append(start)
                if ok:
                    rows.append({"id": qid, "title": title, "context": context, "question": question,
                                 "answers": {"text": texts, "answer_start": starts},
                                 "is_impossible": impossible})
    # from_dict, not from_list: an empty list would lose the columns
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in qa_features()}, features=qa_features())
    stats.kept = len(ds)
    stats.log()
    return (ds, stats) if return_stats else ds
