"""Ship a fine-tuned run as a hub builtin: what `nlp hub ship RUN --name NAME` runs (maintainers).

Like `nlp.auto`, this module puts the hub together with the loaders: the task layer reads the run
and writes the release folder (`nlp.tasks.release`: fp16 weights, config.json with the label
names, tokenizer files, README.md with the run's dev/test figures), the hub writes the card
(`nlp.hub.builtin_cards`: sha256 and size of every file, a revision label that changes with any
file)::

    ship("runs/ner-zh", "ernie-tiny-zh-ner")     # nlp/assets/ernie-tiny-zh-ner/ + nlp/hub/cards.yaml

Atomic: the folder is written next to its final place and renamed into it, the card file is
replaced in one rename, and a failure in between puts the previous folder back.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlp import hub
from nlp._common import ConfigError, temporary_sibling
from nlp.hub.builtin_cards import builtin_card, write_card_block
from nlp.hub.registry import find_card
from nlp.models.release import WEIGHT_FORMATS, file_digests
from nlp.tasks.release import read_finetuned_run, write_release

__all__ = ["ShipResult", "ship", "SHIPPED_NAME"]

logger = logging.getLogger(__name__)

# lowercase words of letters and digits joined by "-" (dots inside a word, e.g. "3.0"): the hub's
# other names look like this, and a folder of that name is a valid package-data path everywhere
SHIPPED_NAME = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9]+)*(?:-[a-z0-9]+(?:\.[a-z0-9]+)*)+$")


@dataclass(frozen=True)
class ShipResult:
    name: str
    folder: Path
    cards_file: Path
    card: hub.ModelCard
    files: dict[str, dict[str, Any]]  # file name -> {"sha256", "size"}

    @property
    def total_bytes(self) -> int:
        return sum(f["size"] for f in self.files.values())


def _check_name(name: str, base: str | None) -> None:
    if not SHIPPED_NAME.match(name):
        raise ConfigError(f"Unknown name format {name!r}: a shipped model's name is lowercase letters and "
                          "digits in words joined by '-', starting with its base model's name and ending "
                          "with what it does, e.g. 'ernie-tiny-zh-sentiment' or 'ernie-tiny-zh-ner'")
    if base and find_card(base) is not None:
        if name == base:
            raise ConfigError(f"{name!r} is the base model's own name; name the fine-tuned model after what "
                              f"it does, e.g. '{base}-sentiment'")
        if not name.startswith(base + "-"):
            raise ConfigError(f"Unknown name format {name!r}: a shipped model's name starts with its base "
                              f"model's name ({base!r}), e.g. '{base}-ner'")


def _origin(base: str | None, base_card: Any, how_made: str | None) -> str:
    """What the card's description says the model was fine-tuned from: a registered base model by
    its name; a local directory (a pruned or distilled model on the maintainer's disk) by what it
    is, never by a path that means nothing on the user's machine."""
    if base and base_card is not None:
        return base
    if base:
        return "a compressed model (its README: How it was made)" if how_made else "a local model"
    return "a model trained from scratch"


def ship(run_or_model_dir: str | os.PathLike, name: str, *, license: str | None = None,
         assets_dir: str | os.PathLike | None = None, cards_file: str | os.PathLike | None = None,
         package: str = "nlp", weights: str = "fp16", how_made: str = "") -> ShipResult:
    """Write `assets_dir/<name>/` (default: nlp/assets) from a finished fine-tuning run and put its
    card into `cards_file` (default: nlp/hub/cards.yaml) with a `builtin` source (`package`,
    path `<assets_dir name>/<name>`, relative to the package's folder). The card is also
    registered in this process. `license` defaults to the base model's card licence. `weights`:
    "fp16", or "int8" (2-D weights as int8 rows with a scale each; nlp/models/_int8_weights.py).
    `how_made`: Markdown for the model card's "How it was made" (what made the run's base model)."""
    import nlp
    from nlp.tasks.datasets import BUILTIN

    if weights not in WEIGHT_FORMATS:
        raise ConfigError(f"weights={weights!r}; valid: {', '.join(WEIGHT_FORMATS)}")
    run = read_finetuned_run(run_or_model_dir)
    base = run.base_model
    _check_name(name, base)
    base_card = find_card(base) if base else None
    license = license or (base_card.license if base_card is not None else None)
    if not license or license == "unknown":
        raise ConfigError(f"the licence of {name!r} is unknown (base model {base!r} has no card that states "
                          "one); pass --license, e.g. --license mit")
    assets = Path(assets_dir) if assets_dir else Path(nlp.__file__).parent / "assets"
    cards = Path(cards_file) if cards_file else Path(hub.__file__).parent / "cards.yaml"
    dataset = BUILTIN.get(str(run.dataset).lower()) if run.dataset else None
    assets.mkdir(parents=True, exist_ok=True)
    final = assets / name
    # written whole beside its final place; published by hand below, not by publish_directory:
    # the cards file joins the swap (the old folder comes back if the card cannot be written)
    stage = temporary_sibling(final, mode=0o755)  # 0o755: other users of the package read it
    old = None
    try:
        write_release(run, stage, name=name, license=license, weights=weights,
                      base_description=base_card.description if base_card is not None else "",
                      data_source=dataset.source if dataset is not None else "", how_made=how_made)
        for f in stage.iterdir():
            os.chmod(f, 0o644)
        digests = file_digests(stage)
        main = run.results.get("summary", {}).get("metric")
        figures = "; ".join(f"{s} {main} {run.results[s][main]:.4f}" for s in ("dev", "test")
                            if main and isinstance(run.results.get(s), dict) and main in run.results[s])
        labels = f" ({', '.join(run.label_names)})" if run.label_names else ""
        card = builtin_card(
            name, digests, package=package, path=f"{assets.name}/{name}", architecture=run.config.get("model_type", "ernie"),
            heads=[run.task], license=license,
            description=f"{_origin(base, base_card, how_made)} fine-tuned for {run.task} on "
                        f"{run.dataset or 'local files'}{labels}"
                        + (f"; {figures}" if figures else "") + ".")
        if final.exists():
            old = final.with_name(f".tmp-{name}~{os.getpid()}.old")  # temporary_target's scheme
            shutil.rmtree(old, ignore_errors=True)  # left by a process killed mid-swap
            os.replace(final, old)
        os.replace(stage, final)
        try:
            write_card_block(cards, card, comment=f"from {run.run_dir}, task {run.task}")
        except BaseException:
            os.replace(final, stage)
            if old is not None:
                os.replace(old, final)
                old = None
            raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    hub.register_card(card)
    result = ShipResult(name, final, cards, card, digests)
    logger.info("shipped %s: %s (%d files, %.1f MB), card in %s", name, final, len(digests),
                result.total_bytes / 2**20, cards)
    return result
