"""A file of inputs through a pipeline: what `nlp predict` does, for any backend.

Input: a .txt file (one text a line) or .jsonl ({"text": ...[, "text_pair": ...]}; QA:
{"question": ..., "context": ...}). Output: one result per input line, in order, blank lines
included (an empty result: no labels, no entities, or a null answer), and each text exactly as
the line holds it (leading whitespace kept), so entity offsets index the line as given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError

__all__ = ["read_inputs", "predict_rows", "RESULT_KEYS"]

# where each task's result goes in an output row
RESULT_KEYS = {"text-classification": "labels", "token-classification": "entities", "question-answering": "answer"}


def _lines(path: Path, encoding: str) -> list[str]:
    """The file's lines (split at \\n only, a trailing \\r dropped), each decoded on its own so
    that a decoding error names its line."""
    data = path.read_bytes()
    if encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig") and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for n, line in enumerate(raw, 1):
        try:
            text = line.decode(encoding)
        except UnicodeDecodeError as err:
            hint = ""
            if encoding.lower().startswith("utf"):
                hint = (" If the file is GBK (common for Chinese text), pass --encoding gbk, or convert it: "
                        f"iconv -f GBK -t UTF-8 {path} > {path.stem}.utf8{path.suffix}")
            raise DataError(f"{path}:{n}: not valid {encoding} (byte 0x{line[err.start]:02x} at byte {err.start} "
                            f"of the line).{hint}") from None
        except LookupError:
            raise ConfigError(f"--encoding {encoding!r} is not a known text encoding "
                              "(e.g. utf-8, gbk, gb18030)") from None
        lines.append(text[:-1] if text.endswith("\r") else text)
    return lines


def read_inputs(path: str | Path, task: str, *, encoding: str = "utf-8") -> list[dict[str, Any] | None]:
    """One input record per line of the file; None for a blank line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"--input {str(path)!r} does not exist")
    jsonl = path.suffix.lower() in (".jsonl", ".json")
    if task == "question-answering" and not jsonl:
        raise DataError(f"{path}: question answering reads .jsonl lines with question and context")
    need = ("question", "context") if task == "question-answering" else ("text",)
    rows: list[dict[str, Any] | None] = []
    for n, line in enumerate(_lines(path, encoding), 1):
        if not line.strip():
            rows.append(None)
            continue
        if not jsonl:
            rows.append({"text": line})
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{n}: not a JSON object: {err}") from None
        if not isinstance(rec, dict) or any(k not in rec for k in need):
            raise DataError(f"{path}:{n}: expected an object with {', '.join(need)}")
        for key in (*need, "text_pair"):
            if key in rec and not isinstance(rec[key], str):
                if key == "text_pair" and task != "text-classification":
                    continue
                got = "null" if rec[key] is None else f"a {type(rec[key]).__name__} ({json.dumps(rec[key])[:40]})"
                raise DataError(f"{path}:{n}: {key!r} is {got}; expected a string")
        rows.append(rec)
    return rows


def predict_rows(pipe: Any, rows: list[dict[str, Any] | None], task: str, *, top_k: int = 1) -> list[dict[str, Any]]:
    """Each record with its result under RESULT_KEYS[task]; a blank line (None) gets an empty one."""
    key = RESULT_KEYS[task]
    out: list[dict[str, Any]] = [{"text": "", key: None if task == "question-answering" else []} if r is None
                                 else dict(r) for r in rows]
    todo = [i for i, r in enumerate(rows) if r is not None]
    recs: list[dict[str, Any]] = [r for r in rows if r is not None]
    by_row = dict(zip(todo, recs))
    if task == "text-classification":
        paired = [i for i in todo if "text_pair" in by_row[i]]
        single = [i for i in todo if "text_pair" not in by_row[i]]
        for group, pairs in ((single, None), (paired, [by_row[i]["text_pair"] for i in paired])):
            if group:
                for i, labels in zip(group, pipe([by_row[i]["text"] for i in group], pairs, top_k=top_k)):
                    out[i][key] = labels
    elif task == "token-classification":
        for i, ents in zip(todo, pipe([by_row[i]["text"] for i in todo])):
            out[i][key] = ents
    else:
        answers = pipe(question=[by_row[i]["question"] for i in todo], context=[by_row[i]["context"] for i in todo])
        for i, ans in zip(todo, answers):
            out[i][key] = ans
    return out
