"""`nlp serve` at start-up: what it cannot serve on (a port in use, a host not this machine's) is
one line and exit 2 before the model loads, and `--port 0` serves on the port it prints. Every
server listens on 127.0.0.1."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _serve_fixtures as fx

from cli_server import nlp_env

from nlp._common import ConfigError
from nlp.deploy.server_model import check_servable

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return fx.build_models(tmp_path_factory.mktemp("served"))["text-classification"]


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nlp", "serve", *args], capture_output=True, text=True,
                          timeout=240, env=nlp_env())


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    """The one line `nlp serve` exits 2 with, having printed nothing else (no "serving ...")."""
    assert r.returncode == 2, f"rc {r.returncode}:\n{r.stderr}"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_naming_port_before_the_model_loads(model, workers):
    """It used to print "serving ... on", start loading the model, then uvicorn's bind failed and
    the process died with SIGABRT ("terminate called without an active exception", exit 134)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _one_line_error(_serve(str(model), "--host", "127.0.0.1", "--port", str(port),
                                      "--workers", workers, "--precision", "fp32"))
    assert f"--port {port} on 127.0.0.1 is in use" in line
    assert "pick another --port, or --port 0 for a free one" in line


def test_a_host_that_cannot_be_listened_on_is_one_line_naming_host(model):
    line = _one_line_error(_serve(str(model), "--host", "999.1.1.1", "--port", "0", "--precision", "fp32"))
    assert "--host '999.1.1.1' cannot be listened on here" in line and "127.0.0.1" in line


def test_port_0_serves_on_the_port_it_prints(model):
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", str(model), "--host", "127.0.0.1", "--port", "0",
                             "--precision", "fp32"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**nlp_env(), "PYTHONUNBUFFERED": "1"})
    try:
        first = proc.stderr.readline()
        found = re.search(r" on http://127\.0\.0\.1:(\d+) ", first)
        assert found and found.group(1) != "0", first
        url = f"http://127.0.0.1:{found.group(1)}"
        while True:  # bounded by the test's timeout
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("device", ["tpu", "cuda"])
def test_a_device_this_machine_lacks_is_one_line_naming_device(model, device):
    """They were torch's AssertionError ("Torch not compiled with CUDA enabled") and RuntimeError
    ("Expected one of cpu, cuda, ..."), with tracebacks."""
    import torch

    if device == "cuda" and torch.cuda.is_available():
        device = f"cuda:{torch.cuda.device_count()}"  # one past the last
    line = _one_line_error(_serve(str(model), "--host", "127.0.0.1", "--port", "0", "--device", device))
    assert line.startswith(f"error: --device {device!r} is not a device of this machine; available here: cpu")
    with pytest.raises(ConfigError, match=r"^--device 'tpu' is not a device of this machine; available here: cpu"):
        check_servable(model, device="tpu")
