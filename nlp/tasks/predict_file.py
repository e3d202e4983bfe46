"""A file of inputs through a pipeline: what `nlp predict` does, for any backend.

Input: a .txt file (one text a line, for tasks whose `input_fields` are ("text",)) or .jsonl,
one record a line with the task's `input_fields` ({"text": ...[, "text_pair": ...]}; QA:
{"question": ..., "context": ...}), checked by the spec's `parse_record`. Output: one result
per input line, in order, blank lines included (the spec's `empty_prediction()`: no labels, no
entities, a null answer), and each text exactly as the line holds it (leading whitespace kept),
so entity offsets index the line as given.

With `--format training` the results are written instead as lines of the task's training files
(`TaskSpec.training_format`: the lexical tasks' ``word/POS``), one per input line, so that a
model's predictions on unlabelled text train another (``data.extra_train``).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

from nlp._common import ConfigError, DataError
from nlp.tasks.backend import Backend
from nlp.tasks.base_pipeline import UNKNOWN_ONLY
from nlp.tasks.model_dirs import locate_model, trained_max_length
from nlp.tasks.registry import get_task, list_tasks
from nlp.tasks.spec import TaskSpec

__all__ = ["predict_file", "read_inputs", "predict_rows", "training_lines", "check_training_format"]


def _lines(path: Path, encoding: str) -> list[str]:
    """The file's lines (split at \\n only, a trailing \\r dropped). In an encoding where \\n is
    the byte 0x0A and that byte is never part of another character (UTF-8, GBK, GB18030, Big5,
    ...), each line is decoded on its own, so that a decoding error names its line and byte; in
    the others (UTF-16, UTF-32, EBCDIC) the file is decoded whole first."""
    try:
        name = codecs.lookup(encoding).name
        newline_byte = "a\n".encode(name) == b"a\n"  # LookupError too for a codec that is not a text encoding
    except LookupError:
        raise ConfigError(f"--encoding {encoding!r} is not a known text encoding "
                          "(e.g. utf-8, gbk, gb18030, utf-16)") from None
    data = path.read_bytes()
    if name in ("utf-8", "utf-8-sig"):
        data = data.removeprefix(b"\xef\xbb\xbf")
    elif not newline_byte:
        return _decoded_lines(path, data, encoding, name)
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for n, line in enumerate(raw, 1):
        try:
            text = line.decode(encoding)
        except UnicodeDecodeError as err:
            raise DataError(f"{path}:{n}: not valid {encoding} (byte 0x{line[err.start]:02x} at byte {err.start} "
                            f"of the line).{_encoding_hint(path, name)}") from None
        lines.append(text[:-1] if text.endswith("\r") else text)
    return lines


def _decoded_lines(path: Path, data: bytes, encoding: str, name: str) -> list[str]:
    """The lines of `data`, in an encoding whose bytes may hold 0x0A inside a character: decoded
    whole, then split; an error names the line (counted in the text before it) and the byte."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        n = data[:err.start].decode(encoding, errors="replace").count("\n") + 1
        raise DataError(f"{path}:{n}: not valid {encoding} (byte 0x{data[err.start]:02x} at byte offset "
                        f"{err.start} of the file).{_encoding_hint(path, name)}") from None
    text = text.removeprefix("\ufeff")  # the BOM of utf-16-le/-be, utf-32-le/-be (utf-16 drops its own)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _encoding_hint(path: Path, name: str) -> str:
    """The fix for a file that is not in the encoding it was read in: for UTF-8, the likeliest
    cause in Chinese text (GBK); for another encoding, the file's own."""
    if name not in ("utf-8", "utf-8-sig"):
        return " Pass the file's own encoding with --encoding (e.g. utf-8, gbk, utf-16)."
    return (" If the file is GBK (common for Chinese text), pass --encoding gbk, or convert it: "
            f"iconv -f GBK -t UTF-8 {path} > {path.stem}.utf8{path.suffix}")


def _spec(task: str | TaskSpec) -> TaskSpec:
    return task if isinstance(task, TaskSpec) else get_task(task)


def read_inputs(path: str | Path, task: str | TaskSpec, *, encoding: str = "utf-8") -> list[dict[str, Any] | None]:
    """One input record per line of the file; None for a blank line."""
    spec = _spec(task)
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"--input {str(path)!r} does not exist")
    jsonl = path.suffix.lower() in (".jsonl", ".json")
    need = spec.input_fields
    if need != ("text",) and not jsonl:
        raise DataError(f"{path}: {spec.name} reads .jsonl lines with {' and '.join(need)}")
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
        rows.append(spec.parse_record(rec, f"{path}:{n}"))  # the task's fields, checked
    return rows


