"""Every recipe runs a few steps of a tiny model (torchtune's tests/recipes habit), and the
run directory holds what `nlp evaluate` / `nlp predict` / pipelines need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nlp

from nlp.recipes import list_recipes, recipe_path
from nlp.tasks import get_task
from nlp.train.finetune import finetune
from nlp.train.recipe import load_recipe

from train._recipe_fixtures import data_overrides, tiny_overrides

@pytest.mark.parametrize("name", list_recipes())
def test_recipe_runs_a_few_steps(name, tmp_path):
    out = tmp_path / "run"
    recipe = load_recipe(recipe_path(name), [*tiny_overrides(out), *data_overrides(name, tmp_path)])
    result = finetune(recipe)
    assert result.status == "finished" and result.summary["steps"] == 3
    key = recipe.train.eval.metric  # what the recipe picks its best checkpoint by: the task's main metric
    assert key != "loss" and 0.0 <= result.dev[key] <= 100.0  # CMRC2018's scores are percentages
    if recipe.data.test_split is not None:
        assert key in result.test
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["dev"] == pytest.approx(result.dev)
    for f in ("recipe.yaml", "tokenizer/tokenizer_config.json", "model/config.json",
              "model/model.safetensors", "model/tokenizer_config.json", "metrics.jsonl", "summary.json"):
        assert (out / f).is_file(), f
    if get_task(recipe.task.name).has_label_set:
        labels = (out / "labels.txt").read_text(encoding="utf-8").split()
        config = json.loads((out / "model/config.json").read_text(encoding="utf-8"))
        assert [config["id2label"][str(i)] for i in range(len(labels))] == labels


def test_ner_with_crf_scores_entities_and_the_pipeline_finds_them(tmp_path):
    from nlp.tasks import build_pipeline as pipeline

    out = tmp_path / "run"
    # the recipe says `task.use_crf: false`; the command line's true wins there and builds the CRF
    recipe = load_recipe(recipe_path("ner-peoples-daily"), [*tiny_overrides(out, steps=4), "task.use_crf=true"])
    result = finetune(recipe)
    assert set(result.dev) >= {"loss", "precision", "recall", "f1"}
    config = json.loads((out / "model/config.json").read_text(encoding="utf-8"))
    assert config["use_crf"] is True
    ner = pipeline("token-classification", model=out / "model")
    text = "江泽民在北京会见了克林顿。"
    for ent in ner(text):  # whatever a 4-step model finds, its offsets are consistent
        assert text[ent["start"]:ent["end"]] == ent["text"]


def test_a_crf_asked_for_in_two_places_must_agree():
    """task.use_crf and model.config.use_crf both reach the head's config: a recipe where they
    differ is refused when it is read, naming both, instead of one silently winning."""
    from nlp._common import ConfigError

    with pytest.raises(ConfigError, match=r"model\.config\.use_crf=False contradicts the task section, "
                                          r"which makes use_crf=True; set it in one place"):
        load_recipe(recipe_path("ner-zh"), ["task.use_crf=true", "model.config.use_crf=false"])
    agreeing = load_recipe(recipe_path("ner-zh"), ["task.use_crf=true", "model.config.use_crf=true"])
    assert agreeing.task.use_crf is True and agreeing.model.config["use_crf"] is True


def test_packed_batching_trains_classification(tmp_path):
    out = tmp_path / "run"
    recipe = load_recipe(recipe_path("sentiment-reviews"),
                         [*tiny_overrides(out), "train.data.batching=packed", "train.data.pack_max_length=128",
                          "train.data.batch_size=2"])
    result = finetune(recipe)
    assert result.summary["steps"] == 3 and "accuracy" in result.dev


def test_same_recipe_same_seed_same_run(tmp_path):
    """The new classifier head is drawn from train.seed: two runs of one recipe give the same
    loss curve and scores (the shipped ernie-tiny-zh, so no tokenizer training is involved)."""
    model_dir = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"

    def run(name, seed):
        out = tmp_path / name
        recipe = load_recipe(recipe_path("sentiment-reviews"), [
            f"model.name={model_dir}", f"tokenizer.name={model_dir}",
            "train.max_steps=4", "train.data.batch_size=8", "train.eval.every_steps=null",
            "data.max_train_samples=32", "data.max_eval_samples=16", "train.log.every_steps=1",
            "train.log.progress_bar=false", "train.log.tensorboard=false", "train.log.plots=false",
            f"train.seed={seed}", f"train.output_dir={out}"])
        result = finetune(recipe)
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        return [r["loss"] for r in rows if r["type"] == "train"], result.dev

    losses_a, dev_a = run("a", 7)
    losses_b, dev_b = run("b", 7)
    assert len(losses_a) == 4 and losses_a == losses_b and dev_a == dev_b
    assert run("c", 8)[0] != losses_a  # the seed matters
