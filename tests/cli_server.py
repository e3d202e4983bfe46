"""The `nlp` command as a user runs it, for the CLI tests: `run_nlp` (a command that must exit 0)
and `cli_server` (`nlp serve` on a free loopback port, ready when /health answers 200
(`wait_until_healthy`), stopped with SIGTERM, which must exit 0, when the block ends); `nlp_env`
is the environment both use."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

import nlp


def nlp_env(extra: Mapping[str, str] = (), paths: Sequence[str | Path] = ()) -> dict[str, str]:
    """This process's environment, offline, with this checkout (and `paths`) importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(nlp.__file__).parents[1]), *map(str, paths),
                                         env.get("PYTHONPATH", "")])
    env["NLP_OFFLINE"] = "1"
    env.update(extra)
    return env


def run_nlp(*args: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """`nlp ARGS...` in a subprocess; it must exit 0 (else the test fails with its output)."""
    proc = subprocess.run([sys.executable, "-m", "nlp", *args], capture_output=True, text=True,
                          env=env if env is not None else nlp_env(), timeout=timeout)
    assert proc.returncode == 0, f"nlp {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def finetune_few_steps(recipe: str, output_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """`nlp finetune` of a shipped recipe on the shipped ernie-tiny-zh: 3 steps of 16 examples,
    24 evaluated, fp32, no logs or plots; `overrides` go last."""
    return run_nlp("finetune", str(Path(nlp.__file__).parent / "recipes" / f"{recipe}.yaml"),
                   f"model.name={Path(nlp.__file__).parent / 'assets' / 'ernie-tiny-zh'}",
                   f"train.output_dir={output_dir}", "train.max_steps=3", "data.max_train_samples=48",
                   "data.max_eval_samples=24", "train.data.batch_size=16", "train.eval.every_steps=3",
                   "train.mixed_precision=no", "train.log.progress_bar=false", "train.log.tensorboard=false",
                   "train.log.plots=false", *overrides)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(proc: subprocess.Popen, url: str, timeout: float = 300) -> None:
    """Return once `url`/health answers 200; fail with the server's stderr if it exits first,
    or once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not get ready"
        time.sleep(0.2)


@contextlib.contextmanager
def cli_server(target: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
               ready_timeout: float = 300, cwd: str | Path | None = None) -> Iterator[str]:
    """Yield the base URL of `nlp serve TARGET ARGS...` (run in `cwd`) once it is ready."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", target, "--host", "127.0.0.1",
                             "--port", str(port), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        wait_until_healthy(proc, url, ready_timeout)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=60) == 0, proc.communicate()[1]
        finally:
            if proc.poll() is None:
                proc.kill()
