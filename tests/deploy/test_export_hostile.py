"""`nlp export` and export directories under hostile use (issue 24): --force, signals, unwritable
and nested --out, a head the run did not train, damaged manifests, file modes, `nlp predict`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nlp
from nlp._common import ConfigError, NlpError
from nlp._signals import terminate_raises
from nlp.deploy import export_model

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the export starts loading the model: refusals come before any work."""
    import nlp.deploy.export as export

    def started(*args, **kwargs):
        raise AssertionError("the export started work before refusing")

    monkeypatch.setattr(export, "load_tokenizer", started)
    monkeypatch.setattr(export, "_export_into", started)


# --------------------------------------------------------------------------- --out and --force


def test_force_replaces_only_a_directory_that_export_wrote(sources, exports, tmp_path, no_work):
    notes = tmp_path / "thesis"
    (notes / "notes").mkdir(parents=True)
    (notes / "notes" / "thesis.txt").write_text("three years of work", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"not an `nlp export` directory .*it holds notes.*--force replaces only "
                                          r"an earlier export"):
        export_model(sources["text-classification"], notes, force=True)
    assert (notes / "notes" / "thesis.txt").read_text(encoding="utf-8") == "three years of work"

    earlier = tmp_path / "earlier"
    shutil.copytree(exports["text-classification"], earlier)
    (earlier / "README.md").write_text("my notes", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"also holds files the export did not write \(README.md\)"):
        export_model(sources["text-classification"], earlier, force=True)
    assert (earlier / "README.md").is_file()


def test_force_replaces_an_earlier_export_and_files_follow_the_umask(sources, exports, tmp_path):
    earlier = tmp_path / "earlier"
    shutil.copytree(exports["text-classification"], earlier)
    old_umask = os.umask(0o022)
    try:
        result = export_model(sources["text-classification"], earlier, force=True)
    finally:
        os.umask(old_umask)
    assert result.out == earlier and nlp.deploy.is_export_dir(earlier)
    # manifest.json, config.json and the tokenizer files used to be 0600: unreadable to a server
    # running as another user
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in earlier.iterdir()}
    assert modes and all(mode == 0o644 for mode in modes.values()), modes
    assert stat.S_IMODE(earlier.stat().st_mode) == 0o755
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left


@pytest.mark.parametrize("where", ["file", "sys", "proc"])
def test_an_unwritable_out_parent_is_refused_before_any_work(sources, tmp_path, no_work, where):
    if where == "file":
        (tmp_path / "FILE").write_text("x")
        out = tmp_path / "FILE" / "sub"
        why = f"its parent {str(tmp_path / 'FILE')!r} is a file, not a directory"
    elif where == "sys":
        out = Path("/sys/nlp-export-test/sub")
        why = "cannot create its parent directory '/sys/nlp-export-test'"
    else:
        out = Path("/proc/nlp-export-test")
        why = "cannot write in '/proc'"
    with pytest.raises(ConfigError) as err:
        export_model(sources["text-classification"], out)
    assert str(err.value).startswith(f"--out {str(out)!r}: {why}")
    assert str(err.value).endswith("; choose a directory you can write to") and "\n" not in str(err.value)


def test_out_inside_the_model_directory_is_refused(sources, no_work):
    run = sources["text-classification"]
    with pytest.raises(ConfigError, match="lies inside the model directory"):
        export_model(run, run / "model" / "export")


def test_a_head_the_run_did_not_train_is_refused(sources, no_work):
    with pytest.raises(ConfigError, match=r"--task 'qa'.*holds a text-classification model.*question-answering "
                                          r"head was never trained"):
        export_model(sources["text-classification"], sources["text-classification"].parent / "x", task="qa")


# --------------------------------------------------------------------------- signals


