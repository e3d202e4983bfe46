"""Shipping models as package data and hub builtins (maintainers): everything that makes a release.

- `ship(RUN, NAME)`: what `nlp hub ship RUN --name NAME` runs. The run is read
  (`read_finetuned_run`), its release folder written (`write_release`: fp16 weights, config.json
  with the label names, tokenizer files, README.md with the run's dev/test figures), and the hub's
  card recorded (`nlp.hub.builtin_cards`: sha256 and size of every file, a revision label that
  changes with any file)::

    ship("runs/ner-zh", "ernie-tiny-zh-ner")     # nlp/assets/ernie-tiny-zh-ner/ + nlp/hub/cards.yaml

- `release_pretrained(SRC, DST)`: the release copy of a pretrained MLM directory (ernie-tiny-zh).
Both write their weights with `nlp.models.release.write_release_copy` (fp16, or int8 rows where
the package's size needs it; the model layer's weight storage, which pruning uses too).

Like `nlp.auto`, this module puts the hub together with the loaders. Atomic: a release folder is
written next to its final place and renamed into it, the card file is replaced in one rename, and
a failure in between puts the previous folder back.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nlp import hub
from nlp._common import ConfigError, temporary_sibling
from nlp._signals import signals_held
from nlp.hub.builtin_cards import builtin_card, write_card_block
from nlp.hub.registry import find_card
from nlp.models.precision import DECLARABLE_PRECISIONS, DECLARED_PRECISION_KEY
from nlp.models.release import WEIGHT_FORMATS, file_digests, write_release_copy
from nlp.tasks.model_dirs import find_model_dir
from nlp.tasks.registry import get_task, task_of_architecture

__all__ = ["ShipResult", "ship", "SHIPPED_NAME", "release_pretrained", "FinetunedRun", "read_finetuned_run",
           "write_release", "model_card_markdown"]

# ---------------------------------------------------------------------- a pretrained model's release


def release_pretrained(src_dir: str | Path, dst_dir: str | Path, *,
                       dtype: torch.dtype = torch.float16) -> dict[str, dict[str, Any]]:
    """Write the release copy of a pretrained MLM directory: weights cast to `dtype` (fp16 halves
    the size; models load it into fp32 parameters), config and tokenizer files copied.

    Returns {file name: {"sha256", "size"}} of every file in `dst_dir`: the hub card's file list.
    """
    from nlp.models import ErnieForMaskedLM

    src = Path(src_dir)
    write_release_copy(ErnieForMaskedLM.from_pretrained(src), src, dst_dir, dtype=dtype)
    return file_digests(dst_dir)


# ---------------------------------------------------------------------- a fine-tuned run's release


@dataclass(frozen=True)
class FinetunedRun:
    """What a finished `nlp finetune` run directory says about its model."""

    run_dir: Path
    model_dir: Path
    task: str  # canonical task name
    label_names: list[str] | None  # id order; None for QA
    results: dict[str, Any]  # results.json: task, status, dev, test, summary
    recipe: dict[str, Any]  # recipe.yaml as run (after overrides); {} when absent
    config: dict[str, Any]  # model/config.json

    @property
    def base_model(self) -> str | None:
        """The recipe's model.name (a hub name or a directory), or None (a preset from scratch)."""
        name = (self.recipe.get("model") or {}).get("name")
        return str(name) if name else None

    @property
    def dataset(self) -> str | None:
        return (self.recipe.get("data") or {}).get("dataset")


