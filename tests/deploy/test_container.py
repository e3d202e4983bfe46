"""The server's image (Containerfile), built and run here with rootful podman.

No container registry is needed: the base is a Debian rootfs made with `mmdebstrap` from the
Debian mirror and imported into podman, passed as the `BASE` build argument; the CPU torch wheel
comes from pip's own configuration (`pip download`) into the build context's wheels/. The image
runs with `--network=host`; the test asks `/health` and `/predict` from the host on 127.0.0.1,
stops the container with SIGTERM and checks that the server drained and exited 0.

podman runs with its configuration in a cache directory ($NLP_CONTAINER_CACHE, default
~/.cache/nlp/container-test), which also keeps the rootfs tarball, the base image and the build's
layer cache between runs: runc (crun refuses hybrid cgroup set-ups), ulimits that an
unprivileged host grants, overlay storage under that directory. From scratch it takes the
rootfs (a couple of minutes) and the build (a few more: torch's wheel is most of it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("NLP_CONTAINER_CACHE") or Path.home() / ".cache" / "nlp" / "container-test")
SUITE = "bookworm"  # its python3 is 3.11: the torch wheel below is picked for it
PYTHON_VERSION = "3.11"
MIRROR = os.environ.get("NLP_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = "python3,python3-venv,ca-certificates,passwd"  # passwd: useradd for the non-root user
BASE_TAG = f"localhost/nlp-test-debian:{SUITE}"
IMAGE = "localhost/nlp-serve:test"

_missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(bool(_missing), reason=f"{' and '.join(_missing)} not installed (apt-get install podman runc "
                                              "mmdebstrap; .ci/run installs them)"),
    pytest.mark.timeout(2400),  # from scratch: the rootfs, then torch into the image
]


def _podman_env() -> dict[str, str]:
    (CACHE / "storage").mkdir(parents=True, exist_ok=True)
    conf, storage = CACHE / "containers.conf", CACHE / "storage.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                    '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
    storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{CACHE / "storage"}"\n'
                       f'runroot = "{CACHE / "run"}"\n')
    return {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


def _podman(env: dict, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])} ... exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def _base_image(env: dict) -> None:
    """The Debian base: imported from a cached rootfs tarball, made by mmdebstrap when absent."""
    if _podman(env, "image", "exists", BASE_TAG, check=False).returncode == 0:
        return
    tarball = CACHE / f"rootfs-{SUITE}-minbase.tar"
    if not tarball.exists():
        partial = tarball.with_suffix(".partial.tar")
        subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={BASE_PACKAGES}", SUITE,
                        str(partial), MIRROR], check=True, timeout=1200)
        partial.rename(tarball)
    _podman(env, "import", str(tarball), BASE_TAG)


def _context(where: Path) -> Path:
    """What the Containerfile copies, and wheels/ with the CPU torch wheel as pip finds it here."""
    import torch

    ctx = where / "context"
    ctx.mkdir()
    for name in ("Containerfile", ".dockerignore", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, ctx / name)
    shutil.copytree(ROOT / "nlp", ctx / "nlp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (ctx / "wheels").mkdir()
    version = torch.__version__  # this machine's build (the CPU one where pip's find-links give it)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", f"torch=={version}", "--no-deps",
                    "--only-binary=:all:", "--python-version", PYTHON_VERSION, "-d", str(ctx / "wheels")],
                   check=True, timeout=900)
    return ctx


def _ca_bundle() -> Path:
    """The host's CA bundle: pip inside the build trusts what pip here trusts (a proxy's CA too)."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      ssl.get_default_verify_paths().cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    pytest.fail("no CA bundle found for pip in the build (set PIP_CERT)")


