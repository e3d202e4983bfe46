"""`nlp recipes ls | cp NAME DEST | validate FILE`: the built-in fine-tuning recipes."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

EPILOG = """examples:
  nlp recipes ls
  nlp recipes cp sentiment-reviews my-sentiment.yaml    # copy one out to edit it
  nlp recipes validate my-sentiment.yaml train.epochs=1 # every problem at once, nothing runs
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("recipes", help="list, copy or validate fine-tuning recipes", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="recipes_command", metavar="SUBCOMMAND", required=True)
    ls = sub.add_parser("ls", help="list the built-in recipes", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ls.set_defaults(func=_ls)
    cp = sub.add_parser("cp", help="copy a built-in recipe to DEST", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cp.add_argument("name", help="a name from `nlp recipes ls`")
    cp.add_argument("dest", help="destination file or directory")
    cp.add_argument("--force", action="store_true", help="overwrite DEST if it exists")
    cp.set_defaults(func=_cp)
    val = sub.add_parser("validate", help="check a recipe file (or built-in name) without running it",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    val.add_argument("file", help="a recipe file or a built-in recipe name")
    val.add_argument("overrides", nargs="*", metavar="key.sub=value")
    val.set_defaults(func=_validate)


def _first_line(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines()[2:]:
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()
    return ""


def _ls(args: argparse.Namespace) -> int:
    from nlp.recipes import list_recipes, recipe_path

    names = list_recipes()
    width = max(map(len, names))
    for name in names:
        print(f"{name:{width}s}  {_first_line(recipe_path(name))}")
    return 0


def _cp(args: argparse.Namespace) -> int:
    from nlp._common import ConfigError, check_output_path
    from nlp.recipes import recipe_path

    src = recipe_path(args.name)
    dest = Path(args.dest)
    if dest.is_dir():
        dest = dest / src.name
    if dest.exists() and not args.force:
        raise ConfigError(f"{dest} exists; pass --force to overwrite it, or pick another DEST")
    check_output_path(dest, "DEST")
    shutil.copyfile(src, dest)
    print(f"copied {src.name} -> {dest}  (run: nlp finetune {dest})")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from nlp.commands.finetune import check_model_name
    from nlp.recipes import list_recipes, recipe_path
    from nlp.train.recipe import load_recipe

    path = Path(args.file)
    if not path.exists() and args.file.removesuffix(".yaml") in list_recipes():
        path = recipe_path(args.file)
    recipe = load_recipe(path, args.overrides, check_model=check_model_name)
    print(f"{path}: OK ({recipe.task.name}, output_dir {recipe.train.output_dir})")
    return 0