def predict_rows(pipe: Any, rows: list[dict[str, Any] | None], task: str | TaskSpec, *,
                 options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each record with the task's result fields added; a blank line (None) gets an empty result.
    `options`: the task's call options ({name: value}, declared for "predict"), checked here."""
    spec = _spec(task)
    options = spec.check_options(options or {}, "predict", max_length=getattr(pipe, "max_length", None),
                                 where="{name}")
    _refuse_tokenless(pipe, rows, spec)
    todo = [r for r in rows if r is not None]
    results = iter(spec.predict(pipe, todo, **options) if todo else [])
    return [{"text": "", **spec.empty_prediction()} if r is None else {**r, **next(results)} for r in rows]


def _refuse_tokenless(pipe: Any, rows: list[dict[str, Any] | None], spec: TaskSpec) -> None:
    """DataError naming the first input line whose text has no tokens, for a pipeline that
    refuses one (`on_tokenless = "error"`: its answer would be the same for every such text);
    the pipeline's own error would count only the non-blank lines."""
    if getattr(pipe, "on_tokenless", "empty") != "error":
        return
    for field in spec.input_fields:
        numbered = [(n, r[field]) for n, r in enumerate(rows, 1) if r is not None and isinstance(r.get(field), str)]
        texts = [text for _, text in numbered]
        for bad, why in ((pipe.tokenless(texts), "has no tokens{more}: it holds only characters the tokenizer drops "
                                                 "(controls such as NUL, format characters such as ZWSP or BOM)"),
                         (pipe.unknown_only(texts), UNKNOWN_ONLY + "{more}")):
            if bad:
                n, text = numbered[bad[0]]
                more = f" (and {len(bad) - 1} more line(s))" if len(bad) > 1 else ""
                raise DataError(f"input line {n}: {field} {text[:20]!r} {why.format(more=more)}, so a {spec.name} "
                                "answer to it would be the same for every such text. Make the line blank (an empty "
                                "result) or remove it")


def check_training_format(task: str | TaskSpec) -> TaskSpec:
    """The task's spec if its results can be written as training lines; else ConfigError naming
    the tasks that can."""
    spec = _spec(task)
    if spec.training_format is None:
        able = [t for t in list_tasks() if get_task(t).training_format is not None]
        raise ConfigError(f"--format training: {spec.name} results are not written as training lines; "
                          f"tasks that write them: {', '.join(able) or 'none'}. Or leave --format out (JSON lines)")
    return spec


def training_lines(rows: list[dict[str, Any]], task: str | TaskSpec) -> tuple[list[str], list[tuple[int, str]]]:
    """Each result (`predict_rows`) as a line of the task's training files, a blank input line
    as a blank line (training readers skip them); and (1-based line number, why) for each
    result that cannot be written so, left blank too, for the caller to report."""
    spec = check_training_format(task)
    lines, unwritable = [], []
    for n, row in enumerate(rows, 1):
        try:
            lines.append(spec.training_line(row))  # a blank input's empty result: an empty line
        except DataError as err:
            unwritable.append((n, str(err)))
            lines.append("")
    return lines, unwritable


def predict_file(model: str | Path, input_path: str | Path, *, task: str | None = None,
                 batch_size: int = 32, options: dict[str, Any] | None = None, encoding: str = "utf-8",
                 backend: Backend | None = None, precision: str | None = None) -> list[dict[str, Any]]:
    """One result per input line (blank lines included) through the task's pipeline: the
    PyTorch model of a run or model directory, in `precision` (None: fp32, as loaded; "auto":
    what is fast here, nlp/models/precision.py), or `backend` (an export directory's) with the
    tokenizer of `model`. `options`: the task's call options (`spec.call_options`), by name.
    See this module's docstring for the file formats."""
    where = locate_model(model, task or getattr(backend, "task", None))
    model_dir, spec = where.model_dir, where.spec
    rows = read_inputs(input_path, spec, encoding=encoding)
    max_length = trained_max_length(where.model_dir)  # as nlp.pipeline and nlp serve window the run
    if backend is None:
        pipe = spec.pipeline_class(model_dir, batch_size=batch_size, max_length=max_length, precision=precision)
    else:
        pipe = spec.pipeline_class(backend, model_dir, batch_size=batch_size, max_length=max_length, precision=precision)
    return predict_rows(pipe, rows, spec, options=options)
