"""Recipe schema: every built-in recipe validates; every problem is reported at once, by key,
before any work starts (section 6 of issue 6)."""

from __future__ import annotations

import json

import pytest

from nlp._common import ConfigError, UnknownNameError
from nlp.commands.finetune import check_model_name
from nlp.recipes import list_recipes, recipe_path
from nlp.train.recipe import load_recipe, recipe_from_dict, recipe_to_dict

from train._recipe_fixtures import RECIPES_DIR, data_overrides

NAMES = list_recipes()


def test_the_built_in_recipes_are_the_repository_recipes():
    # one source of truth: recipes/ in a clone is the package's directory
    assert {p.stem for p in RECIPES_DIR.glob("*.yaml")} == set(NAMES)
    assert {"sentiment-reviews", "ner-peoples-daily", "qa-cmrc2018", "clue-tnews", "clue-iflytek",
            "clue-afqmc", "clue-ocnli"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_recipe_starts_with_its_command(name):
    first = recipe_path(name).read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(f"# nlp finetune recipes/{name}.yaml")


@pytest.mark.parametrize("name", NAMES)
def test_recipe_validates(name, tmp_path):
    recipe = load_recipe(recipe_path(name), data_overrides(name, tmp_path), check_model=check_model_name)
    assert recipe.train.eval.metric != "loss"  # every recipe picks its best model by the task metric


def _base(**sections):
    data = {"task": {"name": "text-classification"},
            "model": {"preset": "ernie-3.0-tiny-pico-v2-zh", "init": "random"},
            "tokenizer": {"train": {"vocab_size": 12000}},
            "data": {"dataset": "reviews-zh"}, "train": {"eval": {"metric": "accuracy"}}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def test_a_good_recipe_builds():
    recipe = recipe_from_dict(_base(train={"optim": {"lr": "3e-4"}}))
    assert recipe.train.optim.lr == 3e-4 and recipe.data.dataset == "reviews-zh"


def test_every_unknown_key_is_reported_at_once_with_did_you_mean():
    bad = _base(model={"prest": "x"}, data={"max_lenght": 64}, train={"optim": {"lrr": 1e-3}, "epoch": 2})
    bad["tokeniser"] = {}
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    msg = str(err.value)
    assert msg.startswith("5 problems")
    for key, hint in (("model.prest", "'preset'"), ("data.max_lenght", "'max_length'"),
                      ("train.optim.lrr", "'lr'"), ("train.epoch", "'epochs'"), ("tokeniser", "'tokenizer'")):
        assert f"{key}: unknown key" in msg and f"Did you mean {hint}" in msg, (key, msg)


def test_wrong_types_name_their_keys():
    bad = _base(data={"max_length": "long", "files": "train.json", "label_names": 3, "long_sentences": "cut"},
                train={"epochs": "many", "data": {"shuffle": "perhaps"}})
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    msg = str(err.value)
    for key in ("data.max_length: expected an integer", "data.files: expected a mapping",
                "data.label_names: expected a list", "train.epochs: expected a number",
                "train.data.shuffle: expected true or false", "data.long_sentences: "):
        assert key in msg, msg


def test_missing_data_files_are_named(tmp_path):
    bad = _base(data={"dataset": None, "files": {"train": str(tmp_path / "nope.jsonl"),
                                                 "dev": str(tmp_path / "dev.jsonl")}})
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    msg = str(err.value)
    assert f"data.files.train: file '{tmp_path / 'nope.jsonl'}' does not exist" in msg
    assert "data.files.dev" in msg
    assert "data.test_split='test' is not among data.files" in msg


def test_unknown_model_dataset_preset_and_task_names_suggest_the_right_one():
    bad = _base(task={"name": "text-clasification"}, model={"preset": None, "init": "pretrained",
                                                           "name": "ernie-3.0-mni-zh"},
                data={"dataset": "reviews-z"})
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad, check_model=check_model_name)
    msg = str(err.value)
    assert "model.name: Unknown model 'ernie-3.0-mni-zh'. Did you mean 'ernie-3.0-mini-zh'?" in msg
    assert "data.dataset: unknown dataset 'reviews-z'. Did you mean 'reviews-zh'?" in msg
    assert "task.name: Unknown task" in msg and "text-classification" in msg
    with pytest.raises(ConfigError, match="model.preset: unknown preset 'ernie-3.0-nan-zh'. Did you mean 'ernie-3.0-nano-zh'"):
        recipe_from_dict(_base(model={"preset": "ernie-3.0-nan-zh"}))
    with pytest.raises(UnknownNameError):
        check_model_name("no-such-model")


def test_inconsistent_sections_are_explained():
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(_base(model={"init": "pretrained"}, tokenizer={"train": None}))
    msg = str(err.value)
    assert "model.init: a preset has no weights" in msg
    assert "tokenizer: the model is built from a preset" in msg


def test_overrides_apply_and_are_checked(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(_base()), encoding="utf-8")  # JSON is YAML
    recipe = load_recipe(path, ["train.optim.lr=2e-4", "data.max_length=64", "model.config.num_hidden_layers=1"])
    assert recipe.train.optim.lr == 2e-4 and recipe.data.max_length == 64
    assert recipe.model.config == {"num_hidden_layers": 1}
    with pytest.raises(ConfigError, match="expected key.sub=value"):
        load_recipe(path, ["train.optim.lr"])
    with pytest.raises(ConfigError, match="train.optim.lrr: unknown key"):
        load_recipe(path, ["train.optim.lrr=1"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_recipe(tmp_path / "missing.yaml")


def test_label_set_mismatch_is_found_before_the_model_is_built(tmp_path):
    from nlp.train.finetune import load_task_data

    recipe = recipe_from_dict(_base(data={"label_names": ["neg", "pos"]}))
    with pytest.raises(ConfigError, match=r"data.label_names \['neg', 'pos'\] does not match the labels of the "
                                          r"data \['negative', 'positive'\]"):
        load_task_data(recipe)
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "很好", "label": "好评"}\n{"text": "很差", "label": "差评"}\n'
                     '{"text": "一般", "label": "中评"}\n', encoding="utf-8")
    recipe = recipe_from_dict(_base(data={"dataset": None, "files": {"train": str(train)},
                                          "dev_split": None, "test_split": None,
                                          "label_names": ["好评", "差评"]}))
    with pytest.raises(ConfigError) as err:
        load_task_data(recipe)
    msg = str(err.value)
    assert msg.startswith("data.label_names:") and f"{train}:3" in msg and "中评" in msg


def test_values_inside_mappings_and_lists_are_checked_by_key():
    bad = _base(data={"files": {"train": None, "dev": ["a"]}, "label_names": ["neg", {"x": 1}, True]},
                model={"config": {"hidden_size": 64}})
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    msg = str(err.value)
    assert "data.files.train: expected a string, got None" in msg
    assert "data.files.dev: expected a string, got ['a']" in msg
    assert "data.label_names[1]: expected a string, got {'x': 1}" in msg
    assert "data.label_names[2]: expected a string, got True (quote it" in msg


def test_bad_values_and_cross_section_problems_are_reported_together():
    """A section with a refused value keeps its good ones, so the checks that need them
    (here: the dataset name) still run in the same pass."""
    bad = _base(data={"max_length": 0, "dataset": "reviews-z"}, tokenizer={"train": {"vocab_size": 5}},
                train={"optim": {"lr": "nan"}})
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    msg = str(err.value)
    assert msg.startswith("4 problems"), msg
    for part in ("data.max_length must be >= 1, got 0", "tokenizer.train.vocab_size must be >= 100, got 5",
                 "train.optim.lr: expected a finite number, got 'nan'",
                 "data.dataset: unknown dataset 'reviews-z'. Did you mean 'reviews-zh'?"):
        assert part in msg, msg


def test_the_model_config_is_checked_at_validation(tmp_path):
    """An absurd architecture is refused when the recipe is read, not after the data is."""
    with pytest.raises(ConfigError, match=r"model.config: this config describes a model of about [\d,]+ parameters"):
        recipe_from_dict(_base(model={"config": {"num_hidden_layers": 10**9}}))
    with pytest.raises(ConfigError, match="model.config: num_hidden_layers must be a positive int, got 2.5"):
        recipe_from_dict(_base(model={"config": {"num_hidden_layers": 2.5}}))
    model_dir = tmp_path / "huge"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"hidden_size": 32, "num_attention_heads": 2,
                                                       "intermediate_size": 10**12}))
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(_base(model={"preset": None, "name": str(model_dir)}, tokenizer={"train": None}))
    assert f"model: {model_dir / 'config.json'}: this config describes a model of about" in str(err.value)


