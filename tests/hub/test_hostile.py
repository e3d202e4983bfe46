"""Hostile input against the mirror server (`nlp hub serve`): it never answers 5xx, never serves
anything outside its root or hidden, and does not let slow clients hold connections forever.

Every server runs on 127.0.0.1 in this process; every test is bounded in time.
"""

from __future__ import annotations

import http.client
import os
import socket
import time

import pytest
import requests
from hub_servers import MirrorServer, make_repo, sha

from nlp._common import ConfigError
from nlp.hub.server import create_app, parse_range

pytestmark = pytest.mark.timeout(60)

SECRET = b"TOP-SECRET-OUTSIDE"
HIDDEN = b"HIDDEN-DOTFILE-OF-ROOT"
DATA = bytes(range(256)) * 40  # 10240 bytes


def raw_request(port: int, method: str, path: bytes, headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, dict, bytes]:
    """Send bytes exactly as given (clients would refuse or normalise a non-ASCII header or path)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        head = method.encode() + b" " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        head += b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
        s.sendall(head)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    head_raw, _, body = raw.partition(b"\r\n\r\n")
    lines = head_raw.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.decode("latin-1").lower(): v.decode("latin-1") for k, _, v in (ln.partition(b": ") for ln in lines[1:])}
    return status, hdrs, body


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "root"
    make_repo(root, "team/m", {"config.json": b"{}", "w.bin": DATA})
    (tmp_path / "outside.txt").write_bytes(SECRET)
    (root / ".secret.txt").write_bytes(HIDDEN)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_bytes(HIDDEN)
    return root


@pytest.fixture
def srv(root):
    s = MirrorServer(root)
    yield s
    s.stop()


# -- error headers in any script ----------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/team/m/resolve/main/%E4%BD%A0%E5%A5%BD.bin",  # 你好.bin: not Latin-1
        "/team/m/resolve/%E5%88%86%E6%94%AF/config.json",  # revision 分支
        "/team/m/resolve/main/a%0Ab%0D%0AX-Injected:%201",  # CR LF in the path
        "/%E4%BD%A0/m/resolve/main/config.json",  # owner 你
        "/api/models/team/m/revision/%F0%9F%98%80",  # an emoji revision
    ],
)
def test_404_for_any_script_in_path_or_revision(srv, path):
    status, headers, _ = raw_request(srv.port, "GET", path.encode())
    assert status == 404, path
    assert headers.get("x-error-code", "EntryNotFound") in ("EntryNotFound", "RevisionNotFound", "RepositoryNotFound")
    assert headers.get("x-error-message", "").isascii() and "x-injected" not in headers


def test_huggingface_hub_reports_entry_not_found_at_once(srv, tmp_path):
    """Before: the 404's header could not be encoded, the server answered 500, and the client
    retried for 23 s, then reported a connection problem."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    start = time.monotonic()
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("team/m", "权重.bin", endpoint=srv.url, cache_dir=tmp_path / "hf")
    assert time.monotonic() - start < 15


# -- tokens -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [b"Bearer \xe4\xbd\xa0\xe5\xa5\xbd", b"Bearer \xff\xfe", b"Bearer s3cret\xc3\xa9", b"\xe4\xbd\xa0 s3cret", b"Bearer"],
)
def test_non_ascii_bearer_token_is_401(root, value):
    s = MirrorServer(root, token="s3cret")
    try:
        status, _, _ = raw_request(s.port, "GET", b"/team/m/resolve/main/config.json", [(b"Authorization", value)])
        assert status == 401
        status, _, body = raw_request(s.port, "GET", b"/team/m/resolve/main/config.json", [(b"Authorization", b"Bearer s3cret")])
        assert status == 200 and body == b"{}"
    finally:
        s.stop()


@pytest.mark.parametrize("token", ["密码", "s3cret\n", "tok en", "café"])
def test_server_refuses_a_token_clients_cannot_send(root, token):
    """Before: the server started, and every request carrying a token got 500."""
    with pytest.raises(ConfigError, match="printable ASCII"):
        create_app(root, token=token)


