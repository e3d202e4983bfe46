"""The mirror server speaks the Hugging Face resolve protocol and never leaves its root."""

from __future__ import annotations

import http.client
import os
from pathlib import Path

import pytest
import requests
from hub_servers import MirrorServer, make_repo, sha


def raw_get(srv, path: str, method: str = "GET", headers: dict | None = None):
    """Send `path` byte-for-byte: requests/httpx would normalise `..` away before the server sees it."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.putrequest(method, path, skip_accept_encoding=True)
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def test_head_reports_hub_headers(mirror, mirror_root):
    data = (mirror_root / "team/tiny-model/model.safetensors").read_bytes()
    r = requests.head(f"{mirror.url}/team/tiny-model/resolve/main/model.safetensors")
    assert r.status_code == 200
    assert r.headers["ETag"] == f'"{sha(data)}"' == r.headers["X-Linked-Etag"]
    assert r.headers["X-Linked-Size"] == r.headers["Content-Length"] == str(len(data))
    assert len(r.headers["X-Repo-Commit"]) == 40
    assert r.headers["Accept-Ranges"] == "bytes"


def test_get_and_range(mirror, mirror_root):
    data = (mirror_root / "team/tiny-model/model.safetensors").read_bytes()
    url = f"{mirror.url}/team/tiny-model/resolve/main/model.safetensors"
    assert requests.get(url).content == data
    r = requests.get(url, headers={"Range": "bytes=1000-1999"})
    assert r.status_code == 206 and r.content == data[1000:2000]
    assert r.headers["Content-Range"] == f"bytes 1000-1999/{len(data)}"
    r = requests.get(url, headers={"Range": "bytes=299000-"})
    assert r.status_code == 206 and r.content == data[299000:]
    r = requests.get(url, headers={"Range": f"bytes={len(data) + 5}-"})
    assert r.status_code == 416


def test_revision_by_commit_and_unknown(mirror):
    commit = requests.get(f"{mirror.url}/api/models/team/tiny-model").json()["sha"]
    assert requests.get(f"{mirror.url}/team/tiny-model/resolve/{commit}/config.json").status_code == 200
    r = requests.get(f"{mirror.url}/team/tiny-model/resolve/v9/config.json")
    assert r.status_code == 404 and r.headers["X-Error-Code"] == "RevisionNotFound"


def test_model_info_and_tree(mirror):
    info = requests.get(f"{mirror.url}/api/models/team/tiny-model/revision/main").json()
    assert {s["rfilename"] for s in info["siblings"]} == {"config.json", "vocab.txt", "model.safetensors", "sub/extra.json"}
    tree = requests.get(f"{mirror.url}/api/models/team/tiny-model/tree/main", params={"recursive": "true"}).json()
    files = {e["path"]: e for e in tree if e["type"] == "file"}
    assert set(files) == {"config.json", "vocab.txt", "model.safetensors", "sub/extra.json"}
    assert files["config.json"]["lfs"]["oid"] == sha(b'{"model_type": "bert", "hidden_size": 8}')
    top = requests.get(f"{mirror.url}/api/models/team/tiny-model/tree/main").json()
    assert {e["path"] for e in top} == {"config.json", "vocab.txt", "model.safetensors", "sub"}


def test_missing_repo_and_file_error_codes(mirror):
    r = requests.get(f"{mirror.url}/team/nope/resolve/main/config.json")
    assert r.status_code == 404 and r.headers["X-Error-Code"] == "RepositoryNotFound"
    r = requests.get(f"{mirror.url}/team/tiny-model/resolve/main/nope.bin")
    assert r.status_code == 404 and r.headers["X-Error-Code"] == "EntryNotFound"


@pytest.mark.parametrize(
    "path",
    [
        "/team/tiny-model/resolve/main/../../../secret.txt",
        "/team/tiny-model/resolve/main/%2e%2e/%2e%2e/secret.txt",
        "/team/tiny-model/resolve/main/%2E%2E%2F%2E%2E%2Fsecret.txt",
        "/team/tiny-model/resolve/main/sub/..%2f..%2f..%2fsecret.txt",
        "/team/tiny-model/resolve/main//etc/passwd",
        "/team/tiny-model/resolve/main/%2Fetc%2Fpasswd",
        "/team/tiny-model/resolve/main/..\\..\\secret.txt",
        "/..%2F..%2F/secret.txt/resolve/main/x",
        "/team/..%2F../resolve/main/secret.txt",
        "/team/escape/resolve/main/secret.txt",
        "/team/tiny-model/resolve/main/link-out.txt",
        "/api/models/..%2F../tree/main",
    ],
)
def test_traversal_attempts_are_404(tmp_path, path):
    root = tmp_path / "root"
    make_repo(root, "team/tiny-model", {"config.json": b"{}"})
    (tmp_path / "secret.txt").write_text("top secret")
    os.symlink(tmp_path / "secret.txt", root / "team/tiny-model/link-out.txt")
    os.symlink(tmp_path, root / "team/escape")  # a repo symlink that leaves the root
    srv = MirrorServer(root)
    try:
        resp, body = raw_get(srv, path)
        assert resp.status == 404, (path, resp.status)
        assert b"top secret" not in body
        # the listing does not leak the symlinked file either
        info = requests.get(f"{srv.url}/api/models/team/tiny-model").json()
        assert [s["rfilename"] for s in info["siblings"]] == ["config.json"]
    finally:
        srv.stop()


def test_symlink_inside_root_is_served(tmp_path):
    root = tmp_path / "root"
    make_repo(root, "team/a", {"w.bin": b"weights"})
    make_repo(root, "team/b", {"config.json": b"{}"})
    os.symlink(root / "team/a/w.bin", root / "team/b/w.bin")  # dedup between repos is fine
    srv = MirrorServer(root)
    try:
        assert requests.get(f"{srv.url}/team/b/resolve/main/w.bin").content == b"weights"
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "headers,status",
    [({}, 401), ({"Authorization": "Bearer wrong"}, 401), ({"Authorization": "Basic s3cret"}, 401),
     ({"Authorization": "Bearer s3cret"}, 200)],
)
def test_bearer_token(mirror_root, headers, status):
    srv = MirrorServer(mirror_root, token="s3cret")
    try:
        r = requests.get(f"{srv.url}/team/tiny-model/resolve/main/config.json", headers=headers)
        assert r.status_code == status
        r = requests.get(f"{srv.url}/api/models/team/tiny-model", headers=headers)
        assert r.status_code == status
    finally:
        srv.stop()


def test_huggingface_hub_client_downloads_from_mirror(mirror, mirror_root, tmp_path):
    from huggingface_hub import hf_hub_download, snapshot_download

    path = snapshot_download("team/tiny-model", endpoint=mirror.url, cache_dir=tmp_path / "hf")
    for rel in ("config.json", "vocab.txt", "model.safetensors", "sub/extra.json"):
        assert Path(path, rel).read_bytes() == (mirror_root / "team/tiny-model" / rel).read_bytes()
    one = hf_hub_download("team/tiny-model", "vocab.txt", endpoint=mirror.url, cache_dir=tmp_path / "hf2")
    assert Path(one).read_bytes() == (mirror_root / "team/tiny-model/vocab.txt").read_bytes()


def test_huggingface_hub_client_with_token(mirror_root, tmp_path):
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    srv = MirrorServer(mirror_root, token="s3cret")
    try:
        with pytest.raises((HfHubHTTPError, LocalEntryNotFoundError)):
            snapshot_download("team/tiny-model", endpoint=srv.url, cache_dir=tmp_path / "a", token="wrong")
        path = snapshot_download("team/tiny-model", endpoint=srv.url, cache_dir=tmp_path / "b", token="s3cret")
        assert os.path.exists(os.path.join(path, "model.safetensors"))
    finally:
        srv.stop()


def test_hashes_are_cached_by_size_and_mtime(tmp_path, monkeypatch):
    from nlp.hub import server

    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 10)
    hasher = server.FileHasher()
    expected = sha(b"b" * 11)
    calls = []
    real_sha256 = server.hashlib.sha256
    monkeypatch.setattr(server.hashlib, "sha256", lambda *a: calls.append(1) or real_sha256(*a))
    first = hasher.digest(f)
    assert hasher.digest(f) == first and len(calls) == 1  # second call: from the cache
    f.write_bytes(b"b" * 11)
    assert hasher.digest(f).sha256 == expected and len(calls) == 2  # size/mtime changed: hashed again
    import subprocess

    git = subprocess.run(["git", "hash-object", "--stdin"], input=b"a" * 10, capture_output=True, check=True)
    assert first.git_sha1 == git.stdout.decode().strip()  # the tree listing's `oid` is git's blob id


def test_commit_changes_when_a_file_changes(mirror, mirror_root):
    before = requests.get(f"{mirror.url}/api/models/team/tiny-model").json()["sha"]
    (mirror_root / "team/tiny-model/config.json").write_bytes(b'{"hidden_size": 16}')
    os.utime(mirror_root / "team/tiny-model/config.json", ns=(1, 1))
    after = requests.get(f"{mirror.url}/api/models/team/tiny-model").json()["sha"]
    r = requests.head(f"{mirror.url}/team/tiny-model/resolve/main/config.json")
    assert before != after == r.headers["X-Repo-Commit"]
    expected = sha(b'{"hidden_size": 16}')
    assert r.headers["ETag"] == f'"{expected}"'
