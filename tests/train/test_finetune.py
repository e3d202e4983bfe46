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


def test_ner_with_a_gazetteer_learns_its_ids_and_carries_it_to_every_later_use(tmp_path, caplog):
    """task.gazetteer: the model gets a token type row per gazetteer id (trained), the gazetteer
    is saved with the tokenizer of the run and of the model, the pipeline and the ONNX export
    compute the same ids and the same logits, and a second, different gazetteer is refused."""
    import numpy as np
    import torch

    from nlp._common import ConfigError
    from nlp.deploy.export import export_model
    from nlp.tasks import build_pipeline as pipeline
    from nlp.tasks.char_windows import CharacterRows
    from nlp.tasks.ner.heads import ErnieForTokenClassification
    from nlp.tokenizer import Gazetteer, load_tokenizer

    names = tmp_path / "names.tsv"
    names.write_text("江泽民\tPER\n克林顿\tPER\n北京\tLOC\n中国\tLOC\n人民日报\tORG\n", encoding="utf-8")
    out = tmp_path / "run"
    finetune(load_recipe(recipe_path("ner-peoples-daily"), [*tiny_overrides(out, steps=4), f"task.gazetteer={names}",
                                                             "task.gazetteer_train_entities=true"]))
    model_dir = out / "model"
    gazetteer = load_tokenizer(model_dir).gazetteer
    assert gazetteer == load_tokenizer(out / "tokenizer").gazetteer
    # the file's words and types, then the 48 training rows' entities as types of their own
    assert gazetteer.types == ("LOC", "ORG", "PER", "train-LOC", "train-ORG", "train-PER")
    for word, type_ in Gazetteer.read(names).words.items():  # the training data's type wins where it has one
        assert gazetteer.words[word] == type_ or gazetteer.words[word].startswith("train-")
    assert sum(t.startswith("train-") for t in gazetteer.words.values()) > 10
    model = ErnieForTokenClassification.from_pretrained(model_dir)
    assert model.config.type_vocab_size == gazetteer.num_type_ids == 25
    rows = model.backbone.embeddings.token_type.weight
    loc_b = 1 + 4 * gazetteer.types.index("train-LOC")  # People's Daily's first sentences name places
    assert not torch.equal(rows[loc_b], rows[0])  # grown as copies of row 0, then trained

    texts = ["江泽民在伦敦会见了克林顿。", "中国人民日报社论"]
    ner = pipeline("token-classification", model=model_dir)
    chars = [list(t) for t in texts]
    batch = CharacterRows.of(ner.tokenizer, chars, max_length=32, stride=8)
    per = gazetteer.types.index(gazetteer.words["江泽民"])
    assert batch.features[0]["token_type_ids"][1:4] == [1 + 4 * per + p for p in (0, 1, 2)]  # B, I, E
    export_model(model_dir, tmp_path / "export")
    assert (tmp_path / "export" / "gazetteer.tsv.gz").is_file()
    onnx = nlp.pipeline("token-classification", model=tmp_path / "export")  # on onnxruntime
    assert onnx.tokenizer.gazetteer == gazetteer
    for a, b in zip(ner._forward(batch.features), onnx._forward(batch.features)):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), atol=1e-4)
    assert [[(e["type"], e["start"], e["end"]) for e in found] for found in onnx(texts)] == \
        [[(e["type"], e["start"], e["end"]) for e in found] for found in ner(texts)]

    # training the model further without naming its gazetteer keeps it, and says that the rows
    # of the data its entities came from now find themselves there
    with caplog.at_level("WARNING", logger="nlp.train.finetune"):
        finetune(load_recipe(recipe_path("ner-peoples-daily"), [
            f"model.name={model_dir}", "train.max_steps=1", "data.max_train_samples=8", "data.max_eval_samples=8",
            "train.eval.every_steps=null", "train.log.progress_bar=false", "train.log.tensorboard=false",
            "train.log.plots=false", f"train.output_dir={tmp_path / 'more'}"]))
    assert "holds the entities of the data it was trained on" in caplog.text
    assert load_tokenizer(tmp_path / "more" / "model").gazetteer == gazetteer

    other = tmp_path / "other.tsv"
    other.write_text("上海\tLOC\n", encoding="utf-8")
    again = load_recipe(recipe_path("ner-peoples-daily"), [
        f"model.name={model_dir}", f"task.gazetteer={other}", "train.max_steps=1", "data.max_train_samples=8",
        f"train.output_dir={tmp_path / 'again'}"])
    with pytest.raises(ConfigError, match=r"the task section's gazetteer \(Gazetteer\(1 words.*differs from the one "
                                          r"the model was trained with \(Gazetteer\(\d+ words"):
        finetune(again)


def test_lexical_analysis_learns_a_gazetteer_too(tmp_path):
    from nlp.tasks import build_pipeline as pipeline
    from nlp.tokenizer import Gazetteer, load_tokenizer

    names = tmp_path / "names.tsv"
    names.write_text("江泽民\tnr\n北京\tns\n", encoding="utf-8")
    out = tmp_path / "run"
    finetune(load_recipe(recipe_path("lexical-peoples-daily"), [*tiny_overrides(out, steps=2), f"task.gazetteer={names}"]))
    assert load_tokenizer(out / "model").gazetteer == Gazetteer.read(names)
    assert json.loads((out / "model/config.json").read_text(encoding="utf-8"))["type_vocab_size"] == 9
    lac = pipeline("lexical-analysis", model=out / "model")
    # types nr (ids 1-4: B, I, E, S) and ns (5-8); the pipeline's rows: one token per character
    chars = lac.tokenizer(list("江泽民在北京"), is_split_into_words=True, unspaced_words=True)
    assert chars["token_type_ids"] == [0, 1, 2, 3, 0, 5, 7, 0]
    assert lac.tokenizer("江泽民在北京")["token_type_ids"] == [0, 1, 0, 5, 0]  # raw text: the hybrid's words
    assert "".join(w["word"] for w in lac("江泽民在北京")["words"]) == "江泽民在北京"


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