def test_cli_refuses_non_ascii_token_without_traceback(root, capsys, monkeypatch):
    import uvicorn

    from nlp.cli import main

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server must not start"))
    assert main(["hub", "serve", str(root), "--token", "密码"]) != 0
    err = capsys.readouterr().err
    assert "printable ASCII" in err and "Traceback" not in err


# -- ranges -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value,status,body",
    [
        ("bytes=" + "9" * 5000 + "-", 416, b""),  # start far beyond the end
        ("bytes=0-" + "9" * 5000, 206, DATA),  # end far beyond the end: clamped
        ("bytes=-" + "9" * 5000, 206, DATA),  # suffix longer than the file: all of it
        ("bytes=0-1,5-6", 200, DATA),  # several ranges: the whole file (RFC 9110 allows it)
        ("", 200, DATA),  # empty: ignored
        ("bytes=", 200, DATA),
        ("bytes=-", 200, DATA),
        ("items=0-5", 200, DATA),  # another unit: ignored
        ("bytes=5-2", 200, DATA),  # invalid (last < first): ignored
        ("bytes=10-19", 206, DATA[10:20]),
        (f"bytes={len(DATA)}-", 416, b""),
    ],
)
def test_range_headers(srv, value, status, body):
    r = requests.get(f"{srv.url}/team/m/resolve/main/w.bin", headers={"Range": value}, timeout=10)
    assert r.status_code == status, value
    if status != 416:
        assert r.content == body
    else:
        assert r.headers["Content-Range"] == f"bytes */{len(DATA)}"


def test_parse_range_never_parses_huge_numbers():
    assert parse_range("bytes=" + "1" * 100_000 + "-", 10) is False
    assert parse_range("bytes=2-" + "1" * 100_000, 10) == (2, 9)


# -- ports ------------------------------------------------------------------------------------
@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_cli_refuses_a_port_out_of_range(root, port, capsys, monkeypatch):
    """Before: --port 99999 listened on 99999 mod 65536 = 34463 without a word."""
    import uvicorn

    from nlp.cli import main

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server must not start"))
    with pytest.raises(SystemExit) as exc:
        main(["hub", "serve", str(root), "--port", port])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "65535" in err and "Traceback" not in err


def test_serve_refuses_a_port_out_of_range(root, monkeypatch):
    import uvicorn

    from nlp.hub.server import serve

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server must not start"))
    with pytest.raises(ConfigError, match="99999"):
        serve(root, port=99999)


# -- symlinks to hidden files -----------------------------------------------------------------
def test_symlink_cannot_expose_a_hidden_file_of_the_root(root, tmp_path):
    os.symlink(root / ".secret.txt", root / "team/m/innocent.txt")
    os.symlink(root / ".git", root / "team/m/gitdir")
    os.symlink(root / ".git", root / "team/dotgit")  # a repo that is a hidden folder
    s = MirrorServer(root)
    try:
        for path in ("/team/m/resolve/main/innocent.txt", "/team/m/resolve/main/gitdir/config",
                     "/team/dotgit/resolve/main/config"):
            r = requests.get(s.url + path, timeout=10)
            assert r.status_code == 404 and HIDDEN not in r.content, path
        info = requests.get(f"{s.url}/api/models/team/m", timeout=10).json()
        assert sorted(x["rfilename"] for x in info["siblings"]) == ["config.json", "w.bin"]
        tree = requests.get(f"{s.url}/api/models/team/m/tree/main", params={"recursive": "1"}, timeout=10).json()
        assert sorted(e["path"] for e in tree) == ["config.json", "w.bin"]
    finally:
        s.stop()


# -- slow clients -----------------------------------------------------------------------------
def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes `sock` within `seconds` while we trickle one byte at a time."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    i = 0
    while time.monotonic() < deadline:
        try:
            if i < len(trickle):
                sock.send(trickle[i:i + 1])
                i += 1
            if sock.recv(1024) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:  # reset or broken pipe: closed
            return True
    return False


