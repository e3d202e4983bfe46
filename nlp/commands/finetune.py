"""`nlp finetune RECIPE.yaml [key.sub=value ...]`: run a fine-tuning recipe."""

from __future__ import annotations

import argparse
import json
import sys

EPILOG = """examples:
  nlp finetune recipes/sentiment-reviews.yaml
  nlp finetune recipes/sentiment-reviews.yaml train.epochs=1 train.optim.lr=5e-4
  nlp finetune recipes/ner-peoples-daily.yaml train.output_dir=runs/ner2 data.max_train_samples=2000
  nlp finetune my.yaml --validate-only          # check the recipe, start nothing
  nlp finetune my.yaml --validate-only train.optim.lr=1e-4   # overrides go before or after options
  accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \\
      --dynamo_backend no -m nlp finetune recipes/sentiment-reviews.yaml

An existing train.output_dir is resumed (train.resume=auto) or refused, never overwritten.
Ctrl-C writes a checkpoint; run the same command again to continue.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("finetune", help="fine-tune a model with a recipe", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="a recipe YAML file (see `nlp recipes ls`)")
    p.add_argument("overrides", nargs="*", metavar="key.sub=value",
                   help="override recipe keys, e.g. train.optim.lr=3e-5 data.max_length=256")
    p.add_argument("--validate-only", action="store_true", help="check the recipe and exit")
    p.set_defaults(func=run)


def hub_loaders():
    """Loaders that resolve hub names (nlp.auto) for nlp.train.finetune."""
    from nlp.auto import AutoConfig, AutoTokenizer, resolve
    from nlp.hub import fetch_file
    from nlp.train.finetune import Loaders

    return Loaders(
        model=lambda head, name, overrides: head.from_pretrained(resolve(name), **overrides),
        config=lambda name, overrides: AutoConfig.from_pretrained(name, **overrides),
        tokenizer=lambda name: AutoTokenizer.from_pretrained(name),
        fetch=fetch_file,  # public datasets' files, through the hub
        directory=resolve,  # a local directory comes back as it is
    )


def check_model_name(name: str) -> None:
    """Cheap check, before any work: a local directory, an owner/repo id or a registered name
    (UnknownNameError with the hub's did-you-mean otherwise). Downloads nothing."""
    from pathlib import Path

    from nlp import hub

    if Path(name).expanduser().is_dir():
        return
    hub.resolve_card(name)


def run(args: argparse.Namespace) -> int:
    from nlp.train.errors import TrainingInterrupted
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides, check_model=check_model_name)
    if args.validate_only:
        print(f"{args.recipe}: OK ({recipe.task.name}, output_dir {recipe.train.output_dir})")
        return 0
    try:
        result = finetune(recipe, hub_loaders())
    except TrainingInterrupted as err:
        print(f"interrupted: {err}", file=sys.stderr)
        return 128 + err.signum if err.signum else 1
    from accelerate import PartialState

    if not PartialState().is_main_process:  # one report per launched run
        return 0
    s = result.summary
    print()
    print(f"run: {result.run_dir}  ({result.status}, {s.get('steps')} steps, {s.get('wall_seconds')} s, "
          f"{s.get('tokens_per_second')} tokens/s, peak memory {s.get('peak_memory_mb')} MiB)")
    for role, scores in (("dev", result.dev), ("test", result.test)):
        if scores:
            print(f"{role:5s} " + "  ".join(f"{k}={v:.4f}" for k, v in scores.items()))
    print(f"model: {result.model_dir}  (nlp predict {result.run_dir} --input FILE)")
    if not sys.stdout.isatty():
        print(json.dumps({"dev": result.dev, "test": result.test}, ensure_ascii=False))
    return 0
