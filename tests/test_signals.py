"""SIGTERM and SIGHUP end an `nlp` command as Ctrl-C does: the temporary directory it was writing
is removed and it exits 128 + the signal's number. What SIGKILL leaves goes with the next run. An
ignored SIGHUP (nohup) stays ignored, and a signal that lands just after a temporary directory is
made cannot leak it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

import nlp
import nlp._common as common
from nlp._common import atomic_directory
from nlp._signals import signals_held, terminate_raises
from nlp.tasks import get_task
from nlp.tokenizer import load_tokenizer

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("signals") / "clf"
    torch.manual_seed(0)
    cfg = nlp.AutoConfig.from_pretrained(ASSET, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=64, id2label={0: "negative", 1: "positive"})
    get_task("text-classification").head(cfg).save_pretrained(out)
    load_tokenizer(ASSET).save_pretrained(out)
    return out


def _run_signalled_command(argv: list[str], signum: int, *, ignore_hup: bool = False) -> subprocess.CompletedProcess:
    """`nlp ARGV` in a process of its own that sends itself `signum` when its output directory is
    written whole and about to be published: the moment a killed writer loses the most."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        import nlp._common as common
        publish = common.publish_directory
        def signalled(tmp, path, **kwargs):
            print("written:", tmp, flush=True)
            os.kill(os.getpid(), {int(signum)})
            return publish(tmp, path, **kwargs)
        common.publish_directory = signalled
        if {ignore_hup!r}:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does
        from nlp.cli import main
        sys.exit(main({argv!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_command_removes_its_temporary_directory(source, tmp_path, signum):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("这家餐厅的服务非常好\n太难吃了\n", encoding="utf-8")
    out = tmp_path / "pruned"
    done = _run_signalled_command(["prune-vocab", str(source), "--out", str(out), "--corpus", str(corpus)], signum)
    assert "written:" in done.stdout, done.stdout + done.stderr  # the signal came while it was written
    # the default action would end it with -signum and leave .tmp-pruned~XXXXXXXX/ behind
    assert done.returncode == 128 + signum, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_what_sigkill_left_goes_with_the_next_run_of_the_command(source, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("这家餐厅的服务非常好\n", encoding="utf-8")
    argv = ["prune-vocab", str(source), "--out", str(tmp_path / "pruned"), "--corpus", str(corpus)]
    killed = _run_signalled_command(argv, signal.SIGKILL)  # cannot be caught: nothing is cleaned up
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-pruned~")]
    assert len(left) == 1 and (left[0] / "config.json").is_file()
    done = subprocess.run([sys.executable, "-m", "nlp", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "pruned"]


def test_an_ignored_sighup_stays_ignored(source, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("这家餐厅的服务非常好\n", encoding="utf-8")
    out = tmp_path / "pruned"
    done = _run_signalled_command(["prune-vocab", str(source), "--out", str(out), "--corpus", str(corpus)], signal.SIGHUP, ignore_hup=True)
    assert "written:" in done.stdout and done.returncode == 0, done.stderr[-2000:]
    assert load_tokenizer(out).vocab_size < 30  # the command went on to the end


@pytest.fixture
def main_thread():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed only in the main thread")


def test_a_signal_just_after_the_directory_is_made_leaves_nothing(tmp_path, monkeypatch, main_thread):
    # temporary_sibling calls current_umask after its mkdtemp: the directory exists, and
    # atomic_directory does not hold its name yet
    real_umask, sent = common.current_umask, []

    def umask_then_sigterm() -> int:
        if not sent and list(tmp_path.glob(".tmp-out~*")):
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_umask()

    monkeypatch.setattr(common, "current_umask", umask_then_sigterm)
    with pytest.raises(SystemExit) as stopped, terminate_raises():
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "never.txt").write_text("the signal ends the write before this line")
    assert sent and stopped.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_held_signals_are_raised_on_leaving_and_the_handlers_restored(main_thread):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped, terminate_raises():
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            reached = True  # held: the handler has not run yet
        raise AssertionError("the held signal was not raised on leaving")
    assert reached and stopped.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
