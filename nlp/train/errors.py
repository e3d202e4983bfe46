"""Errors raised while a run is under way (settings errors are `nlp._common.ConfigError`)."""

from __future__ import annotations

from pathlib import Path

from nlp._common import NlpError

__all__ = ["CheckpointWriteError", "TrainingError", "TrainingInterrupted"]


class TrainingError(NlpError, RuntimeError):
    """The run cannot go on (e.g. the loss stayed NaN/inf for too many steps in a row)."""


class CheckpointWriteError(TrainingError, OSError):
    """A checkpoint could not be written (disk full, read-only, ...); the earlier checkpoints
    are intact, and the same command continues from the last one once the cause is fixed."""


class TrainingInterrupted(NlpError, RuntimeError):
    """The run was stopped on request (SIGINT/SIGTERM or `Trainer.request_stop`) after writing
    a resumable checkpoint. Running the same settings again (resume: auto) continues it."""

    def __init__(self, message: str, *, checkpoint: Path | None, signum: int | None) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint
        self.signum = signum  # the signal number, or None when stopped programmatically
