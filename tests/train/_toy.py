"""A tiny model, dataset and collator for testing the engine without any task code.

Also runnable as a script (used by the signal and data-parallel tests):
    python _toy.py OUTPUT_DIR [--sleep S] [--marker-step K] [--steps-file F] [--params-file F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

VOCAB, CLASSES = 50, 3


@dataclass
class Out:
    loss: torch.Tensor | None
    logits: torch.Tensor


class ToyClassifier(nn.Module):
    """Embedding -> mean over real tokens -> dropout -> LayerNorm -> linear."""

    def __init__(self, dropout: float = 0.1, hidden: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, hidden)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, CLASSES)
        self.checkpointing = False
        self.nan_steps: set[int] = set()  # forward calls (in training) that return a NaN loss
        self.calls = 0

    def gradient_checkpointing_enable(self) -> None:
        self.checkpointing = True

    def forward(self, input_ids, attention_mask, labels=None) -> Out:
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)  # (B, T, H)
        h = h.sum(1) / attention_mask.sum(1, keepdim=True).clamp(min=1)  # (B, H)
        logits = self.head(self.norm(self.drop(h)))
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels)
            if self.training:
                self.calls += 1
                if self.calls in self.nan_steps:
                    loss = loss * float("nan")
        return Out(loss, logits)


def make_dataset(n: int = 48, seed: int = 0) -> list[dict]:
    """Label = (first token) mod 3, so the task is learnable; lengths vary 3..9."""
    g = torch.Generator().manual_seed(seed)
    data = []
    for _ in range(n):
        length = int(torch.randint(3, 10, (1,), generator=g))
        ids = torch.randint(1, VOCAB, (length,), generator=g).tolist()
        data.append({"input_ids": ids, "labels": ids[0] % CLASSES})
    return data


def collate(features: list[dict]) -> dict[str, torch.Tensor]:
    longest = max(len(f["input_ids"]) for f in features)
    ids = torch.zeros(len(features), longest, dtype=torch.long)
    mask = torch.zeros(len(features), longest, dtype=torch.long)
    for i, f in enumerate(features):
        ids[i, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
        mask[i, : len(f["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([f["labels"] for f in features])}


def accuracy(p) -> dict[str, float]:
    correct = sum(int(pred.argmax() == lab) for pred, lab in zip(p.predictions, p.label_ids))
    return {"accuracy": correct / len(p.predictions)}


def settings(output_dir, **overrides):
    from nlp.train import TrainSettings, from_dict, to_dict

    base = {
        "output_dir": str(output_dir),
        "epochs": 2,
        "mixed_precision": "no",
        "optim": {"lr": 0.05},
        "data": {"batch_size": 8},
        "eval": {"every_steps": 4, "metric": "accuracy"},
        "log": {"every_steps": 1, "progress_bar": False, "tensorboard": False, "plots": False},
    }
    for key, value in overrides.items():
        node = base
        *parents, last = key.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return from_dict(TrainSettings, base)


def make_trainer(output_dir, *, model_seed=0, n=48, callbacks=(), saved_with_model=(), **overrides):
    from nlp.train import Trainer

    torch.manual_seed(model_seed)
    model = ToyClassifier()
    return Trainer(
        model,
        settings(output_dir, **overrides),
        train_dataset=make_dataset(n),
        collate_fn=collate,
        eval_dataset=make_dataset(16, seed=1),
        compute_metrics=accuracy,
        saved_with_model=saved_with_model,
        callbacks=callbacks,
    )


def losses(output_dir) -> dict[int, float]:
    lines = (Path(output_dir) / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if r["type"] == "train"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("output_dir")
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--marker", default=None, help="file touched once step --marker-step is done")
    ap.add_argument("--marker-step", type=int, default=2)
    ap.add_argument("--params-file", default=None)
    ap.add_argument("--ranks-dir", default=None)
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--no-eval", action="store_true")
    args = ap.parse_args()

    class Slow:
        def on_step_end(self, trainer, state):
            if args.marker and state.step == args.marker_step:
                Path(args.marker).touch()
            time.sleep(args.sleep)

    from nlp.train import Trainer, TrainingInterrupted

    torch.manual_seed(0)
    model = ToyClassifier(dropout=0.0 if args.params_file else 0.1)
    s = settings(args.output_dir, epochs=args.epochs, eval__every_steps=None)
    trainer = Trainer(
        model, s, train_dataset=make_dataset(), collate_fn=collate,
        eval_dataset=None if args.no_eval else make_dataset(16, seed=1),
        compute_metrics=accuracy, callbacks=[Slow()],
    )
    acc = trainer.accelerator
    if args.ranks_dir:
        Path(args.ranks_dir, f"rank{acc.process_index}.json").write_text(
            json.dumps({"rank": acc.process_index, "world": acc.num_processes})
        )
    try:
        trainer.train()
    except TrainingInterrupted as e:
        print(f"interrupted: {e}", file=sys.stderr)
        sys.exit(128 + (e.signum or 0))
    if args.params_file and acc.is_main_process:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in acc.unwrap_model(trainer._model).state_dict().items()},
                  args.params_file)


if __name__ == "__main__":
    main()


class StopAt:
    """A callback that asks the trainer to stop (like SIGTERM) at `step`."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, state):
        if state.step == self.step:
            trainer.request_stop()
