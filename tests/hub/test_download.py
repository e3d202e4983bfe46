"""download(): sources in order, resume, integrity, concurrency, conversion, mirrors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hub_servers import sha

from nlp import hub
from nlp._common import HubError, UnknownNameError
from nlp.hub import convert

BLOB = os.urandom(2_000_000)
VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n你\n好\n".encode()


def url_card(name, base, files, fmt="transformers", **extra):
    return {
        "name": name,
        "architecture": "ernie",
        "sources": [{"kind": "url", "format": fmt, "files": [dict(name=n, url=f"{base}/{n}", **kw) for n, kw in files]}],
        **extra,
    }


def test_local_directory_is_returned_as_is(tmp_path, cache):
    assert hub.download(str(tmp_path)) == tmp_path
    assert not cache.exists()


def test_unknown_name_did_you_mean(cache):
    with pytest.raises(UnknownNameError, match=r"Did you mean 'ernie-3.0-mini-zh'\?.*nlp hub ls"):
        hub.download("ernie-3.0-mni-zh")


def test_hf_source_full_download(mirror, mirror_root, cache):
    hub.register_card({"name": "tiny", "architecture": "bert", "sources": [{"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url}]})
    path = hub.download("tiny")
    assert path.parent.parent == cache / "models--team--tiny-model"
    for rel in ("config.json", "vocab.txt", "model.safetensors", "sub/extra.json"):
        assert (path / rel).read_bytes() == (mirror_root / "team/tiny-model" / rel).read_bytes()


def test_owner_repo_through_mirror_env(mirror, mirror_root, cache, monkeypatch):
    """An unregistered 'owner/repo' id resolves through NLP_HUB_MIRROR (tried before the Hub)."""
    monkeypatch.setenv("NLP_HUB_MIRROR", mirror.url)
    path = hub.download("team/tiny-model")
    assert (path / "model.safetensors").read_bytes() == (mirror_root / "team/tiny-model/model.safetensors").read_bytes()


def test_set_mirror_points_a_registered_name_at_a_directory(mirror_root, cache):
    hub.register_card({"name": "tiny", "architecture": "bert", "sources": [{"kind": "hf", "repo": "team/tiny-model", "endpoint": "http://127.0.0.1:9"}]})
    hub.set_mirror("tiny", str(mirror_root))
    assert hub.download("tiny") == mirror_root / "team/tiny-model"


def test_url_source_download_verifies_and_records(flaky, cache):
    flaky.files.update({"w.bin": BLOB, "vocab.txt": VOCAB})
    hub.register_card(url_card("u", flaky.url, [("w.bin", {"sha256": sha(BLOB), "size": len(BLOB)}), ("vocab.txt", {})]))
    path = hub.download("u")
    assert (path / "w.bin").read_bytes() == BLOB and (path / "vocab.txt").read_bytes() == VOCAB
    rec = json.loads((cache / "records/u.json").read_text())
    assert rec == {"url-main": {"vocab.txt": sha(VOCAB)}}  # the unknown digest is recorded, the pinned one not
    assert not list(path.glob("*.incomplete")) and not list(path.glob(".*"))


def test_resume_after_connection_drop(flaky, cache):
    flaky.files["w.bin"] = BLOB
    flaky.drop_after["w.bin"] = 700_000
    hub.register_card(url_card("u", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    path = hub.download("u")
    assert (path / "w.bin").read_bytes() == BLOB
    assert flaky.ranges[0] is None
    resumed = [r for r in flaky.ranges if r]
    assert resumed and int(resumed[0].split("=")[1].rstrip("-")) >= 600_000  # asked only for the rest


def test_corrupt_bytes_fail_then_next_source(flaky, mirror, mirror_root, cache, caplog):
    good = (mirror_root / "team/tiny-model/model.safetensors").read_bytes()
    flaky.files["model.safetensors"] = good
    flaky.corrupt.add("model.safetensors")
    card = url_card("c", flaky.url, [("model.safetensors", {"sha256": sha(good)})])
    card["sources"].append({"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url,
                            "files": [{"name": "model.safetensors", "sha256": sha(good)}]})
    hub.register_card(card)
    path = hub.download("c")
    assert (path / "model.safetensors").read_bytes() == good
    assert "models--team--tiny-model" in str(path)
    assert "sha256" in caplog.text
    # nothing of the corrupted download is left where a later call could pick it up
    files_dir = cache / "files--c"
    assert not list(files_dir.rglob("model.safetensors")) and not list(files_dir.rglob("*.incomplete"))


def test_all_sources_fail_lists_each(flaky, cache):
    flaky.files["w.bin"] = BLOB
    flaky.corrupt.add("w.bin")
    hub.register_card(url_card("bad", flaky.url, [("w.bin", {"sha256": sha(BLOB)}), ("nope.txt", {})]))
    with pytest.raises(HubError, match=r"every source failed(.|\n)*sha256"):
        hub.download("bad")


def test_recorded_digest_catches_changed_bytes(flaky, cache):
    flaky.files["vocab.txt"] = VOCAB
    hub.register_card(url_card("u", flaky.url, [("vocab.txt", {})]))
    path = hub.download("u")
    (path / "vocab.txt").unlink()
    flaky.files["vocab.txt"] = VOCAB + b"evil\n"
    with pytest.raises(HubError, match="sha256"):
        hub.download("u")


_WORKER = """
import sys, nlp.hub as h
base, digest = sys.argv[1], sys.argv[2]
h.register_card({"name": "par", "architecture": "ernie", "sources": [{"kind": "url", "files": [
    {"name": "w.bin", "url": base + "/w.bin", "sha256": digest}, {"name": "vocab.txt", "url": base + "/vocab.txt"}]}]})
