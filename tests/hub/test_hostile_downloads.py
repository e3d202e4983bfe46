"""Hostile servers and broken files against the downloaders: nothing corrupt is ever cached, a
digest is recorded only for a file known to be complete, and a broken weights file says how to
fetch it again. Every server runs on 127.0.0.1 in this process; every test is bounded in time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hub_servers import FlakyServer, LyingHub, MirrorServer, make_repo, sha

from nlp import hub
from nlp._common import HubError
from nlp.hub import _http

pytestmark = pytest.mark.timeout(120)

BLOB = os.urandom(300_000)
VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n你\n好\n".encode()


def hf_card(name: str, endpoint: str, **src) -> dict:
    return {"name": name, "architecture": "bert",
            "sources": [{"kind": "hf", "repo": "team/m", "endpoint": endpoint, **src}]}


def url_card(name, base, files):
    return {"name": name, "architecture": "ernie",
            "sources": [{"kind": "url", "files": [dict(name=n, url=f"{base}/{n}", **kw) for n, kw in files]}]}


def leftovers(cache: Path) -> list[str]:
    """Files in the cache that hold downloaded bytes (blobs, snapshots, partial files)."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*")
                  if p.is_file() and ".locks" not in p.parts and not p.name.endswith(".lock"))


@pytest.fixture
def no_sleep(monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr(_http.time, "sleep", sleeps.append)
    return sleeps


# -- Hugging Face protocol: bytes against the announced digests ---------------------------------
def test_hf_server_sending_wrong_bytes_of_the_right_size_caches_nothing(cache):
    """Before: the wrong bytes were cached under the announced blob name; offline served them."""
    evil = bytes(b ^ 0xFF for b in BLOB)
    srv = LyingHub(served={"config.json": b"{}", "model.safetensors": evil}, announced={"model.safetensors": BLOB})
    try:
        hub.register_card(hf_card("lie", srv.url))
        with pytest.raises(HubError) as err:
            hub.download("lie")
        msg = str(err.value)
        assert "model.safetensors" in msg and sha(BLOB) in msg and sha(evil) in msg
        assert not any("model.safetensors" in p or p.endswith(".incomplete") for p in leftovers(cache))
        with pytest.raises(HubError, match="not in the cache"):
            hub.download("lie", local_files_only=True)
    finally:
        srv.stop()


def test_hf_mirror_that_changed_a_file_behind_its_digest(tmp_path, cache):
    """The real `nlp hub serve` app: its digest is cached by (size, mtime), so bytes changed in
    place with the mtime put back are served under the old sha256."""
    root = tmp_path / "mirror"
    make_repo(root, "team/m", {"config.json": b"{}", "model.safetensors": BLOB})
    srv = MirrorServer(root)
    try:
        import requests

        f = root / "team/m/model.safetensors"
        assert requests.head(f"{srv.url}/team/m/resolve/main/model.safetensors").headers["ETag"] == f'"{sha(BLOB)}"'
        st = f.stat()
        f.write_bytes(BLOB[:-1] + bytes([BLOB[-1] ^ 0xFF]))  # the last byte changed, whatever it was
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        hub.register_card(hf_card("m", srv.url))
        with pytest.raises(HubError, match=f"(?s)model.safetensors.*expected {sha(BLOB)}"):
            hub.download("m")
        assert not any(sha(BLOB) in p or p.endswith(".incomplete") for p in leftovers(cache))
    finally:
        srv.stop()


def test_hf_card_digest_disagreeing_with_the_server_downloads_nothing(cache):
    other = os.urandom(1000)
    srv = LyingHub(served={"config.json": b"{}", "model.safetensors": other})
    try:
        hub.register_card(hf_card("pin", srv.url, files=[{"name": "model.safetensors", "sha256": sha(BLOB)}]))
        with pytest.raises(HubError, match=f"(?s)disagree.*card {sha(BLOB)}.*{sha(other)}"):
            hub.download("pin")
        assert leftovers(cache) == []
    finally:
        srv.stop()


def test_hf_server_cutting_the_body_short_caches_nothing(cache, no_sleep):
    srv = LyingHub(served={"model.safetensors": BLOB[:1000]}, announced={"model.safetensors": BLOB})
    try:
        hub.register_card(hf_card("short", srv.url))
        with pytest.raises(HubError, match="model.safetensors"):
            hub.download("short")
        assert leftovers(cache) == []
    finally:
        srv.stop()


def test_hf_tree_listing_a_path_outside_the_snapshot_is_refused(cache, tmp_path):
    srv = LyingHub(served={"../../../escaped.txt": b"x", "config.json": b"{}"})
    try:
        hub.register_card(hf_card("esc", srv.url))
        with pytest.raises(HubError, match="leave the snapshot"):
            hub.download("esc")
        assert not list(tmp_path.rglob("escaped.txt"))
    finally:
        srv.stop()


def test_git_lfs_pointer_served_as_the_file_is_refused(tmp_path, cache):
    """A mirror folder cloned without `git lfs pull` holds pointers where the weights should be."""
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha(BLOB)}\nsize {len(BLOB)}\n".encode()
    root = tmp_path / "mirror"
    make_repo(root, "team/m", {"config.json": b"{}", "model.safetensors": pointer})
    srv = MirrorServer(root)
    try:
        hub.register_card(hf_card("lfs", srv.url))
        with pytest.raises(HubError, match=f"(?s)Git LFS pointer.*{sha(BLOB)}.*git lfs pull"):
            hub.download("lfs")
        assert not any("model.safetensors" in p for p in leftovers(cache))
    finally:
        srv.stop()
    hub.register_card({"name": "lfsdir", "architecture": "bert", "sources": [{"kind": "mirror", "path": str(root), "repo": "team/m"}]})
    with pytest.raises(HubError, match="git lfs pull"):
        hub.download("lfsdir")