@pytest.mark.parametrize("parser", ["auto", "h11"])
def test_a_client_that_never_finishes_its_headers_is_closed(root, parser):
    s = MirrorServer(root, header_timeout=1.0, parser=parser)
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
            sock.sendall(b"GET /team/m/resolve/main/config.json HTTP/1.1\r\nHost: x\r\n")
            assert _closed_within(sock, 6.0)
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:  # a byte every 0.2 s
            assert _closed_within(sock, 6.0, trickle=b"GET /team/m/resolve/main/config.json HTTP/1.1\r\nX-Slow: " + b"a" * 200)
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:  # opens and says nothing
            assert _closed_within(sock, 6.0)
        # a normal client is unaffected, and a connection stays usable across requests
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        for _ in range(2):
            conn.request("GET", "/team/m/resolve/main/w.bin")
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == DATA
        conn.close()
    finally:
        s.stop()


@pytest.mark.parametrize("parser", ["auto", "h11"])
def test_a_slow_body_download_is_not_cut_by_the_head_deadline(root, parser):
    """The deadline is for the request head only: a long response is not interrupted."""
    big = os.urandom(4 << 20)
    (root / "team/m/big.bin").write_bytes(big)
    s = MirrorServer(root, header_timeout=0.5, parser=parser)
    try:
        with requests.get(f"{s.url}/team/m/resolve/main/big.bin", stream=True, timeout=10) as r:
            got = bytearray()
            for chunk in r.iter_content(1 << 20):
                got += chunk
                time.sleep(0.3)  # 4 chunks x 0.3 s > the 0.5 s head deadline
        assert sha(bytes(got)) == sha(big)
    finally:
        s.stop()


# -- property test ----------------------------------------------------------------------------
def test_random_requests_never_5xx_never_leak(root, tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from starlette.testclient import TestClient
    from urllib.parse import quote

    os.symlink(tmp_path / "outside.txt", root / "team/m/out.txt")
    os.symlink(root / ".secret.txt", root / "team/m/in.txt")
    apps = {None: TestClient(create_app(root)), "s3cret": TestClient(create_app(root, token="s3cret"))}
    segment = st.one_of(
        st.sampled_from(["team", "m", "resolve", "main", "api", "models", "tree", "revision", "config.json",
                         "w.bin", "out.txt", "in.txt", ".secret.txt", ".git", "config", "..", ".", "", "%2e%2e",
                         "%2F", "..%2f..", "\\..\\", "%00", "%E4%BD%A0", "%0d%0a", "~", "outside.txt"]),
        st.text(max_size=12).map(lambda t: quote(t, safe="")),  # any character, as a client sends it
    )
    path = st.lists(segment, min_size=0, max_size=8).map(lambda parts: "/" + "/".join(parts))
    header_value = st.one_of(
        st.sampled_from(["bytes=0-5", "bytes=-3", "bytes=9999999999999999999999-", "bytes=0-1,3-4", "",
                         "Bearer s3cret", "Bearer 你好", "bytes=" + "9" * 5000 + "-"]),
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40),
    )
    headers = st.dictionaries(st.sampled_from(["Range", "Authorization", "If-None-Match", "Accept-Encoding", "X-Any"]),
                              header_value, max_size=3)
    method = st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"])

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(path=path, headers=headers, method=method, token=st.sampled_from([None, "s3cret"]),
           query=st.sampled_from(["", "?recursive=true", "?recursive=%ff", "?x=" + "y" * 100]))
    def check(path, headers, method, token, query):
        encoded = {k: v.encode("utf-8") for k, v in headers.items()}  # raw bytes, any encoding
        r = apps[token].request(method, "http://testserver" + path + query, headers=encoded)
        assert r.status_code < 500, (method, path, headers, r.status_code)
        assert SECRET not in r.content and HIDDEN not in r.content
        if r.status_code in (200, 206) and method == "GET":
            assert "/resolve/" in path or "/api/models/" in path

    check()
