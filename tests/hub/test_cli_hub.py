"""`nlp hub ...` commands, through nlp.cli.main."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import requests

import nlp.hub as hub
from nlp.cli import main

from hub_servers import make_repo


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


def test_serve_subprocess(tmp_path):
    make_repo(tmp_path / "m", "team/x", {"config.json": b"{}"})
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "nlp", "hub", "serve", str(tmp_path / "m"), "--port", str(port), "--token", "t"],
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
