"""`nlp merge MODEL MODEL ... --out DIR [--weights W W ...]`: average fine-tunes' weights."""

from __future__ import annotations

import argparse

EPILOG = """examples:
  nlp merge runs/ner-mixed runs/ner-msra --out runs/ner-merged/model                 # equal weights
  nlp merge runs/ner-mixed runs/ner-msra --weights 0.35 0.65 --out runs/ner-merged/model
  nlp evaluate runs/ner-merged/model --data msra-ner --split dev                    # measure it

Each MODEL is a fine-tuned run or model directory, or a hub name; all of one task, architecture,
size and label set, fine-tuned from one starting checkpoint (the average of unrelated models is
noise). Every weight of DIR is the weighted mean of that weight in the models (weights >= 0
summing to 1, one per model; default equal); config.json (less a declared inference precision,
measured on other weights), the tokenizer files and the task's own files are the first model's. Pick the weights on dev data, never on test. See docs/training.md, "Merging
fine-tunes".
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("merge", help="average the weights of models fine-tuned from one checkpoint",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="fine-tuned runs, model directories or hub names (nlp hub ls); two or more")
    p.add_argument("--out", required=True, metavar="DIR", help="the merged model directory (must not exist)")
    p.add_argument("--weights", nargs="+", type=float, default=None, metavar="W",
                   help="one weight per model, in order, >= 0, summing to 1 (default: equal)")
    p.add_argument("--task", default=None, help="the task, when the models' configs do not say")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nlp.commands._models import local_model
    from nlp.train.merging import merge_models

    r = merge_models([local_model(m) for m in args.models], args.weights, args.out, task=args.task,
                     names=args.models)
    for source, weight in zip(r.sources, r.weights):
        print(f"  {weight:.4g} x {source}")
    if r.differing_tokenizer_files:
        print(f"  tokenizer files that differ, taken from the first model: {', '.join(r.differing_tokenizer_files)}")
    print(f"merged {r.tensors} tensors into {r.out}")
    return 0
