"""Every benchmark runs from a fresh clone: its quickest mode runs to the end here (the cheap ones
by default, the ones that train or time many rows marked slow), and a benchmark that needs a run
directory it cannot build says the one command that makes it. The figures are not checked (timing
on a shared machine is noise); that each script gets through every side is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

# script -> its quickest mode's arguments; slow: trains, or times every row / side in processes
QUICK = {
    "tokenizer.py": (["--quick"], False),
    "padding.py": (["--quick"], False),
    "package_size.py": ([], False),
    "int8_gemm.py": (["--quick"], False),
    "hub_serve.py": (["--quick"], True),
    "compress.py": (["--quick"], True),
    "embed.py": (["--quick"], True),
    "rerank_speed.py": (["--quick"], True),  # each side in its own process; exports the reranker twice
    "inference.py": (["--quick"], True),
    "pipeline_speed.py": (["--quick"], False),  # the 2.9 MB shipped model on PyTorch and as its int8 export
    "extraction_speed.py": (["--quick"], True),  # Taskflow's side too where the Paddle side venv is
    "extraction_batching.py": (["--quick"], True),
    "extraction_quality.py": (["--quick"], True),  # builds zh-ner-uie and peoples-daily-1998-uie
    "model.py": (["--quick", "--rounds", "1"], True),
    "serve.py": (["--quick"], True),
    "finetune.py": (["--quick"], True),
    "few_shot.py": (["--quick"], True),  # trains: few-shot, fine-tuning and TF-IDF at k=2, zero-shot
    "quality.py": (["--quick"], True),
    "pretrain_vs_random.py": (["--quick"], True),
    "install_footprint.py": (["--quick"], True),  # builds two fresh venvs with pip
    "correction.py": (["--quick"], True),  # each side in its own process; pycorrector loads its word lists
}
# scripts that read what only a run makes (a trained model, a profile): they run on those, and are
# checked by their own tests (tests/test_benchmarks_*.py) or by the runs the docs describe
NEEDS_A_RUN = {"retrieval.py", "lexical.py", "lexical_profile.py", "lexical_examples.py", "sharding_memory.py"}


def test_every_benchmark_has_a_quick_mode_here_or_is_listed_as_needing_a_run():
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(QUICK) | NEEDS_A_RUN, "a benchmark added or removed: list its quickest mode in QUICK"


def _run(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(BENCH / script), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=3000)


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if slow else s
                                    for s, (_, slow) in QUICK.items()])
def test_the_quickest_mode_runs_from_a_fresh_checkout(script, tmp_path):
    """In an empty working directory (no runs/, no exports): what it needs, it builds."""
    done = _run(script, QUICK[script][0], tmp_path)
    assert done.returncode == 0, f"{script} {' '.join(QUICK[script][0])}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{script} printed nothing"


def _compress():
    return load_benchmark("compress.py", "bench_compress_quick")


def test_compress_names_the_command_that_makes_a_missing_run_and_quick_stands_in(tmp_path):
    compress = _compress()
    task = compress.TASKS["sentiment"]
    with pytest.raises(SystemExit, match=r"--plain-run 'runs/student-plain' does not exist: make it with nlp finetune "
                                         r"recipes/sentiment-reviews\.yaml .*train\.output_dir=runs/student-plain"):
        compress._run_model(Path("runs/student-plain"), "--plain-run", False, tmp_path, task, None)
    stand_in = compress._run_model(tmp_path / "missing", "--distilled-run", True, tmp_path, task, None)
    import json

    config = json.loads((stand_in / "config.json").read_text(encoding="utf-8"))
    assert config["num_hidden_layers"] == 2
    from nlp.tokenizer import load_tokenizer

    assert load_tokenizer(stand_in).vocab_size > 1000
