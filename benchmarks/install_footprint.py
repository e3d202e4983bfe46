"""What `pip install nlp-zh` (the core, no extras) costs beside `pip install transformers`:
packages installed, site-packages size, cold import time; and that the core runs
`nlp.pipeline("ner")` offline without importing a module of any extra.

    python benchmarks/install_footprint.py                 # builds both venvs in a temp dir (minutes)
    python benchmarks/install_footprint.py --venvs DIR     # builds them in DIR, or reuses them there
    python benchmarks/install_footprint.py --quick         # one import round instead of five

Each side is a fresh venv (`python3 -m venv`) where `pip install torch==VERSION` runs first (the
version installed here; pip's configured find-links or index then give the CPU build, where a
bare install would pull the multi-GB CUDA one), then `pip install ROOT` or `pip install
transformers`. Cold import: a new interpreter per round, the sides alternating (a load change on
a shared machine hits both), the median of the rounds; `python -X importtime` names the heaviest
top-level imports. Timings on a busy machine are noise: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import best_of_rounds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6

# what each side imports, timed cold: the package itself, then what loads the model classes
IMPORTS = {
    "nlp": {"import": "import nlp", "models": "import nlp.auto"},
    "transformers": {"import": "import transformers", "models": "from transformers import AutoModel"},
}
INSTALL = {"nlp": [str(ROOT)], "transformers": ["transformers"]}
# modules of the extras (nlp/_extras.py) and transformers: the core's pipeline imports none
CORE_CHECK = """
import json, sys
import nlp
from nlp._extras import EXTRAS
out = nlp.pipeline("ner")("江泽民在北京会见了客人")
loaded = sorted({m.split(".")[0] for m in sys.modules} & {*EXTRAS, "transformers", "pandas", "pyarrow"})
print(json.dumps({"entities": [(e["type"], e["text"]) for e in out], "extra_modules": loaded}))
"""


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def build_venv(venv: Path, side: str, torch_version: str) -> float:
    """The venv of one side (skipped when it is there already); seconds spent installing."""
    if _python(venv).exists() and (venv / ".complete").exists():
        return 0.0
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(_python(venv)), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"torch=={torch_version}"], check=True)
    subprocess.run([*pip, *INSTALL[side]], check=True)
    (venv / ".complete").write_text("")
    return time.perf_counter() - started


def packages(venv: Path) -> list[str]:
    out = subprocess.run([str(_python(venv)), "-m", "pip", "list", "--format=json"], check=True,
                         capture_output=True, text=True).stdout
    return sorted(p["name"] for p in json.loads(out))


def site_packages_bytes(venv: Path) -> int:
    site = next((venv / "lib").glob("python3*/site-packages"))
    return sum(p.lstat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())


def import_seconds(venv: Path, statement: str) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)  # the venv's own install, not a checkout on the path
    started = time.perf_counter()
    subprocess.run([str(_python(venv)), "-c", statement], check=True, env=env, cwd=venv)
    return time.perf_counter() - started


def heaviest_imports(venv: Path, statement: str, n: int = 6) -> list[tuple[str, float]]:
    """The packages (top-level names, wherever imported from) with the largest cumulative import
    time (`-X importtime`), in seconds: where a cold import's time goes."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    err = subprocess.run([str(_python(venv)), "-X", "importtime", "-c", statement], check=True, env=env,
                         cwd=venv, capture_output=True, text=True).stderr
    top: dict[str, float] = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| \s*(\S+)", line)
        if m and "." not in m.group(2) and not m.group(2).startswith("_"):  # a package, not a submodule
            top[m.group(2)] = max(top.get(m.group(2), 0.0), int(m.group(1)) / 1e6)
    return sorted(((name, round(s, 3)) for name, s in top.items()), key=lambda item: -item[1])[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venvs", type=Path, default=None, help="where the venvs live (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="one import round (checks the script runs)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch_version = importlib.metadata.version("torch").split("+")[0]
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="nlp-footprint-") as tmp:
        where = args.venvs or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        venvs = {side: where / f"venv-{side}" for side in INSTALL}
        report: dict = {"torch": torch_version, "rounds": rounds, "sides": {}}
        for side, venv in venvs.items():
            spent = build_venv(venv, side, torch_version)
            names = packages(venv)
            report["sides"][side] = {"install_s": round(spent, 1), "packages": len(names), "package_names": names,
                                     "site_packages_mb": round(site_packages_bytes(venv) / MB, 1)}
        for what in ("import", "models"):
            for side in venvs:  # warm the page cache: "cold" is a new interpreter, not a cold disk
                import_seconds(venvs[side], IMPORTS[side][what])
            times: dict[str, list[float]] = {side: [] for side in venvs}
            best_of_rounds(list(venvs), rounds, lambda side, r: import_seconds(venvs[side], IMPORTS[side][what]),
                           better=lambda new, old: new < old,
                           on_result=lambda side, r, t: times[side].append(t))
            for side in venvs:
                report["sides"][side][f"{what}_s"] = round(statistics.median(times[side]), 3)
                report["sides"][side][f"{what}_heaviest"] = heaviest_imports(venvs[side], IMPORTS[side][what])
        env = {**os.environ, "NLP_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        env.pop("PYTHONPATH", None)
        check = subprocess.run([str(_python(venvs["nlp"])), "-c", CORE_CHECK], env=env, cwd=where,
                               capture_output=True, text=True)
        report["core_ner_offline"] = (json.loads(check.stdout.strip().splitlines()[-1]) if check.returncode == 0
                                      else {"error": check.stderr.strip().splitlines()[-1:]})

    print(json.dumps(report, ensure_ascii=False, indent=1))
    nlp_side, tf_side = report["sides"]["nlp"], report["sides"]["transformers"]
    print(f"\n{'':34}{'nlp-zh (core)':>16}{'transformers':>16}")
    for key, label in (("packages", "packages (pip list)"), ("site_packages_mb", "site-packages, MB"),
                       ("import_s", "cold `import` (median), s"), ("models_s", "cold import of AutoModel, s")):
        print(f"{label:34}{nlp_side[key]:>16}{tf_side[key]:>16}")
    print(f"(`import nlp` vs `import transformers`; then `import nlp.auto` vs `from transformers import AutoModel`;"
          f" torch {torch_version} on both sides, {rounds} round(s))")
    print(f"core nlp.pipeline('ner') offline: {report['core_ner_offline']}")


if __name__ == "__main__":
    main()
