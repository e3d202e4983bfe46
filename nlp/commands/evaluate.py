"""`nlp evaluate RUN_OR_MODEL --data ...`: score a fine-tuned model on labelled data."""

from __future__ import annotations

import argparse
import json

EPILOG = """examples:
  nlp evaluate runs/sentiment-reviews --data reviews-zh --split test
  nlp evaluate runs/sentiment-reviews/model --data my_reviews.jsonl
  nlp evaluate runs/ner --data peoples-daily-1998-ner --split dev
  nlp evaluate runs/cmrc --data cmrc2018_dev.json --max-length 384 --doc-stride 128

--data is a dataset name (`nlp data ls`) or a file in the task's format (classification:
jsonl/json/csv/tsv with text[, text_pair], label; NER: CoNLL columns; QA: SQuAD/CMRC2018 json).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evaluate", help="score a fine-tuned model on labelled data", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="RUN_OR_MODEL", help="a run directory (train.output_dir) or a model directory")
    p.add_argument("--data", required=True, help="a dataset name or a labelled file")
    p.add_argument("--split", default="test", help="split of a named dataset (default: test)")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.add_argument("--max-length", type=int, default=None, help="default: the run's data.max_length, else 128 (QA 384)")
    p.add_argument("--doc-stride", type=int, default=None, help="QA window overlap (default: the run's data.doc_stride, else 128)")
    p.add_argument("--max-answer-length", type=int, default=None,
                   help="QA: longest answer span in tokens (default: the run's data.max_answer_length, else 30)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: the run's evaluation batch size, else 64")
    p.add_argument("--max-samples", type=int, default=None, help="score only the first N examples")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nlp.train.inference import evaluate_dir

    scores = evaluate_dir(args.model, args.data, split=args.split, task=args.task, max_length=args.max_length,
                          doc_stride=args.doc_stride, max_answer_length=args.max_answer_length,
                          batch_size=args.batch_size, max_samples=args.max_samples)
    print(json.dumps(scores, ensure_ascii=False))
    return 0