def test_hf_download_still_resumes_and_is_readable_by_huggingface_hub(tmp_path, cache):
    from huggingface_hub import snapshot_download

    root = tmp_path / "mirror"
    make_repo(root, "team/m", {"config.json": b"{}", "model.safetensors": BLOB, "sub/x.json": b"[]"})
    srv = MirrorServer(root)
    try:
        hub.register_card(hf_card("ok", srv.url))
        blobs = cache / "models--team--m" / "blobs"
        blobs.mkdir(parents=True)
        (blobs / (sha(BLOB) + ".incomplete")).write_bytes(BLOB[:100_000])  # an interrupted earlier try
        path = hub.download("ok")
        assert (path / "model.safetensors").read_bytes() == BLOB and (path / "sub/x.json").read_bytes() == b"[]"
        assert not list(blobs.glob("*.incomplete"))
        again = snapshot_download("team/m", cache_dir=cache, local_files_only=True)
        assert Path(again) == path
    finally:
        srv.stop()


# -- url source: completeness before trust on first use -----------------------------------------
def test_body_without_length_cut_short_is_not_recorded(flaky, cache, no_sleep):
    """Before: the cut body was accepted and its digest recorded, so the right file was refused later."""
    flaky.files["w.bin"] = BLOB
    flaky.no_length.add("w.bin")
    flaky.drop_after["w.bin"] = 50_000  # the first answer ends early, looking like a whole body
    hub.register_card(url_card("nolen", flaky.url, [("w.bin", {})]))
    path = hub.download("nolen")
    assert (path / "w.bin").read_bytes() == BLOB
    assert json.loads((cache / "records/nolen.json").read_text()) == {"url-main": {"w.bin": sha(BLOB)}}


def test_body_without_length_that_never_repeats_is_refused(flaky, cache, no_sleep):
    flaky.files["w.bin"] = BLOB
    flaky.no_length.add("w.bin")
    flaky.varying.add("w.bin")
    hub.register_card(url_card("vary", flaky.url, [("w.bin", {})]))
    with pytest.raises(HubError, match="no length"):
        hub.download("vary")
    assert not (cache / "records/vary.json").exists()
    assert not any(p.endswith(("w.bin", ".incomplete")) for p in leftovers(cache))


def _whole_files() -> dict[str, bytes]:
    """One whole file of each format that states its own extent."""
    import gzip
    import io
    import zipfile

    import numpy as np
    from safetensors.numpy import save

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("train.txt", "好\t1\n" * 5000)
    return {
        "w.safetensors": save({"a": np.arange(20_000, dtype=np.float32), "b": np.ones((30, 30), np.float32)}),
        "config.json": json.dumps({"hidden_size": 312, "names": ["x" * 50] * 400}).encode(),
        "data.zip": buf.getvalue(),
        "data.tar.gz": gzip.compress(os.urandom(5_000) * 20),
    }


