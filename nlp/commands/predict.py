"""`nlp predict [RUN_MODEL_OR_EXPORT] --input FILE`: run a fine-tuned model over a file, write JSON lines."""

from __future__ import annotations

import argparse

from nlp._common import PRECISIONS
from nlp.commands._task_options import given_options, with_task_options

EPILOG = """examples:
  nlp predict runs/sentiment-reviews --input reviews.txt              # one text a line -> stdout
  nlp predict runs/sentiment-reviews --input reviews.txt --output preds.jsonl --top-k 2
  nlp predict runs/ner --input news.txt
  nlp predict runs/cmrc --input questions.jsonl     # {"question": ..., "context": ...} per line
  nlp predict runs/cmrc --input questions.jsonl --top-k 3 --max-answer-length 40   # the task's own options
  nlp predict export/sentiment-int8 --input reviews.txt   # an `nlp export` directory: onnxruntime
  nlp predict runs/ner --input news_gbk.txt --encoding gbk
  nlp predict runs/ner --input news.txt --precision auto   # bf16 where the CPU has it: faster
  nlp predict --task ner --input news.txt           # no model: the task's shipped default (ernie-tiny-zh-ner)
  nlp predict --task sentiment-analysis --input reviews.txt   # e5-small-zh-sentiment
  nlp predict runs/lexical-6l --task pos-tagging --input news.txt --format training --output labelled.txt
      # word/POS lines a student trains on: data.extra_train=[labelled.txt] (docs/compress.md)

Input: a .txt file (one text a line) or .jsonl (one record a line, with the task's input fields,
listed below). Output: one JSON object per input line, in order, a blank line included (the
task's empty result); texts are kept as the line holds them, so entity offsets index the line as
given. --format training writes each result as a line of the task's training files instead, blank
for a blank input line. The task options (--top-k, ...) are each task's `call_options`.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("predict", help="run a fine-tuned model over a file", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    with_task_options(p, "predict")
    p.add_argument("model", metavar="RUN_MODEL_OR_EXPORT", nargs="?", default=None,
                   help="a run directory, a model directory, an export directory (nlp export) or a hub name; "
                        "left out: --task's default model, shipped with the package")
    p.add_argument("--input", required=True, help="a .txt (one text a line) or .jsonl file")
    p.add_argument("--output", default=None, help="write JSON lines here (default: stdout)")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say; "
                   "with no model, the task whose default model to use")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--encoding", default="utf-8", help="the input file's text encoding (e.g. gbk; default utf-8)")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="a PyTorch model's (default: the precision its config declares, else fp32): auto (faster: "
                        "bf16 on a CPU with AVX512-BF16 or AMX and on Ampere+ GPUs, else the declared one or fp32), "
                        "fp32, bf16, fp16 (GPU), int8 (CPU: the encoder's linear layers in int8); an export runs in "
                        "the precision it was made in")
    p.add_argument("--format", choices=("jsonl", "training"), default="jsonl",
                   help="jsonl (default): a JSON object per line; training: the task's training-file lines "
                        "(lexical-analysis, pos-tagging: word/POS), e.g. a teacher's labels for a student")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from nlp._common import ConfigError, atomic_write, check_output_path
    from nlp.commands._models import model_or_default
    from nlp.deploy import OnnxBackend, is_export_dir
    from nlp.tasks.model_dirs import locate_model
    from nlp.tasks.predict_file import check_training_format, predict_file, training_lines
    from nlp.tasks.registry import get_task

    if args.output:  # before any prediction runs: a path that cannot be written fails now
        check_output_path(args.output, "--output")
    args.model = model_or_default(args.model, args.task)
    backend = OnnxBackend(args.model) if is_export_dir(args.model) else None
    # tasks sharing one head (lexical analysis, POS tagging, segmentation) share its exports
    if backend is not None and args.task is not None and get_task(args.task).head is not get_task(backend.task).head:
        raise ConfigError(f"{args.model} is an export of a {backend.task} model; it cannot run as {args.task!r}. "
                          "Leave --task out, or export a model of that task")
    spec = None
    if args.format == "training":  # refused before any prediction runs
        spec = check_training_format(args.task or (backend.task if backend is not None else
                                                   locate_model(args.model).spec))
    rows = predict_file(args.model, args.input, task=args.task, batch_size=args.batch_size, options=given_options(args),
                        encoding=args.encoding, backend=backend, precision=args.precision)
    if spec is None:
        lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    else:
        lines, unwritable = training_lines(rows, spec)
        if unwritable:  # one line of training data less, not a wrong one
            shown = ", ".join(str(n) for n, _ in unwritable[:10]) + (", ..." if len(unwritable) > 10 else "")
            print(f"warning: {len(unwritable)} line(s) of {args.input} left blank, their results not being "
                  f"writable as training lines (lines {shown}); line {unwritable[0][0]}: {unwritable[0][1]}",
                  file=sys.stderr)
    if args.output:
        with atomic_write(args.output, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        print(f"wrote {len(lines)} predictions to {args.output}", file=sys.stderr)
    elif lines:  # an empty input file: no output at all
        print("\n".join(lines))
    return 0
