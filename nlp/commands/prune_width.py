"""`nlp prune-width RUN_OR_MODEL --out DIR --heads S --neurons S`: keep each layer's most important
attention heads and feed-forward neurons."""

from __future__ import annotations

import argparse

EPILOG = """examples:
  nlp prune-width runs/sentiment-reviews --out runs/sentiment-narrow --heads 0.5 --neurons 0.5
  nlp prune-width runs/ner --out runs/ner-narrow --neurons 0.5 --data peoples-daily-1998-ner --split dev
  # then re-train the pruned model briefly, best distilled from the unpruned one:
  nlp finetune recipes/sentiment-reviews.yaml model.name=runs/sentiment-narrow \\
      distill.teacher=runs/sentiment-reviews train.epochs=1 train.output_dir=runs/sentiment-narrow-ft

Heads and neurons are ranked by the summed |dL/dgate| of a gate on each (Michel et al. 2019, as
PaddleNLP's compress), with the task's own loss on --examples labelled examples of --data (the
run's dev split by default). Every layer keeps the same number: its own most important ones.
DIR is a model directory (config.json, model.safetensors, the tokenizer, width_pruning.json with
the kept indices) that nlp fine-tunes, evaluates and exports. A model with fewer heads has
attention_head_size in its config, which transformers cannot load; one pruned in its neurons
only (--heads 1) stays a plain transformers model. See docs/compress.md.
"""


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give the share to keep, in (0, 1]") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1]: give the share to keep (1 keeps them all)")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("prune-width", help="keep each layer's most important heads and feed-forward neurons",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="RUN_OR_MODEL", help="a fine-tuned run or model directory, or a hub name "
                                                        "(nlp hub ls)")
    p.add_argument("--out", required=True, metavar="DIR", help="the new model directory (must not exist)")
    p.add_argument("--heads", type=_share, default=1.0, metavar="SHARE",
                   help="share of each layer's attention heads to keep, in (0, 1] (default 1: all)")
    p.add_argument("--neurons", type=_share, default=1.0, metavar="SHARE",
                   help="share of each layer's feed-forward neurons to keep, in (0, 1] (default 1: all)")
    p.add_argument("--data", default="dev",
                   help="labelled data to rank on: a split of the run's own data (default dev), a dataset name "
                        "or a file")
    p.add_argument("--split", default="dev", help="the split of a dataset given as --data (default dev)")
    p.add_argument("--examples", type=int, default=512, help="examples to rank on, drawn by a seeded shuffle "
                                                             "(default 512)")
    p.add_argument("--batch-size", type=int, default=32, help="examples per backward pass (default 32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nlp.commands._models import local_model
    from nlp.train.width_pruning import prune_width

    r = prune_width(local_model(args.model), args.out, heads=args.heads, neurons=args.neurons, data=args.data,
                    split=args.split, examples=args.examples, batch_size=args.batch_size, seed=args.seed,
                    task=args.task)
    print(f"ranked on {r.examples:,} examples of {r.data}; wrote {r.out}")
    print(f"  heads per layer {r.heads_before} -> {r.heads_after}, feed-forward neurons {r.neurons_before:,} -> "
          f"{r.neurons_after:,}; parameters {r.parameters_before:,} -> {r.parameters_after:,} "
          f"({1 - r.parameters_after / r.parameters_before:.1%} fewer)")
    print(f"  re-train it briefly (nlp finetune RECIPE model.name={r.out} distill.teacher={args.model}), then "
          "nlp evaluate / nlp export")
    return 0
