"""`nlp hub ...` commands, through nlp.cli.main."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from hub_servers import make_repo

from nlp import hub
from nlp.cli import main


def test_ls_info(capsys):
    assert main(["hub", "ls", "rbt*"]) == 0
    assert capsys.readouterr().out.split()[0] == "rbt3"
    assert main(["hub", "info", "ernie-3.0-nano-zh"]) == 0
    out = capsys.readouterr().out
    assert "nghuyong/ernie-3.0-nano-zh" in out and "ernie_3.0_nano_zh.pdparams" in out
    assert main(["hub", "info", "ernie-3.0-nan-zh"]) == 2
    assert "Did you mean 'ernie-3.0-nano-zh'" in capsys.readouterr().err


def test_download_and_cache_ls_rm(mirror, cache, capsys):
    hub.register_card({"name": "tiny", "architecture": "bert", "sources": [{"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url}]})
    assert main(["hub", "download", "tiny", "-q"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.startswith(str(cache / "models--team--tiny-model"))
    assert main(["hub", "cache", "ls"]) == 0
    assert "team/tiny-model" in capsys.readouterr().out
    assert main(["hub", "cache", "rm", "tiny"]) == 0
    assert not (cache / "models--team--tiny-model").exists()
    assert main(["hub", "cache", "rm", "tiny"]) == 1


def test_offline_download_error_exit_2(cache, monkeypatch, capsys):
    monkeypatch.setenv("NLP_OFFLINE", "1")
    assert main(["hub", "download", "rbt3"]) == 2
    assert "nlp hub download rbt3" in capsys.readouterr().err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_subprocess(tmp_path, workers):
    make_repo(tmp_path / "m", "team/x", {"config.json": b"{}"})
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "hub", "serve", str(tmp_path / "m"), "--port", str(port), "--token", "t",
                             "--workers", workers],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/team/x/resolve/main/config.json"
        for _ in range(100):
            try:
                r = requests.get(url, headers={"Authorization": "Bearer t"}, timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        else:
            pytest.fail("server did not start")
        assert r.status_code == 200 and r.content == b"{}"
        assert requests.get(url, timeout=2).status_code == 401
    finally:
        proc.terminate()
        proc.wait(10)


def test_download_paddlenlp_url_source_converts_with_the_real_converter(flaky, cache, tmp_path, capsys):
    """PaddleNLP's URLs serve only weights + vocab: the card's config fills in, the models layer converts."""
    import numpy as np
    from paddle_fixtures import TINY, paddle_backbone, paddle_config, write_paddle_dir

    pd_config = paddle_config("ErnieModel")
    src = write_paddle_dir(tmp_path / "pd", paddle_backbone(pd_config, np.random.default_rng(0)), pd_config)
    flaky.files.update({"w.pdparams": (src / "model_state.pdparams").read_bytes(), "v.txt": (src / "vocab.txt").read_bytes()})
    config = {k: v for k, v in pd_config.items() if k not in ("architectures", "model_type")}
    hub.register_card({"name": "tiny-pd", "architecture": "ernie", "config": config, "sources": [
        {"kind": "url", "format": "paddle", "revision": "paddlenlp", "files": [
            {"name": "model_state.pdparams", "url": f"{flaky.url}/w.pdparams"},
            {"name": "vocab.txt", "url": f"{flaky.url}/v.txt"}]}]})
    assert main(["hub", "download", "tiny-pd", "-q"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == cache / "converted--tiny-pd" / "url-paddlenlp"
    import json

    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "ernie" and cfg["hidden_size"] == TINY["hidden_size"]
    assert (out / "model.safetensors").is_file() and (out / "vocab.txt").is_file()
    raw = cache / "files--tiny-pd" / "snapshots" / "url-paddlenlp"
    assert json.loads((raw / "model_config.json").read_text())["num_hidden_layers"] == TINY["num_hidden_layers"]
