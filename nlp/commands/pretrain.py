"""`nlp pretrain RECIPE.yaml [key.sub=value ...]`: masked-LM pretraining with whole-word masking."""

from __future__ import annotations

import argparse
import json
import logging
import sys

EPILOG = """examples:
  nlp pretrain recipes/pretrain/ernie-tiny-zh.yaml
  nlp pretrain recipes/pretrain/ernie-tiny-zh.yaml train.max_steps=200 train.output_dir=runs/try
  nlp pretrain recipes/pretrain/ernie-tiny-zh.yaml model.config.num_hidden_layers=2 tokenizer.vocab_size=12000
  nlp pretrain my.yaml --validate-only          # check the recipe, start nothing
  nlp pretrain my.yaml --validate-only corpus.max_length=256   # overrides go before or after options

The run directory holds checkpoints, metrics.jsonl, loss.png, eval.png and model/ (weights,
config and tokenizer: load it with nlp.AutoModelForMaskedLM.from_pretrained(DIR)).
An existing train.output_dir is resumed; Ctrl-C writes a checkpoint, the same command continues.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pretrain", help="pretrain a masked LM (whole-word masking) with a recipe",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="a pretraining recipe YAML (e.g. recipes/pretrain/ernie-tiny-zh.yaml)")
    p.add_argument("overrides", nargs="*", metavar="key.sub=value",
                   help="override recipe keys, e.g. train.max_steps=500 corpus.max_length=256")
    p.add_argument("--validate-only", action="store_true", help="check the recipe and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nlp.commands.finetune import check_model_name
    from nlp.train.errors import TrainingInterrupted
    from nlp.train.pretrain import load_pretrain_recipe, pretrain

    recipe = load_pretrain_recipe(args.recipe, args.overrides, check_model=check_model_name)
    if args.validate_only:
        print(f"{args.recipe}: OK (output_dir {recipe.train.output_dir})")
        return 0
    if recipe.model.name is not None:
        from pathlib import Path

        from nlp.auto import resolve

        if not Path(recipe.model.name).expanduser().is_dir():
            recipe.model.name = str(resolve(recipe.model.name))  # hub name -> local snapshot
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        result = pretrain(recipe)
    except TrainingInterrupted as err:
        print(f"interrupted: {err}", file=sys.stderr)
        return 128 + err.signum if err.signum else 1
    s = result.train.summary
    print()
    print(f"run: {recipe.train.output_dir}  ({result.train.status}, {s.get('steps')} steps, "
          f"{s.get('wall_seconds')} s, {s.get('tokens_per_second')} tokens/s)")
    print(f"corpus: {result.rows} rows, {result.tokens_per_epoch} tokens per epoch; "
          f"model: {result.parameters:,} parameters -> {result.model_dir}")
    if not sys.stdout.isatty():
        print(json.dumps({"summary": s, "parameters": result.parameters, "rows": result.rows,
                          "tokens_per_epoch": result.tokens_per_epoch}, ensure_ascii=False))
    return 0