def read_finetuned_run(path: str | Path) -> FinetunedRun:
    """Read a run directory (or its model/ folder) of a fine-tuned model. ConfigError, naming the
    path and what to give instead, for a folder that holds no fine-tuned model or no results.json."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{str(path)!r} is not a directory; give the train.output_dir of a finished "
                          "`nlp finetune` run (e.g. runs/ner-zh)")
    model_dir = find_model_dir(path)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    archs = config.get("architectures") or []
    spec = next((s for a in archs if (s := task_of_architecture(a)) is not None), None)
    if spec is None:
        raise ConfigError(f"{model_dir} holds no fine-tuned model: its config.json names the architectures "
                          f"{archs} and none is a task head (…ForSequenceClassification, "
                          "…ForTokenClassification, …ForQuestionAnswering); give a fine-tuning run, "
                          "not a pretrained or backbone model")
    run_dir = model_dir.parent if model_dir.name == "model" else model_dir
    results_file = run_dir / "results.json"
    if not results_file.is_file():
        raise ConfigError(f"{run_dir} has no results.json, so the model card would have no dev/test figures: "
                          "give the run directory of a finished `nlp finetune` run (it writes results.json "
                          "when training ends), not a bare model directory")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    if results.get("task") and get_task(results["task"]).name != spec.name:
        raise ConfigError(f"{results_file} is for the task {results['task']!r} but {model_dir} holds a "
                          f"{spec.name} model")
    recipe_file = run_dir / "recipe.yaml"
    recipe = (yaml.safe_load(recipe_file.read_text(encoding="utf-8")) or {}) if recipe_file.is_file() else {}
    names = None
    if spec.has_label_set:
        id2label = config.get("id2label") or {}
        names = [str(id2label[k]) for k in sorted(id2label, key=int)]
        if not names or all(n.startswith("LABEL_") for n in names):
            raise ConfigError(f"{model_dir}/config.json has no label names (id2label: {id2label}); a shipped "
                              "model must say what its labels mean: fine-tune it with named labels")
    return FinetunedRun(run_dir, model_dir, spec.name, names, results, recipe, config)


def write_release(run: FinetunedRun, dst: str | Path, *, name: str, license: str,
                  base_description: str = "", data_source: str = "", weights: str = "fp16",
                  how_made: str = "", inference_precision: str | None = None) -> None:
    """Write the release folder: fp16 (or int8-row, `weights="int8"`) weights, config.json (label
    names included; the declared `inference_precision`, if any), the tokenizer files and README.md
    (`model_card_markdown`)."""
    spec = get_task(run.task)
    model = spec.head.from_pretrained(run.model_dir)
    model.config.extra.pop(DECLARED_PRECISION_KEY, None)
    if inference_precision is not None:
        model.config.extra[DECLARED_PRECISION_KEY] = inference_precision
    write_release_copy(model, run.model_dir, dst, weights=weights)
    spec.copy_model_files(run.model_dir, dst)  # the task's own files (a lexical model's word lexicon)
    params = sum(p.numel() for p in model.parameters())
    text = model_card_markdown(run, name=name, license=license, parameters=params,
                               base_description=base_description, data_source=data_source, weights=weights,
                               how_made=how_made, inference_precision=inference_precision)
    (Path(dst) / "README.md").write_text(text, encoding="utf-8")


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _results_table(results: dict[str, Any]) -> list[str]:
    splits = [s for s in ("dev", "test") if isinstance(results.get(s), dict) and results[s]]
    keys = list(dict.fromkeys(k for s in splits for k in results[s]))
    if not splits:
        return ["results.json holds no dev or test figures."]
    lines = ["| split | " + " | ".join(keys) + " |", "| --- |" + " --- |" * len(keys)]
    for s in splits:
        lines.append(f"| {s} | " + " | ".join(_fmt(results[s].get(k, "")) for k in keys) + " |")
    return lines


_WEIGHTS_TEXT = {
    "fp16": "weights in fp16 safetensors",
    "int8": "weights stored as int8 rows with an fp32 scale each, loaded as fp32 by `from_pretrained`; "
            "transformers does not read this file",
}


def model_card_markdown(run: FinetunedRun, *, name: str, license: str, parameters: int,
                        base_description: str = "", data_source: str = "", weights: str = "fp16",
                        how_made: str = "", inference_precision: str | None = None) -> str:
    """The README.md of a shipped task model: what it is, its base model, data, recipe, dev/test
    figures (read from the run's results.json), use, licence, and how it was made (`how_made`,
    Markdown: the steps before the run, such as the pruning that made its base model, are put
    before the two commands every shipped model shares)."""
    spec = get_task(run.task)
    summary = run.results.get("summary") or {}
    base = run.base_model or "a model trained from scratch (no model.name in the recipe)"
    data = run.recipe.get("data") or {}
    dataset = run.dataset or ", ".join(f"{k}: {v}" for k, v in (data.get("files") or {}).items()) or "see the recipe"
    alias = next((a for a in spec.aliases if a in ("ner", "sentiment-analysis")), spec.name)
    use_default = ([f'pipe = nlp.pipeline("{alias}")          # no model: this is the default of the task']
                   if spec.default_model == name else [])
    teacher = (run.recipe.get("distill") or {}).get("teacher")
    lines = [
        f"# {name}",
        "",
        f"A {spec.name} model fine-tuned from `{base}` on `{dataset}`, shipped inside the `nlp` package "
        f"({_WEIGHTS_TEXT[weights]}, sha256-verified by the hub's builtin source; no download).",
        "",
        "| | |",
        "| --- | --- |",
        f"| task | {spec.name} |",
        f"| base model | `{base}`{(': ' + base_description) if base_description else ''} |",
        f"| dataset | `{dataset}`{(' (' + data_source + ')') if data_source else ''} |",
    ]
    if teacher:
        lines.append(f"| distilled from | `{teacher}` (the recipe's distill: section) |")
    if run.label_names is not None:
        lines.append(f"| labels | {', '.join(run.label_names)} |")
    lines += [
        f"| parameters | {parameters:,} |",
        f"| training | {summary.get('steps', '?')} steps, best {summary.get('metric', '?')} at step "
        f"{summary.get('best_step', '?')}, status {run.results.get('status', '?')} |",
        f"| licence | {license} |",
        *([f"| inference | {inference_precision} by default on the CPU (config.json `{DECLARED_PRECISION_KEY}`; "
           f"`precision=\"fp32\"` for fp32) |"] if inference_precision else []),
        "",
        "## Results",
        "",
        "Scores of the shipped weights on the dataset's dev and test splits, as the run's results.json "
        "records them:",
        "",
        *_results_table(run.results),
        "",
        "## Use",
        "",
        "```python",
        "import nlp",
        *use_default,
        f'pipe = nlp.pipeline("{spec.name}", model="{name}")',
        "```",
        "",
        "## Recipe",
        "",
        "The recipe as run (after command-line overrides), from the run directory's recipe.yaml:",
        "",
        "```yaml",
        yaml.safe_dump(run.recipe, sort_keys=False, allow_unicode=True).rstrip() if run.recipe else "# (none recorded)",
        "```",
        "",
        "## Licence",
        "",
        f"The weights: {license}." + (f" Training data: {data_source}." if data_source else ""),
        "",
        "## How it was made",
        "",
        *([how_made.strip(), ""] if how_made.strip() else []),
        "```",
        "nlp finetune RECIPE.yaml                     # writes the run directory",
        f"nlp hub ship RUN_DIR --name {name}    # this folder and its card in nlp/hub/cards.yaml",
        "```",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------- ship

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
         package: str = "nlp", weights: str = "fp16", how_made: str = "",
         inference_precision: str | None = None) -> ShipResult:
    """Write `assets_dir/<name>/` (default: nlp/assets) from a finished fine-tuning run and put its
    card into `cards_file` (default: nlp/hub/cards.yaml) with a `builtin` source (`package`,
    path `<assets_dir name>/<name>`, relative to the package's folder). The card is also
    registered in this process. `license` defaults to the base model's card licence. `weights`:
    "fp16", or "int8" (2-D weights as int8 rows with a scale each; nlp/models/_int8_weights.py).
    `how_made`: Markdown for the model card's "How it was made" (what made the run's base model).
    `inference_precision`: "int8" (or "fp32") written into config.json as the precision pipelines
    and servers run the model in by default (nlp.models.precision): declare int8 only after its
    figures in int8 were measured (`nlp evaluate RUN --data D --precision int8`) and put in `how_made`."""
    import nlp
    from nlp.tasks.datasets import BUILTIN

    if weights not in WEIGHT_FORMATS:
        raise ConfigError(f"weights={weights!r}; valid: {', '.join(WEIGHT_FORMATS)}")
    if inference_precision not in (None, *DECLARABLE_PRECISIONS):
        raise ConfigError(f"inference_precision={inference_precision!r}; valid: {', '.join(DECLARABLE_PRECISIONS)}")
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
    stage = old = None
    try:
        with signals_held():  # a signal between the mkdir and `stage` being set would leak the directory
            stage = temporary_sibling(final, mode=0o755)  # 0o755: other users of the package read it
        write_release(run, stage, name=name, license=license, weights=weights,
                      base_description=base_card.description if base_card is not None else "",
                      data_source=dataset.source if dataset is not None else "", how_made=how_made,
                      inference_precision=inference_precision)
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
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    hub.register_card(card)
    result = ShipResult(name, final, cards, card, digests)
    logger.info("shipped %s: %s (%d files, %.1f MB), card in %s", name, final, len(digests),
                result.total_bytes / 2**20, cards)
    return result