# Free space the build needs under CACHE: its measured peak (docs/deploy.md) with a margin. Each
# stage's environment exists three times while it is committed (the container's files, the layer
# blob, the stored layer). With less, the build fails part-way (ENOSPC) and leaves the rest of the
# suite short of space, so the tests skip, saying so.
BUILD_NEEDS_FREE_BYTES = 8 * 1024**3


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[dict]:
    env = _podman_env()
    free = shutil.disk_usage(CACHE).free
    if free < BUILD_NEEDS_FREE_BYTES:
        pytest.skip(f"building the image needs about {BUILD_NEEDS_FREE_BYTES / 1024**3:.0f} GiB free under {CACHE}; "
                    f"{free / 1024**3:.1f} GiB is free (set NLP_CONTAINER_CACHE to a larger disk)")
    started = time.monotonic()
    _base_image(env)
    base_s = time.monotonic() - started
    tmp = tmp_path_factory.mktemp("image")
    try:
        ctx = _context(tmp)
        pip_conf = tmp / "pip.conf"
        pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        started = time.monotonic()
        # build mounts (not layers): the CA bundle and a pip.conf naming it; --format docker keeps
        # HEALTHCHECK (the OCI format has no field for it). --layers=false: a stage is committed
        # once, not after each step, and no intermediate image is kept
        _podman(env, "build", "--layers=false", "--format", "docker", "--network", "host",
                "-f", str(ctx / "Containerfile"), "--build-arg", f"BASE={BASE_TAG}", "--build-arg", "TORCH_INDEX=",
                "-v", f"{_ca_bundle()}:/etc/ssl/certs/ca-certificates.crt:ro", "-v", f"{pip_conf}:/etc/pip.conf:ro",
                "-t", IMAGE, str(ctx), timeout=2400)
        build_s = time.monotonic() - started
        shutil.rmtree(tmp)  # the torch wheel and the source copy, now in the image: free the space early
        inspect = json.loads(_podman(env, "image", "inspect", IMAGE).stdout)[0]
        figures = {"base_s": round(base_s, 1), "build_s": round(build_s, 1), "size_bytes": inspect["Size"]}
        (CACHE / "last-build.json").write_text(json.dumps(figures))
        print(f"\nimage {IMAGE}: {inspect['Size'] / 1e6:.0f} MB; base {base_s:.0f} s, build {build_s:.0f} s")
        yield {"env": env, "inspect": inspect}
    finally:
        # only the base image stays cached (the image is rebuilt on each run), also after a failed build
        shutil.rmtree(tmp, ignore_errors=True)
        _podman(env, "rmi", "--force", IMAGE, check=False)
        _podman(env, "image", "prune", "--force", check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, body: dict | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def _serve(image: dict, name: str, *extra: str) -> tuple[str, int]:
    """Start the image on a free port of the host; wait for /health. Returns (base url, port)."""
    env, port = image["env"], _free_port()
    _podman(env, "rm", "-f", name, check=False)
    _podman(env, "run", "-d", "--name", name, "--network=host", "-e", f"NLP_PORT={port}",
            "-e", "NLP_HOST=127.0.0.1", *extra, IMAGE)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 180
    while True:
        state = _podman(env, "inspect", "--format", "{{.State.Status}}", name).stdout.strip()
        if state != "running":
            logs = _podman(env, "logs", name, check=False)
            raise AssertionError(f"the container stopped ({state}) before /health answered:\n{logs.stderr[-3000:]}")
        try:
            if _get(url + "/health")[0] == 200:
                return url, port
        except OSError:
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise AssertionError(f"/health did not answer 200 within 180 s:\n{_podman(env, 'logs', name).stderr[-3000:]}")
        time.sleep(1)


def _stop(image: dict, name: str) -> tuple[int, str]:
    """SIGTERM, as `docker stop` sends it; the exit code and the server's log."""
    env = image["env"]
    try:
        _podman(env, "kill", "--signal", "TERM", name)
        code = int(_podman(env, "wait", name, timeout=90).stdout.strip())
        logs = _podman(env, "logs", name)
        return code, logs.stdout + logs.stderr
    finally:
        _podman(env, "rm", "-f", name, check=False)


def test_image_serves_drains_and_runs_as_non_root(image):
    config = image["inspect"]["Config"]
    assert config["User"] == "nlp"
    healthcheck = image["inspect"].get("Healthcheck") or config.get("Healthcheck") or {}  # podman: top level
    assert "/health" in " ".join(healthcheck.get("Test", [])), image["inspect"]
    assert not any(k.upper().endswith(("TOKEN", "SECRET", "PASSWORD")) for k in
                   (e.partition("=")[0] for e in config.get("Env") or []))
    name = "nlp-serve-test"
    url, _ = _serve(image, name)
    try:
        status, body = _get(url + "/predict", {"inputs": ["这家餐厅的服务非常好，菜也很新鲜", "太难吃了，再也不来了"]})
        assert status == 200, body
        labels = [result[0]["label"] for result in body]  # one [{"label", "score"}] per input
        assert labels == ["positive", "negative"], body
        uid = _podman(image["env"], "exec", name, "id", "-u").stdout.strip()
        assert uid != "0" and uid == "10001"
        health = _podman(image["env"], "healthcheck", "run", name, check=False)
        assert health.returncode == 0, health.stdout + health.stderr
    except BaseException:
        _podman(image["env"], "rm", "-f", name, check=False)
        raise
    code, logs = _stop(image, name)
    assert code == 0, logs[-3000:]
    assert "Traceback" not in logs, logs[-3000:]


def test_image_serves_a_mounted_model(image):
    """A model directory mounted read-only, named by NLP_MODEL: no rebuild."""
    model = ROOT / "nlp" / "assets" / "ernie-tiny-zh-ner"
    name = "nlp-serve-test-mounted"
    url, _ = _serve(image, name, "-v", f"{model}:/model:ro", "-e", "NLP_MODEL=/model")
    try:
        status, body = _get(url + "/predict", {"inputs": ["江泽民在北京会见了客人"]})
        assert status == 200, body
        found = {(e["entity_group"], e["word"]) for e in body[0]}
        assert {("PER", "江泽民"), ("LOC", "北京")} <= found, body
    finally:
        code, logs = _stop(image, name)
    assert code == 0, logs[-3000:]
