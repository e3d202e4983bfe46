"""`nlp evaluate RUN_MODEL_OR_EXPORT --data ...`: score a fine-tuned (or exported) model on labelled data."""

from __future__ import annotations

import argparse
import json

from nlp._common import PRECISIONS
from nlp.commands._task_options import given_options, with_task_options

EPILOG = """examples:
  nlp evaluate runs/sentiment-reviews --data test     # the test split of the data the run used
  nlp evaluate runs/sentiment-reviews --data reviews-zh --split test
  nlp evaluate runs/sentiment-reviews/model --data my_reviews.jsonl
  nlp evaluate runs/ner --data peoples-daily-1998-ner --split dev
  nlp evaluate runs/cmrc --data cmrc2018_dev.json --max-length 384 --doc-stride 128
  nlp evaluate export/sentiment-int8 --data reviews-zh --split test   # an export dir, on onnxruntime
  nlp evaluate e5-small-zh-sentiment --data reviews-zh --split test   # a hub name: the package's default
  nlp evaluate ernie-tiny-zh-ner --data msra-ner --precision fp32      # not in the int8 it declares

--data is a split name of the run's own data (test, dev: from its recipe.yaml, which an export
directory keeps), a dataset name (`nlp data ls`) or a file in the task's format (classification:
jsonl/json/csv/tsv with text[, text_pair], label; NER: CoNLL columns; QA: SQuAD/CMRC2018 json).
The task options (QA: --doc-stride, --max-answer-length; `nlp tasks` lists each task's) override
the run's task settings; left out, the run's own apply. An export directory keeps its run's
recipe.yaml, so the run's max_length, task settings and batch size apply to it as to the run; its scores have no loss (onnxruntime computes the outputs only).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evaluate", help="score a fine-tuned model on labelled data", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    with_task_options(p, "evaluate")
    p.add_argument("model", metavar="RUN_MODEL_OR_EXPORT",
                   help="a run directory (train.output_dir), a model directory, an export directory (nlp export) or "
                        "a hub name (nlp hub ls)")
    p.add_argument("--data", required=True,
                   help="test/dev (the run's own data), a dataset name, or a labelled file")
    p.add_argument("--split", default="test", help="split of a named dataset (default: test)")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.add_argument("--max-length", type=int, default=None, help="default: the run's data.max_length, else 128 (QA 384)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: the run's evaluation batch size, else 64")
    p.add_argument("--max-samples", type=int, default=None, help="score only the first N examples")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="a PyTorch model's, as `nlp predict --precision` (default: the precision its config "
                        "declares, as pipelines and `nlp serve` run it, else fp32); the output's \"inference_precision\" "
                        "says which ran")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nlp.commands._models import local_model
    from nlp.deploy import OnnxBackend, is_export_dir
    from nlp.train.scoring import evaluate_dir

    model = local_model(args.model)
    backend = OnnxBackend(model) if is_export_dir(model) else None
    scores = evaluate_dir(model, args.data, split=args.split, task=args.task, max_length=args.max_length,
                          options=given_options(args),
                          batch_size=args.batch_size, max_samples=args.max_samples, backend=backend,
                          precision=args.precision)
    if model != args.model:  # a hub name: say it, not the path of its snapshot in the cache
        scores["model"] = args.model
    print(json.dumps(scores, ensure_ascii=False))
    return 0