def test_one_yaml_loader_for_fine_tuning_and_pretraining(tmp_path):
    from nlp.train.pretrain import load_pretrain_recipe

    for load in (load_recipe, load_pretrain_recipe):
        with pytest.raises(ConfigError, match="does not exist"):
            load(tmp_path / "missing.yaml")
        listed = tmp_path / "list.yaml"
        listed.write_text("- a\n- b\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="expected a mapping of sections"):
            load(listed)
        gbk = tmp_path / "gbk.yaml"
        gbk.write_bytes("train: {output_dir: 运行}\n".encode("gbk"))
        with pytest.raises(ConfigError, match="is not UTF-8 text"):
            load(gbk)
        good = tmp_path / "good.yaml"
        good.write_text("train: {output_dir: out}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"train.optim.lr: expected a finite number, got 'inf'"):
            load(good, ["train.optim.lr=inf"])


def test_task_knobs_live_in_the_task_section_and_old_data_keys_move_there(caplog):
    """The task's own settings class types the task section; old recipes' data.doc_stride & co.
    still work (moved, with a deprecation warning) or are refused naming the new key."""
    qa = _base(task={"name": "qa", "doc_stride": 64, "max_answer_length": 20})
    recipe = recipe_from_dict(qa)
    assert (recipe.task.name, recipe.task.doc_stride, recipe.task.max_answer_length) == ("question-answering", 64, 20)
    with caplog.at_level("WARNING"):
        old = recipe_from_dict(_base(task={"name": "qa"}, data={"doc_stride": 32, "max_length": 128}))
    assert old.task.doc_stride == 32 and "data.doc_stride is deprecated" in caplog.text and "task.doc_stride" in caplog.text
    ner = recipe_from_dict(_base(task={"name": "ner"}, data={"long_sentences": "truncate"}))
    assert ner.task.long_sentences == "truncate" and ner.task.label_all_tokens is False
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(_base(data={"doc_stride": 32}, task={"doc_strid": 3}))
    msg = str(err.value)
    assert "data.doc_stride: moved to task.doc_stride, which text-classification does not have" in msg
    assert "task.doc_strid: unknown key. Valid keys here: name, few_shot." in msg
    with pytest.raises(ConfigError, match=r"task.doc_strid: unknown key\. Did you mean 'doc_stride'\?"):
        recipe_from_dict(_base(task={"name": "qa", "doc_strid": 3}))
    with pytest.raises(ConfigError, match=r"task.doc_stride \(128\) must be smaller than data.max_length \(64\)"):
        recipe_from_dict(_base(task={"name": "qa"}, data={"max_length": 64}))
    with pytest.raises(ConfigError, match="data.doc_stride: moved to task.doc_stride, which this recipe also sets"):
        recipe_from_dict(_base(task={"name": "qa", "doc_stride": 16}, data={"doc_stride": 32}))
    with pytest.raises(ConfigError, match="long_sentences: 'cut' is not one of"):
        recipe_from_dict(_base(task={"name": "ner", "long_sentences": "cut"}))
    assert recipe_to_dict(recipe)["task"] == {"name": "question-answering", "doc_stride": 64, "max_answer_length": 20}


def test_a_model_free_task_is_not_fine_tuned():
    from nlp.tasks import TASKS, TaskSpec, register_task

    class Echo(TaskSpec):
        name = "echo-words"
        needs_model = False

    register_task(Echo())
    try:
        with pytest.raises(ConfigError, match="echo-words needs no model and is not fine-tuned"):
            recipe_from_dict(_base(task={"name": "echo-words"}))
    finally:
        TASKS.pop("echo-words")
