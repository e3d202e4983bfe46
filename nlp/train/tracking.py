"""What a run shows and leaves behind: progress bar, metrics.jsonl, TensorBoard, plots, summary.

Only the main process writes. metrics.jsonl is the source of truth: one JSON object per line,
`{"type": "train"|"eval", "step": ..., ...}`; the PNG plots are drawn from it, so a resumed run
(whose log is first cut back to the checkpoint's step) draws one continuous curve.
"""

from __future__ import annotations

import json
import logging
import math
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from nlp._common import atomic_write
from nlp._extras import require

__all__ = ["LogWindow", "RunLog", "write_plots", "peak_memory_mb"]

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process: allocated CUDA memory on GPU, max RSS on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, KiB on Linux


@dataclass
class LogWindow:
    """What the training log has summed since its last record (one record every
    log.every_steps steps averages the window). Checkpoints keep it (`to_state`), so that the
    first record after a resume averages the same steps as in an unbroken run."""

    loss_sum: float = 0.0  # over the steps whose loss was finite
    loss_steps: int = 0
    tokens: int = 0
    earlier_seconds: float = 0.0  # time the window ran in an earlier session of the run
    started: float = field(default_factory=time.perf_counter)

    def add(self, loss: float, tokens: int) -> None:
        if math.isfinite(loss):
            self.loss_sum, self.loss_steps = self.loss_sum + loss, self.loss_steps + 1
        self.tokens += tokens

    def seconds(self) -> float:
        return self.earlier_seconds + time.perf_counter() - self.started

    def to_state(self, seconds: float | None = None) -> dict[str, Any]:
        return {"loss_sum": self.loss_sum, "loss_steps": self.loss_steps, "tokens": self.tokens,
                "seconds": self.seconds() if seconds is None else seconds}

    @staticmethod
    def resized(state: dict[str, Any], saved_processes: int, processes: int) -> dict[str, Any]:
        """A saved window (`to_state` of the sums over `saved_processes`, each of which adds every
        step's loss) for a run that goes on with `processes`: the loss sum and step count scaled,
        so that a step before the resume weighs as much in the next record as a step after it
        (the tokens are counted once each, whoever counted them)."""
        if saved_processes == processes or not state:
            return state
        k = processes / saved_processes
        return {**state, "loss_sum": float(state.get("loss_sum", 0.0)) * k,
                "loss_steps": round(int(state.get("loss_steps", 0)) * k)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "LogWindow":
        return cls(float(state.get("loss_sum", 0.0)), int(state.get("loss_steps", 0)),
                   int(state.get("tokens", 0)), float(state.get("seconds", 0.0)))


class RunLog:
    def __init__(
        self,
        output_dir: Path,
        *,
        enabled: bool,
        progress_bar: bool,
        total_steps: int,
        start_step: int,
        accelerator: Any = None,
    ) -> None:
        self.path = Path(output_dir) / METRICS_FILE
        self.enabled = enabled
        self.accelerator = accelerator  # None: no TensorBoard
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            disable=not (enabled and progress_bar),
            desc="train",
            unit="step",
            dynamic_ncols=True,
        )
        if enabled:
            self._truncate_after(start_step)

    def _truncate_after(self, step: int) -> None:
        """Drop records written after the checkpoint we resume from: those steps run again."""
        if not self.path.exists():
            return
        lines = self.path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
        if len(kept) != len(lines):
            with atomic_write(self.path, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in kept))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.accelerator is not None:
            prefix = "train/" if record.get("type") == "train" else "eval/"
            values = {
                prefix + k: v
                for k, v in record.items()
                if k not in ("type", "step") and isinstance(v, (int, float)) and math.isfinite(v)
            }
            self.accelerator.log(values, step=record["step"])

    def progress(self, step: int, **postfix: Any) -> None:
        self.bar.update(step - self.bar.n)
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        self.bar.close()


def read_metrics(output_dir: Path) -> list[dict[str, Any]]:
    path = Path(output_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_plots(output_dir: Path, eval_metric: str) -> list[Path]:
    """loss.png, lr.png and eval.png (the selection metric, plus eval loss) from metrics.jsonl."""
    matplotlib = require("matplotlib", "the run's plots (loss.png, lr.png, eval.png)")
    matplotlib.use("Agg")  # no display on servers; must precede pyplot
    import matplotlib.pyplot as plt

    records = read_metrics(output_dir)
    train = [r for r in records if r.get("type") == "train"]
    evals = [r for r in records if r.get("type") == "eval"]
    written = []
    panels = [
        ("loss.png", "training loss", [("loss", train)]),
        ("lr.png", "learning rate", [("lr", train)]),
        ("eval.png", f"evaluation: {eval_metric}", [(f"eval_{eval_metric}", evals)]),
    ]
    for name, title, series in panels:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        drawn = False
        for key, rows in series:
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o" if len(pts) < 30 else None, label=key)
                drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        out = Path(output_dir) / name
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)
    return written


def write_summary(output_dir: Path, summary: dict[str, Any]) -> None:
    with atomic_write(Path(output_dir) / "summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
    best = summary.get("best_metric")
    logger.info(
        "run %s after %d steps: %s; best %s = %s at step %s; %.1f s, %.0f tokens/s, peak memory %.0f MiB",
        summary["status"],
        summary["steps"],
        summary["output_dir"],
        summary["metric"],
        "n/a" if best is None else f"{best:.6g}",
        summary.get("best_step"),
        summary["wall_seconds"],
        summary["tokens_per_second"],
        summary["peak_memory_mb"],
    )
