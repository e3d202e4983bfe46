"""`nlp serve` at start-up: what it cannot serve on (a port in use, a host not this machine's, a
device it lacks) is one line and exit 2 before the model loads; `--port 0` serves on the port it
prints; the model is reported by the name it was given, never by its path in the hub's cache.
Every server listens on 127.0.0.1."""

from __future__ import annotations

import json
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

from cli_server import nlp_env, wait_until_healthy

from nlp._common import ConfigError
from nlp.deploy.server_config import ServeConfig
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
        wait_until_healthy(proc, url)
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


def test_info_and_the_log_name_a_hub_model_as_given_not_its_cache_path(tmp_path):
    """/info (open without --token) and the start-up lines said
    "/root/.cache/nlp/hub/files--ernie-tiny-zh-ner/snapshots/builtin-sha-.../"."""
    cache = tmp_path / "hub-cache"
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "serve", "ernie-tiny-zh-ner", "--host", "127.0.0.1",
                             "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**nlp_env({"NLP_HUB_CACHE": str(cache)}), "PYTHONUNBUFFERED": "1"})
    try:
        first = proc.stderr.readline()
        assert first.startswith("serving ernie-tiny-zh-ner (token-classification) on "), first
        url = "http://127.0.0.1:" + re.search(r":(\d+) ", first).group(1)
        wait_until_healthy(proc, url)
        info = httpx.get(url + "/info", timeout=30)
        assert info.json()["model"] == "ernie-tiny-zh-ner"
        assert str(cache) not in info.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = first + proc.stderr.read()
        assert "model ready: ernie-tiny-zh-ner (" in log and str(cache) not in log, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_info_reports_the_name_before_during_and_after_a_failed_load(model):
    """The name given (ServeConfig.name) while loading and once loaded; a load error's mention of
    the directory it was resolved to says the name instead."""
    config = ServeConfig(model=str(model), name="my-model", precision="fp32")
    with fx.running(config) as url:
        assert httpx.get(url + "/info", timeout=30).json()["model"] == "my-model"

    def broken(config):
        raise ConfigError(f"{config.model}/config.json is damaged")

    with fx.running(config, loader=broken, wait_ready=False) as url:
        while (info := httpx.get(url + "/info", timeout=30).json())["status"] == "loading":  # bounded by the timeout
            time.sleep(0.05)
        assert info["model"] == "my-model" and info["error"] == "ConfigError: my-model/config.json is damaged"
        assert str(model) not in json.dumps(info)


def test_serve_without_a_model_names_the_task_default(isolated_hub):
    from nlp.commands._models import model_and_name

    directory, name = model_and_name(None, "ner")
    assert name == "ernie-tiny-zh-ner" and Path(directory).is_dir() and str(isolated_hub) in directory
    assert model_and_name(directory, None) == (directory, directory)  # a directory stays as given
