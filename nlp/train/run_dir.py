"""The output directory of a run: can it be one, is it taken, and what a dead run left in it.

A run takes its directory by writing settings.json first; everything else (logs, plots, the
caller's own files such as recipe.yaml or tokenizer/, checkpoints) comes after. So a directory
without a complete checkpoint that holds settings.json and nothing but such files is what a run
left when it died before its first checkpoint (kill -9 during the first save, a full disk, a
data error at step 1): running the same command again starts that run over. Anything else in
a directory without a checkpoint is someone's data, and the trainer refuses to write there.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from nlp._common import ConfigError, atomic_directory, atomic_write, temporary_target

__all__ = ["ENGINE_FILES", "SETTINGS_FILE", "check_output_dir", "claim_output_dir", "describe_os_error",
           "leftovers_of_a_dead_run", "write_run_files"]

SETTINGS_FILE = "settings.json"
# What the engine itself writes into OUTPUT_DIR (docs/training.md, "The run directory").
ENGINE_FILES = frozenset({SETTINGS_FILE, "metrics.jsonl", "summary.json", "loss.png", "lr.png",
                          "eval.png", "tensorboard", "checkpoints"})
_FILE_TEMP = re.compile(r"^\.(?P<file>.+)\.[^.]+\.tmp$")  # atomic_write's .NAME.XXXX.tmp
_CHECKPOINT_NAME = re.compile(r"^step-\d{8,}$")


def describe_os_error(err: OSError) -> str:
    """"No space left on device" rather than "[Errno 28] No space left on device: '/x/y'"."""
    return err.strerror or str(err) or type(err).__name__


def check_output_dir(out: Path) -> None:
    """Refuse, before any work, an output_dir that cannot be a run directory: a file, a path
    under a file, or a directory (or the nearest existing parent) this process cannot write."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"train.output_dir {out} is a file, not a directory; pick another output_dir")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            f"train.output_dir {out} lies under {existing}, which is a file; pick another output_dir"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"train.output_dir {out}: {existing} is read-only for this user (permission denied); "
            "pick a writable output_dir"
        )


def claim_output_dir(out: Path, settings: Mapping[str, Any]) -> None:
    """Create OUTPUT_DIR and write settings.json: the mark of a run that took the directory."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with atomic_write(out / SETTINGS_FILE, "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, ensure_ascii=False)
    except OSError as err:
        raise ConfigError(
            f"cannot write train.output_dir {out}: {describe_os_error(err)}; pick a writable output_dir"
        ) from None


def leftovers_of_a_dead_run(out: Path, run_files: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Split the entries of `out` (which holds no complete checkpoint) into (what a run left
    before its first checkpoint, anything else). `run_files` are the names the caller writes
    into the directory besides the engine's ENGINE_FILES. Without settings.json no run took
    the directory, and everything in it but temp files counts as someone else's."""
    own = ENGINE_FILES | set(run_files)
    names = sorted(p.name for p in out.iterdir())
    foreign = []
    for name in names:
        file_temp = _FILE_TEMP.match(name)
        temp = temporary_target(name) or (file_temp.group("file") if file_temp else None)
        base = temp or name
        if temp is None and SETTINGS_FILE not in names:
            foreign.append(name)
        elif base not in own:
            foreign.append(name)
        elif base == "checkpoints" and (out / name).is_dir():
            foreign += [f"{name}/{p.name}" for p in sorted((out / name).iterdir())
                        if not _CHECKPOINT_NAME.match(temporary_target(p.name) or p.name)]
    return [n for n in names if n not in foreign and not any(f.startswith(n + "/") for f in foreign)], foreign


def write_run_files(out: Path, files: Mapping[str, Any]) -> None:
    """Write the caller's own files into a run directory (fine-tuning's and pretraining's
    recipe.yaml and tokenizer/), each atomically: a str is a text file (atomic_write), anything
    else is saved with its `save_pretrained(dir)` into a temporary sibling and renamed into place. A
    directory already there is kept (a resumed run keeps its tokenizer, so its token ids)."""
    out = Path(out)
    for name, value in files.items():
        path = out / name
        if isinstance(value, str):
            with atomic_write(path, "w", encoding="utf-8") as f:
                f.write(value)
            continue
        if path.is_dir():
            continue
        with atomic_directory(path) as tmp:
            value.save_pretrained(tmp)
