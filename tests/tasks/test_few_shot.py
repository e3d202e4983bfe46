"""Few-shot classification the SetFit way: k-per-class sampling and pair generation (deterministic
by seed), the two training steps on a tiny model (pairs pull a class together; the head is
scikit-learn's logistic regression), and a `task.few_shot` recipe whose saved model runs through
every layer: `nlp evaluate`, `nlp export` (checked against PyTorch), and `nlp serve` over HTTP."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.recipes import recipe_path
from nlp.tasks.classification.few_shot import FewShotSettings, fit_head, make_pairs, sample_per_class, tune_encoder
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.train.finetune import finetune
from nlp.train.recipe import load_recipe

from tasks._task_fixtures import tiny_config, wordpiece_tokenizer
from train._recipe_fixtures import tiny_overrides

sys.path.insert(0, str(Path(__file__).parents[1] / "deploy"))
import _serve_fixtures as fx  # noqa: E402


def test_k_per_class_is_drawn_by_seed():
    labels = [0] * 30 + [1] * 20 + [2] * 3
    rows = sample_per_class(labels, 5, seed=1)
    assert rows == sorted(rows) and Counter(labels[i] for i in rows) == {0: 5, 1: 5, 2: 3}  # class 2 keeps its 3
    assert sample_per_class(labels, 5, seed=1) == rows and sample_per_class(labels, 5, seed=2) != rows


def test_pairs_are_setfit_pairs_by_seed():
    labels = [0, 0, 0, 1, 1, 2]
    pairs = make_pairs(labels, num_iterations=3, seed=0)
    assert len(pairs) == 2 * len(labels) * 3 and pairs == make_pairs(labels, 3, seed=0) != make_pairs(labels, 3, 1)
    for i, j, target in pairs:
        assert (labels[i] == labels[j]) == (target == 1.0)
        assert i != j or labels.count(labels[i]) == 1  # a lone example pairs with itself only
    per_row = Counter((i, t) for i, _, t in pairs)
    assert set(per_row.values()) == {3}  # each row: one positive and one negative per iteration
    with pytest.raises(Exception, match="two or more classes"):
        make_pairs([1, 1], 2, 0)


TEXTS = ["好吃好吃真好吃", "服务很好很满意", "非常好下次再来", "太难吃了", "服务太差了", "再也不来了"]


def _tiny_model():
    tok = wordpiece_tokenizer(TEXTS)
    torch.manual_seed(0)
    model = ErnieForSequenceClassification(tiny_config(tok.vocab_size, num_labels=2, classifier_pooling="mean"))
    rows = [{**{k: v for k, v in tok(t).items() if k in ("input_ids", "attention_mask", "token_type_ids")},
             "labels": int(i >= 3)} for i, t in enumerate(TEXTS)]
    from nlp.tokenizer.collate import DataCollatorWithPadding

    return model, rows, DataCollatorWithPadding(pad_token_id=tok.pad_token_id)


def test_pairs_pull_each_class_together_and_the_head_is_logistic_regression():
    from nlp.tasks.classification.few_shot import encode

    model, rows, collate = _tiny_model()
    labels = np.array([r["labels"] for r in rows])

    def margin():  # mean cosine within a class minus across classes
        v = torch.nn.functional.normalize(encode(model, rows, collate), dim=1).numpy()
        cos, same = v @ v.T, labels[:, None] == labels[None, :]
        return cos[same & ~np.eye(len(v), dtype=bool)].mean() - cos[~same].mean()

    before = margin()
    settings = FewShotSettings(k=3, num_iterations=6, pair_lr=3e-3, pair_batch_size=6)
    losses = tune_encoder(model, rows, make_pairs(labels.tolist(), 6, 0), collate, settings)
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) and margin() > before + 0.1

    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(60, 8)) + np.repeat(np.eye(3, 8) * 2, 20, axis=0), dtype=torch.float32)
    y = torch.tensor(np.repeat([0, 1, 2], 20))
    head = torch.nn.Linear(8, 3)
    fit_head(head, x, y, c=0.5)
    ours = torch.softmax(head(x), dim=1).detach().numpy()
    theirs = LogisticRegression(C=0.5, max_iter=5000, tol=1e-10).fit(x.numpy(), y.numpy()).predict_proba(x.numpy())
    np.testing.assert_allclose(ours, theirs, atol=2e-3)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("few-shot") / "run"
    recipe = load_recipe(recipe_path("few-shot-reviews"), [
        *tiny_overrides(out), "task.few_shot.k=6", "task.few_shot.num_iterations=2",
        "task.few_shot.label_descriptions={negative: 差评, positive: 好评}", "data.max_eval_samples=24"])
    result = finetune(recipe)
    assert result.status == "finished"
    return out


def test_a_few_shot_run_trains_on_k_per_class_and_saves_a_mean_pooled_classifier(run):
    recipe = (run / "recipe.yaml").read_text(encoding="utf-8")
    assert "few_shot:" in recipe and "k: 6" in recipe
    config = json.loads((run / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["classifier_pooling"] == "mean" and config["architectures"][0].endswith("ForSequenceClassification")
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    # the engine trained on the 12 sampled examples: 2 batches of 8 an epoch
    assert results["summary"]["steps"] == 3


def test_the_saved_model_runs_through_evaluate_export_and_serve(run, tmp_path, capsys):
    from nlp.cli import main
    from nlp.deploy import export_model
    from nlp.deploy.server_config import ServeConfig

    assert main(["evaluate", str(run), "--data", "test", "--max-samples", "16"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert 0.0 <= scores["accuracy"] <= 1.0 and "macro_f1" in scores
    texts = ["这家餐厅的服务非常好，菜也好吃", "太难吃了，再也不来", "一般"]
    torch_out = nlp.pipeline("text-classification", model=str(run))(texts, top_k=None)
    export = export_model(run, tmp_path / "export").out
    onnx_out = nlp.pipeline("text-classification", model=str(export))(texts, top_k=None)
    for a, b in zip(torch_out, onnx_out):
        assert [x["label"] for x in a] == [x["label"] for x in b]
        assert [x["score"] for x in a] == pytest.approx([x["score"] for x in b], abs=1e-4)
    with fx.running(ServeConfig(model=str(run), precision="fp32")) as url:
        answer = httpx.post(url + "/predict", json={"inputs": texts, "parameters": {"top_k": 2}}, timeout=30)
        assert answer.status_code == 200
        assert [[x["label"] for x in row] for row in answer.json()] == [[x["label"] for x in row] for row in torch_out]


def test_recipe_checks_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"task.few_shot.k.*must be >= 1"):
        load_recipe(recipe_path("few-shot-reviews"), [*tiny_overrides(tmp_path / "a"), "task.few_shot.k=0"])
    recipe = load_recipe(recipe_path("few-shot-reviews"), [
        *tiny_overrides(tmp_path / "b"), "task.few_shot.label_descriptions={neutral: 一般}"])
    with pytest.raises(ConfigError, match="names 'neutral', not a label of the data; its labels: negative, positive"):
        finetune(recipe)
