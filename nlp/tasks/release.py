"""A fine-tuned run as a release: its model in fp16 with its tokenizer, and a model card (README.md)
written from the run itself, never typed by hand.

`nlp hub ship` (nlp/ship.py) reads a run with `read_finetuned_run`, writes the release folder with
`write_release`, then records the files in the hub's cards::

    run = read_finetuned_run("runs/ner-zh")          # model/, results.json, recipe.yaml
    write_release(run, "nlp/assets/ernie-tiny-zh-ner", name="ernie-tiny-zh-ner", license="mit")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nlp._common import ConfigError
from nlp.models.release import write_release_copy
from nlp.tasks.model_dirs import find_model_dir
from nlp.tasks.registry import get_task, task_of_architecture

__all__ = ["FinetunedRun", "read_finetuned_run", "write_release", "model_card_markdown"]


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
                  how_made: str = "") -> None:
    """Write the release folder: fp16 (or int8-row, `weights="int8"`) weights, config.json (label
    names included), the tokenizer files and README.md (`model_card_markdown`)."""
    spec = get_task(run.task)
    model = spec.head.from_pretrained(run.model_dir)
    write_release_copy(model, run.model_dir, dst, weights=weights)
    spec.copy_model_files(run.model_dir, dst)  # the task's own files (a lexical model's word lexicon)
    params = sum(p.numel() for p in model.parameters())
    text = model_card_markdown(run, name=name, license=license, parameters=params,
                               base_description=base_description, data_source=data_source, weights=weights,
                               how_made=how_made)
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
                        how_made: str = "") -> str:
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