def _start_export(source: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nlp", "export", str(source), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_temp_dir(proc: subprocess.Popen, parent: Path, name: str, seen: set) -> Path:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        new = [p for p in parent.glob(f".tmp-{name}~*") if p not in seen]
        if new:
            return new[0]
        time.sleep(0.05)
    raise AssertionError("the export made no temp dir")


def test_a_signalled_export_leaves_no_temp_dir_and_stale_ones_are_removed(sources, tmp_path):
    """SIGTERM used to leave a hidden 27 MB .OUT.tmp-XXXX/ (SIGINT cleaned up). SIGKILL cannot be
    caught: the next export of the same --out removes what that one left."""
    out = tmp_path / "export"
    killed = _start_export(sources["ner-crf"], out)
    try:
        stale = _wait_for_temp_dir(killed, tmp_path, out.name, set())
        killed.kill()
        killed.wait(timeout=60)
    finally:
        if killed.poll() is None:
            killed.kill()
    assert stale.is_dir()  # what SIGKILL leaves
    termed = _start_export(sources["ner-crf"], out)
    try:
        own = _wait_for_temp_dir(termed, tmp_path, out.name, {stale})
        assert not stale.exists()  # removed by the second export: its process is gone
        termed.send_signal(signal.SIGTERM)
        code = termed.wait(timeout=120)
    finally:
        if termed.poll() is None:
            termed.kill()
    assert code != 0
    assert not own.exists() and not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_signal_just_after_the_temp_dir_is_made_leaves_nothing(sources, tmp_path, monkeypatch):
    # the window the test above hits only by chance: the directory exists, the export does not
    # hold its name yet (and no owner file marks it for a later export to remove)
    import threading

    import nlp._common as common

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed only in the main thread")
    out = tmp_path / "export"
    real_umask, sent = common.current_umask, []

    def umask_then_sigterm() -> int:
        if not sent and list(tmp_path.glob(f".tmp-{out.name}~*")):  # temporary_sibling, after its mkdtemp
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_umask()

    monkeypatch.setattr(common, "current_umask", umask_then_sigterm)
    with pytest.raises(SystemExit) as stopped, terminate_raises():  # as the `nlp` command runs it
        export_model(sources["text-classification"], out)
    assert sent and stopped.value.code == 128 + signal.SIGTERM
    assert [p.name for p in tmp_path.iterdir()] == []


# --------------------------------------------------------------------------- manifests


def _copy(export: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(export, copy)
    return copy


def _edit_manifest(directory: Path, edit) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    edit(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(files=[]), r'"files" must map each file .* got a JSON list'),
    (lambda m: m["files"].update({"config.json": "abc"}), r"the entry of 'config.json' must be .* got a JSON str"),
    (lambda m: m["files"].update({"../elsewhere/x": {"sha256": "0", "bytes": 1}}), r"not a file inside"),
    (lambda m: m.update(model="../elsewhere/model.onnx"), r'"model"\) names|names \'../elsewhere/model.onnx\''),
    (lambda m: m["files"].pop("model.onnx"), r"\"model\" is 'model.onnx', which \"files\" does not list"),
    (lambda m: m["files"].pop("config.json"), r"config.json: in the export directory but not in its manifest"),
])
def test_a_damaged_manifest_is_refused_with_what_is_wrong(exports, tmp_path, edit, match):
    copy = _copy(exports["text-classification"], tmp_path)
    _edit_manifest(copy, edit)
    with pytest.raises(NlpError, match=match):
        nlp.pipeline("text-classification", model=copy)


def test_an_unparsable_manifest_says_to_export_again(exports, tmp_path, capsys):
    copy = _copy(exports["text-classification"], tmp_path)
    (copy / "manifest.json").write_text('{"format": "nlp-export", "files": {', encoding="utf-8")
    from nlp.cli import main

    (tmp_path / "in.txt").write_text("好\n", encoding="utf-8")
    assert main(["predict", str(copy), "--input", str(tmp_path / "in.txt")]) == 2
    err = capsys.readouterr().err
    assert "not a JSON manifest" in err and "export the model again" in err
    assert "nlp.pipeline" not in err and len(err.strip().splitlines()) == 1


def test_an_edited_model_file_or_an_outside_link_is_refused(exports, tmp_path):
    copy = _copy(exports["text-classification"], tmp_path)
    elsewhere = tmp_path / "elsewhere.onnx"
    shutil.copyfile(copy / "model.onnx", elsewhere)
    (copy / "model.onnx").unlink()
    (copy / "model.onnx").symlink_to(elsewhere)
    with pytest.raises(NlpError, match="outside the export directory"):
        nlp.pipeline("text-classification", model=copy)


# --------------------------------------------------------------------------- nlp predict


def test_predict_refuses_a_task_the_export_is_not_and_prints_nothing_for_an_empty_file(exports, tmp_path, capsys):
    from nlp.cli import main

    inp = tmp_path / "in.txt"
    inp.write_text("张三在北京\n", encoding="utf-8")
    assert main(["predict", str(exports["ner-crf"]), "--task", "text-classification", "--input", str(inp)]) == 2
    err = capsys.readouterr().err
    assert "is an export of a token-classification model; it cannot run as 'text-classification'" in err
    assert "Traceback" not in err
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert main(["predict", str(exports["ner-crf"]), "--input", str(empty)]) == 0
    assert capsys.readouterr().out == ""