@pytest.mark.parametrize("filename", ["w.safetensors", "config.json", "data.zip", "data.tar.gz"])
def test_a_body_cut_at_the_same_byte_every_time_is_caught_by_its_format(flaky, cache, no_sleep, filename):
    """A server that cuts the body at the same point on every request, with no Content-Length:
    two identical reads used to cache the cut file as complete (and record its digest)."""
    whole = _whole_files()[filename]
    flaky.files[filename] = whole[: len(whole) * 2 // 3]  # what every GET sends
    flaky.no_length.add(filename)
    hub.register_card(url_card("cut", flaky.url, [(filename, {})]))
    with pytest.raises(HubError, match=rf"{filename}.* is cut short: .*nothing was kept"):
        hub.download("cut")
    assert not (cache / "records/cut.json").exists()
    assert not any(p.endswith((filename, ".incomplete")) for p in leftovers(cache))
    # the whole file, still without a length: two identical reads and its format agree
    flaky.files[filename] = whole
    assert (hub.download("cut") / filename).read_bytes() == whole


def _leave_a_partial(flaky, name: str) -> int:
    """A download cut short whose retries all fail: the partial file (and its ETag) stay. Its size."""
    flaky.drop_after["w.bin"] = 100_000
    flaky.answers["w.bin"] = [(503, {})] * 4
    with pytest.raises(HubError):
        hub.download(name)
    (partial,) = Path(os.environ["NLP_HUB_CACHE"]).rglob("w.bin.incomplete")
    return partial.stat().st_size


def test_416_on_resume_means_start_again(flaky, cache, no_sleep):
    """Before: a 416 to the resume request took the stale partial file as complete and recorded
    its digest, so the right file was refused ever after."""
    old, new = os.urandom(300_000), os.urandom(30_000)
    flaky.files["w.bin"] = old
    flaky.etag = True  # the partial file can be resumed with If-Range ...
    hub.register_card(url_card("st", flaky.url, [("w.bin", {})]))
    have = _leave_a_partial(flaky, "st")
    assert have > len(new)
    flaky.files["w.bin"] = new  # ... but the file is now shorter than the partial one, and this
    flaky.ranges.clear()        # server ignores If-Range: the resume request gets 416
    path = hub.download("st")
    assert (path / "w.bin").read_bytes() == new
    assert json.loads((cache / "records/st.json").read_text())["url-main"]["w.bin"] == sha(new)
    assert flaky.ranges[0] == f"bytes={have}-" and flaky.ranges[1] is None


def test_partial_of_a_changed_file_is_not_glued_to_the_new_one(flaky, cache, no_sleep):
    """Found while fixing the above: a partial file resumed after the file changed on the server
    glued two versions together, and with no published digest that mix was recorded. Now the
    resume carries If-Range, and a partial nothing can vouch for is not resumed."""
    old, new = os.urandom(300_000), os.urandom(300_000)
    flaky.files["w.bin"] = old
    flaky.etag, flaky.if_range = True, True
    hub.register_card(url_card("chg", flaky.url, [("w.bin", {})]))
    _leave_a_partial(flaky, "chg")
    flaky.files["w.bin"] = new
    flaky.ranges.clear()
    flaky.if_ranges.clear()
    assert (hub.download("chg") / "w.bin").read_bytes() == new
    assert flaky.if_ranges[0] == f'"{sha(old)}"'  # the server saw the change and sent it whole
    assert json.loads((cache / "records/chg.json").read_text())["url-main"]["w.bin"] == sha(new)


def test_partial_without_validator_or_digest_is_not_resumed(flaky, cache):
    flaky.files["w.bin"] = BLOB
    hub.register_card(url_card("nov", flaky.url, [("w.bin", {})]))
    partial = cache / "files--nov" / "blobs" / "url-main" / "w.bin.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(os.urandom(100_000))  # from another version of the file, for all we know
    assert (hub.download("nov") / "w.bin").read_bytes() == BLOB
    assert flaky.ranges == [None]


def test_stale_partial_longer_than_the_known_size_is_discarded(flaky, cache):
    flaky.files["w.bin"] = BLOB
    hub.register_card(url_card("big", flaky.url, [("w.bin", {"size": len(BLOB)})]))
    partial = cache / "files--big" / "blobs" / "url-main" / "w.bin.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(os.urandom(len(BLOB) + 10))
    assert (hub.download("big") / "w.bin").read_bytes() == BLOB
    assert flaky.ranges == [None]  # no resume request for a partial longer than the file


# -- 429 / 503 and Retry-After ------------------------------------------------------------------
def test_429_and_503_honour_retry_after(flaky, cache, no_sleep):
    flaky.files["w.bin"] = BLOB
    flaky.answers["w.bin"] = [(429, {"Retry-After": "7"}), (503, {"Retry-After": "2"}), (503, {})]
    hub.register_card(url_card("busy", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    assert (hub.download("busy") / "w.bin").read_bytes() == BLOB
    assert no_sleep == [7.0, 2.0, 2.0]  # the server's wait, then the backoff of the third attempt


def test_retry_after_is_capped_and_attempts_are_bounded(flaky, cache, no_sleep):
    flaky.files["w.bin"] = BLOB
    flaky.answers["w.bin"] = [(429, {"Retry-After": "86400"})] * 10
    hub.register_card(url_card("flood", flaky.url, [("w.bin", {})]))
    with pytest.raises(HubError, match="HTTP 429"):
        hub.download("flood", retry=_http.RetryPolicy(attempts=3, max_delay=1.5))
    assert no_sleep == [1.5, 1.5]
    assert len(flaky.ranges) == 3


def test_retry_after_as_an_http_date(flaky, cache, no_sleep):
    import email.utils
    import time

    flaky.files["w.bin"] = BLOB
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    flaky.answers["w.bin"] = [(503, {"Retry-After": when})]
    hub.register_card(url_card("date", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    hub.download("date")
    assert len(no_sleep) == 1 and 15 <= no_sleep[0] <= 20


def test_real_waits_are_short_with_an_injected_policy(flaky, cache):
    import time

    flaky.files["w.bin"] = BLOB
    flaky.answers["w.bin"] = [(503, {"Retry-After": "3600"})] * 2
    hub.register_card(url_card("quick", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    start = time.monotonic()
    hub.download("quick", retry=_http.RetryPolicy(max_delay=0.05))
    assert time.monotonic() - start < 10


# -- a damaged file already in the cache ----------------------------------------------------------
def test_cached_file_damaged_on_disk_is_fetched_again(flaky, cache):
    flaky.files["w.bin"] = BLOB
    hub.register_card(url_card("dmg", flaky.url, [("w.bin", {"sha256": sha(BLOB)})]))
    path = hub.download("dmg")
    (path / "w.bin").write_bytes(BLOB[:10])
    assert (hub.download("dmg") / "w.bin").read_bytes() == BLOB


# -- broken weights files: which file, and how to fetch it again ---------------------------------
def _tiny_model_dir(path: Path) -> Path:
    import nlp

    model = nlp.AutoModel.from_config("ernie-3.0-nano-zh", num_hidden_layers=1, vocab_size=64, hidden_size=16,
                                      num_attention_heads=2, intermediate_size=32)
    model.save_pretrained(path)
    return path


def test_truncated_safetensors_from_the_hub_names_the_file_and_the_fix(tmp_path, cache, monkeypatch):
    import nlp
    from nlp.models import WeightsFileError

    root = tmp_path / "mirror"
    _tiny_model_dir(root / "team" / "m")
    srv = MirrorServer(root)
    try:
        hub.register_card(hf_card("tiny", srv.url))
        nlp.AutoModel.from_pretrained("tiny")
        cached = hub.download("tiny") / "model.safetensors"
        real = cached.resolve()
        real.write_bytes(real.read_bytes()[:1000])  # a disk error, a copy cut short
        monkeypatch.setenv("NLP_OFFLINE", "1")
        with pytest.raises(WeightsFileError) as err:
            nlp.AutoModel.from_pretrained("tiny")
        msg = str(err.value)
        assert str(cached) in msg and "truncated or corrupt" in msg and "nlp hub download tiny --force" in msg
        monkeypatch.delenv("NLP_OFFLINE")
        from nlp.cli import main

        assert main(["hub", "download", "tiny", "--force", "-q"]) == 0
        nlp.AutoModel.from_pretrained("tiny")  # whole again
    finally:
        srv.stop()


def test_refused_pickle_names_the_file_and_runs_nothing(tmp_path):
    import pickle

    import nlp
    from nlp.models import WeightsFileError

    d = _tiny_model_dir(tmp_path / "m")
    (d / "model.safetensors").unlink()
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (d / "pytorch_model.bin").write_bytes(pickle.dumps({"x": Evil()}))
    with pytest.raises(WeightsFileError, match=r"pytorch_model.bin was refused") as err:
        nlp.AutoModel.from_pretrained(d)
    assert not marker.exists() and "weights_only=False" not in str(err.value)
    assert "nlp hub download" not in str(err.value)  # the user's own folder: nothing to re-fetch


def test_cli_reports_a_corrupt_weights_file_without_traceback(tmp_path):
    d = _tiny_model_dir(tmp_path / "m")
    (d / "model.safetensors").write_bytes(b"\x00" * 16)
    (tmp_path / "in.txt").write_text("你好\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "nlp.cli", "predict", str(d), "--input", str(tmp_path / "in.txt"),
                        "--task", "text-classification"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and str(d / "model.safetensors") in r.stderr, r.stderr


# -- converters passed explicitly -----------------------------------------------------------------
_FRESH = textwrap.dedent("""
    import sys
    import nlp._common, nlp.hub
    {prelude}
    nlp.hub.register_cards_file(sys.argv[1])
    try:
        print(nlp.hub.download("pd", progress=False{extra}))
    except nlp._common.HubError as err:
        print("ERROR", err)
""")


def test_paddle_source_downloads_in_a_fresh_interpreter(tmp_path, cache):
    """Before: the converter was registered as a side effect of importing nlp.auto, so the same
    call worked or failed depending on what the interpreter had imported."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from paddle_fixtures import paddle_backbone, paddle_config, write_paddle_dir

    import numpy as np

    config = paddle_config("ErnieModel")
    src = write_paddle_dir(tmp_path / "paddle", paddle_backbone(config, np.random.default_rng(0)), config)
    srv = FlakyServer({n: (src / n).read_bytes() for n in ("model_state.pdparams", "config.json", "vocab.txt")})
    try:
        cards = tmp_path / "cards.yaml"
        cards.write_text(json.dumps([{"name": "pd", "architecture": "ernie", "sources": [{"kind": "url", "format": "paddle", "files": [
            {"name": n, "url": f"{srv.url}/{n}"} for n in ("model_state.pdparams", "config.json", "vocab.txt")]}]}]))
        env = dict(os.environ, NLP_HUB_CACHE=str(cache))

        def fresh(prelude: str, extra: str) -> str:
            code = _FRESH.format(prelude=prelude, extra=extra)
            r = subprocess.run([sys.executable, "-c", code, str(cards)], env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()

        # the hub alone cannot convert, whatever was imported before: the same answer both times
        for prelude in ("", "import nlp.auto"):
            out = fresh(prelude, "")
            assert out.startswith("ERROR") and "converters=nlp.auto.CONVERTERS" in out, out
        out = fresh("import nlp.auto", ", converters=nlp.auto.CONVERTERS")
        assert (Path(out) / "model.safetensors").is_file() and (Path(out) / "config.json").is_file()
        # the CLI hands the converters over itself
        (cache / "converted--pd").rename(tmp_path / "old-conversion")
        r = subprocess.run([sys.executable, "-m", "nlp.cli", "hub", "download", "pd", "-q"],
                           env=dict(env, NLP_HUB_CARDS=str(cards)), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert (Path(r.stdout.strip()) / "model.safetensors").is_file()
    finally:
        srv.stop()


def test_hf_endpoint_env_is_verified_too(cache):
    """An `owner/repo` id through HF_ENDPOINT (read by huggingface_hub at import: a fresh interpreter)."""
    evil = bytes(b ^ 0x0F for b in BLOB)
    srv = LyingHub(served={"config.json": b"{}", "model.safetensors": evil}, announced={"model.safetensors": BLOB})
    try:
        code = "import nlp.hub, nlp._common as c\ntry:\n    print(nlp.hub.download('team/m', progress=False))\nexcept c.HubError as e:\n    print('ERROR', e)"
        env = dict(os.environ, HF_ENDPOINT=srv.url, NLP_HUB_CACHE=str(cache))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.stdout.startswith("ERROR") and sha(BLOB) in r.stdout and sha(evil) in r.stdout, r.stdout + r.stderr
        assert not any(sha(BLOB) in p or sha(evil) in p for p in leftovers(cache))
    finally:
        srv.stop()