print(h.download("par", progress=False))
"""


def test_eight_processes_one_correct_copy(flaky, cache):
    flaky.files.update({"w.bin": BLOB, "vocab.txt": VOCAB})
    env = dict(os.environ, NLP_HUB_CACHE=str(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, flaky.url, sha(BLOB)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1
    path = Path(paths.pop())
    assert (path / "w.bin").read_bytes() == BLOB
    assert sorted(p.name for p in path.iterdir()) == ["vocab.txt", "w.bin"]
    assert not list((cache / "files--par").rglob("*.incomplete"))
    assert not list((cache / "files--par").rglob("*.tmp"))
    assert flaky.ranges.count(None) >= 2  # both files fetched, and not eight times over
    assert len(flaky.ranges) < 8 * 2


def test_paddle_source_converted_once(flaky, cache, monkeypatch):
    flaky.files.update({"model_state.pdparams": BLOB, "vocab.txt": VOCAB})
    calls = []

    def fake_converter(src: Path, dst: Path) -> None:
        calls.append(src)
        cfg = json.loads((src / "model_config.json").read_text())
        (dst / "config.json").write_text(json.dumps({"model_type": cfg["model_type"], "hidden_size": cfg["hidden_size"]}))
        (dst / "model.safetensors").write_bytes((src / "model_state.pdparams").read_bytes()[:10])
        (dst / "vocab.txt").write_bytes((src / "vocab.txt").read_bytes())

    monkeypatch.setattr(convert, "_CONVERTERS", {})
    card = url_card("pd", flaky.url, [("model_state.pdparams", {}), ("vocab.txt", {})], fmt="paddle", config={"hidden_size": 16})
    hub.register_card(card)
    with pytest.raises(HubError, match="no converter"):
        hub.download("pd")
    hub.register_converter("paddle", fake_converter)
    first = hub.download("pd")
    second = hub.download("pd")
    offline = hub.download("pd", local_files_only=True)
    assert first == second == offline and len(calls) == 1
    assert json.loads((first / "config.json").read_text()) == {"model_type": "ernie", "hidden_size": 16}
    assert first.parent.name == "converted--pd"


def test_paddle_hf_source_converted_once(mirror_root, mirror, cache, monkeypatch):
    calls = []

    def fake_converter(src: Path, dst: Path) -> None:
        calls.append(src)
        (dst / "config.json").write_text((src / "config.json").read_text())

    monkeypatch.setattr(convert, "_CONVERTERS", {"paddle": fake_converter})
    hub.register_card({"name": "p", "architecture": "ernie", "sources": [
        {"kind": "hf", "repo": "team/tiny-model", "endpoint": mirror.url, "format": "paddle"}]})
    a, b = hub.download("p"), hub.download("p")
    assert a == b and len(calls) == 1 and (a / "config.json").exists()


def test_builtin_source_is_copied_and_verified(tmp_path, cache, monkeypatch):
    pkg = tmp_path / "pkgs" / "fake_assets"
    (pkg / "tiny").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tiny" / "vocab.txt").write_bytes(VOCAB)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    hub.register_card({"name": "b", "architecture": "ernie", "sources": [
        {"kind": "builtin", "package": "fake_assets", "path": "tiny", "files": [{"name": "vocab.txt", "sha256": sha(VOCAB)}]}]})
    path = hub.download("b")
    assert (path / "vocab.txt").read_bytes() == VOCAB and cache in path.parents
    hub.register_card({"name": "b2", "architecture": "ernie", "sources": [
        {"kind": "builtin", "package": "fake_assets", "path": "tiny", "files": [{"name": "vocab.txt", "sha256": "0" * 64}]}]})
    with pytest.raises(HubError, match="sha256"):
        hub.download("b2")


def test_modelscope_source_uses_the_repo_file_url(flaky, cache):
    """ModelScope serves files at /api/v1/models/{repo}/repo?Revision={rev}&FilePath={file}."""
    flaky.files["api/v1/models/team/tiny/repo?Revision=master&FilePath=vocab.txt"] = VOCAB
    flaky.files["api/v1/models/team/tiny/repo?Revision=master&FilePath=sub%2Fw.bin"] = BLOB
    hub.register_card({"name": "ms", "architecture": "ernie", "sources": [
        {"kind": "modelscope", "repo": "team/tiny", "endpoint": flaky.url,
         "files": ["vocab.txt", {"name": "sub/w.bin", "sha256": sha(BLOB)}]}]})
    path = hub.download("ms")
    assert (path / "vocab.txt").read_bytes() == VOCAB and (path / "sub/w.bin").read_bytes() == BLOB
    assert path.name == "modelscope-master"


def test_revision_skips_sources_without_it(flaky, cache):
    flaky.files["vocab.txt"] = VOCAB
    hub.register_card(url_card("u", flaky.url, [("vocab.txt", {})]))
    with pytest.raises(HubError, match="has no revision 'v2'"):
        hub.download("u", revision="v2")


def test_dead_hf_endpoint_falls_through_to_next_source(flaky, cache, monkeypatch):
    import socket

    import huggingface_hub.utils._http as hf_http

    monkeypatch.setattr(hf_http.time, "sleep", lambda s: None)  # huggingface_hub retries ~20 s first

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    flaky.files["vocab.txt"] = VOCAB
    card = {"name": "fall", "architecture": "bert", "sources": [
        {"kind": "hf", "repo": "team/tiny-model", "endpoint": f"http://127.0.0.1:{dead}"},
        {"kind": "url", "files": [{"name": "vocab.txt", "url": f"{flaky.url}/vocab.txt"}]}]}
    hub.register_card(card)
    assert (hub.download("fall") / "vocab.txt").read_bytes() == VOCAB


def test_missing_directory_is_not_a_name(cache, tmp_path):
    with pytest.raises(UnknownNameError, match="no such directory"):
        hub.download(str(tmp_path / "nope") + "/")
    with pytest.raises(UnknownNameError, match="no such directory"):
        hub.download("./not-here")


def test_server_without_range_support_restarts_cleanly(flaky, cache):
    flaky.files["w.bin"] = BLOB
    flaky.drop_after["w.bin"] = 500_000
    flaky.no_range = True  # answers 200 with the whole body even to a Range request
    hub.register_card(url_card("u", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    assert (hub.download("u") / "w.bin").read_bytes() == BLOB  # not the partial + the whole file


def test_5xx_is_retried_with_backoff_4xx_is_not(flaky, cache, monkeypatch):
    from nlp.hub import _http

    sleeps = []
    monkeypatch.setattr(_http.time, "sleep", sleeps.append)
    flaky.files["w.bin"] = BLOB
    flaky.fail["w.bin"] = 3
    hub.register_card(url_card("u", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    assert (hub.download("u") / "w.bin").read_bytes() == BLOB
    assert sleeps == [0.5, 1.0, 2.0]  # exponential backoff between the four attempts
    sleeps.clear()
    hub.register_card(url_card("gone", flaky.url, [("nope.bin", {})]))
    with pytest.raises(HubError, match="HTTP 404"):
        hub.download("gone")
    assert sleeps == []
