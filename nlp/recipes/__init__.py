"""The built-in recipes: YAML files in this package directory (package data, so `nlp recipes
ls / cp` work from an installed wheel). In a clone, `recipes/` at the repository root is a
symlink to this directory, so `nlp finetune recipes/sentiment-reviews.yaml` works there too:
one copy of each recipe, two ways to reach it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["RECIPES_DIR", "list_recipes", "recipe_path"]

RECIPES_DIR = Path(__file__).resolve().parent


def list_recipes() -> list[str]:
    """Names of the built-in recipes (file names without .yaml), sorted."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def recipe_path(name: str) -> Path:
    """The file of a built-in recipe; UnknownNameError with a did-you-mean otherwise."""
    from nlp._common import UnknownNameError, did_you_mean

    stem = name[:-5] if name.endswith(".yaml") else name
    path = RECIPES_DIR / f"{stem}.yaml"
    if not path.is_file():
        raise UnknownNameError(f"Unknown recipe {name!r}.{did_you_mean(stem, list_recipes())} "
                               f"See `nlp recipes ls`; built-in: {', '.join(list_recipes())}.")
    return path
