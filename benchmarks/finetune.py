"""The sentiment recipe (nlp.train) against an equivalent transformers `Trainer` script.

    python benchmarks/finetune.py            # recipes/sentiment-reviews.yaml as written
    python benchmarks/finetune.py --quick    # 4,000 training reviews, 500 dev/test, 2 epochs
    python benchmarks/finetune.py --quick --rounds 3   # each side 3 times, alternating; best kept

Same everything but the engine:
- the same tokenizer (the recipe's: ernie-tiny-zh's, or one trained on the training texts
  before either clock starts) and the same features (nlp.tasks' preprocessing; the engines are
  compared, not the tokenizers);
- the same initial weights: the recipe's model (ernie-tiny-zh's pretrained encoder and a fresh
  classifier) is saved once and loaded by both sides (ours: model.name=DIR; transformers:
  ErnieForSequenceClassification.from_pretrained);
- the same data, epochs, batch size, optimiser (torch's fused AdamW, lr, weight decay on weights
  only, betas, eps, clipping),
  linear schedule with the same warmup, fp32 on CPU; evaluation and a checkpoint once per epoch
  and the best model kept, on both sides;
- transformers with dynamic padding (our collator: a pure padding function) and
  train_sampling_strategy="group_by_length" (transformers 5's name for group_by_length);
- precision: ours as the recipe says (mixed_precision: auto, which is bf16 autocast on a CPU with
  AVX512-BF16 or AMX and fp32 elsewhere); transformers at its default, fp32, unless
  --peer-precision bf16 (TrainingArguments(bf16=True): the same CPU autocast). The table names
  each side's precision; the recipe's override train.mixed_precision=no compares fp32 to fp32.
Each side runs in a fresh process of its own (the set-up is shared through files), so that
neither inherits the other's heap or caches. With --rounds N the sides alternate which goes
first over N rounds (each run starts from the same saved weights and empty output directories)
and the table shows each side's fastest run. The default is 1 round, because a full run takes
minutes a side; use --rounds 3 where the machine's load may change between the runs (the method
of benchmarks/model.py, which defaults to 3). Wall time covers data loading, featurizing,
training and the final dev/test evaluation. Memory: "peak MiB" is the resident set sampled every
20 ms while the side runs, above its size when the side started (after imports); "max RSS" is the
child process's whole peak (ru_maxrss), imports included.
Target: ours >= 1.5x less wall time at equal dev accuracy (within 0.5 points).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _harness import rss_now

ROOT = Path(__file__).resolve().parents[1]


class PeakRSS:
    """Peak resident memory (MiB) above the level at entry, sampled from /proc/self/statm."""

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _rss(self) -> int:
        return rss_now()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def mib(self) -> float:
        return (self.peak - self.start) / 2**20


def _recipe_args(args: argparse.Namespace) -> list[str]:
    # 2 epochs, as the recipe: one epoch of 4,000 reviews (125 steps) would compare two runs
    # that have barely started.
    quick = ["data.max_train_samples=4000", "data.max_eval_samples=500", "train.epochs=2"] if args.quick else []
    return [*quick, *args.overrides]


def prepare(args: argparse.Namespace, work: Path) -> None:
    """Shared set-up, before either clock starts: the tokenizer and initial weights in work/init."""
    import torch

    from nlp.commands.finetune import hub_loaders  # resolves hub names such as ernie-tiny-zh
    from nlp.train.finetune import _build_tokenizer, build_model, load_task_data
    from nlp.train.recipe import load_recipe

    base = load_recipe(args.recipe, [*_recipe_args(args), f"train.output_dir={work / 'unused'}"])
    torch.manual_seed(base.train.seed)
    data = load_task_data(base)
    tok = _build_tokenizer(base, data.splits["train"], hub_loaders(), work / "none")
    tok.save_pretrained(work / "init")
    model = build_model(base, tok, data.label_names, hub_loaders())
    model.save_pretrained(work / "init")
    s = base.train
    print(f"data: {len(data.splits['train'])} train / {len(data.splits['dev'])} dev / {len(data.splits['test'])} test; "
          f"model {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters; tokenizer vocab "
          f"{tok.vocab_size}; {s.epochs:g} epochs, batch {s.data.batch_size}, lr {s.optim.lr}; "
          f"torch threads {torch.get_num_threads()}", flush=True)


def run_ours(args: argparse.Namespace, work: Path) -> dict:
    """The recipe through nlp.train, starting from the saved initial weights."""
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    recipe = load_recipe(args.recipe, [
        *_recipe_args(args), f"model.name={work / 'init'}", "model.preset=null", "model.init=pretrained",
        "model.config={}", f"tokenizer.name={work / 'init'}", "tokenizer.train=null",
        f"train.output_dir={work / 'ours'}", "train.eval.every_steps=null", "train.log.progress_bar=false",
        "train.log.tensorboard=false", "train.log.plots=false",
    ])
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        result = finetune(recipe)
        wall = time.perf_counter() - t0
    return {"wall": wall, "dev": result.dev["accuracy"], "test": result.test["accuracy"], "mem": mem.mib,
            "precision": {"no": "fp32"}.get(result.summary["mixed_precision"], result.summary["mixed_precision"])}


def run_transformers(args: argparse.Namespace, work: Path) -> dict:
    """transformers' Trainer with dynamic padding and group_by_length, same everything."""
    import transformers

    from nlp.tokenizer import DataCollatorWithPadding, load_tokenizer
    from nlp.train.finetune import featurize, load_task_data
    from nlp.train.recipe import load_recipe

    base = load_recipe(args.recipe, [*_recipe_args(args), f"train.output_dir={work / 'unused'}"])
    s = base.train
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        data = load_task_data(base)
        tok = load_tokenizer(work / "init")
        feats = {role: featurize(base, ds, tok, data.label_names) for role, ds in data.splits.items()}
        hf_model = transformers.ErnieForSequenceClassification.from_pretrained(work / "init")
        collate = DataCollatorWithPadding(pad_token_id=tok.pad_token_id)

        def compute(pred):
            logits, labels = pred.predictions, pred.label_ids
            return {"accuracy": float((logits.argmax(-1) == labels).mean())}

        targs = transformers.TrainingArguments(
            output_dir=str(work / "hf"), num_train_epochs=s.epochs, per_device_train_batch_size=s.data.batch_size,
            per_device_eval_batch_size=s.data.eval_batch_size or 2 * s.data.batch_size,
            learning_rate=s.optim.lr, weight_decay=s.optim.weight_decay, adam_beta1=s.optim.betas[0],
            adam_beta2=s.optim.betas[1], adam_epsilon=s.optim.eps, max_grad_norm=s.optim.max_grad_norm,
            lr_scheduler_type=s.schedule.name, warmup_steps=s.schedule.warmup_ratio, seed=s.seed,  # a float: a ratio
            eval_strategy="epoch", save_strategy="epoch", save_total_limit=s.checkpoint.keep_last + 1,
            load_best_model_at_end=True, metric_for_best_model="accuracy", greater_is_better=True,
            optim="adamw_torch_fused",  # what our optim.impl=auto uses on CPU (and transformers' default)
            train_sampling_strategy="group_by_length", use_cpu=True, report_to="none",
            logging_steps=s.log.every_steps, disable_tqdm=True, dataloader_num_workers=0,
            bf16=args.peer_precision == "bf16",
        )
        hf = transformers.Trainer(model=hf_model, args=targs, train_dataset=feats["train"],
                                  eval_dataset=feats["dev"], data_collator=collate, compute_metrics=compute)
        hf.train()
        dev = hf.evaluate(feats["dev"])["eval_accuracy"]
        test = hf.evaluate(feats["test"])["eval_accuracy"]
        wall = time.perf_counter() - t0
    return {"wall": wall, "dev": dev, "test": test, "mem": mem.mib,
            "precision": "bf16" if args.peer_precision == "bf16" else "fp32"}


SIDES = {"ours": run_ours, "transformers": run_transformers}
ORDER = ("ours", "transformers")  # the first round's order; the next rounds alternate it


def run_side(args: argparse.Namespace, side: str, work: Path) -> dict:
    """One side in a fresh process, from empty output directories; its figures."""
    for out in ("ours", "hf"):  # a previous round's checkpoints would be resumed, not retrained
        shutil.rmtree(work / out, ignore_errors=True)
    cmd = [sys.executable, __file__, "--side", side, "--work", str(work), "--recipe", args.recipe,
           "--peer-precision", args.peer_precision, *(["--quick"] if args.quick else []), *args.overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"the {side} side failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4,000 training reviews, 500 dev/test, 2 epochs")
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "sentiment-reviews.yaml"))
    parser.add_argument("--peer-precision", choices=["no", "bf16"], default="no",
                        help="transformers' precision: no (fp32, its default) or bf16 (CPU autocast)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs per side, alternating which goes first; the fastest is kept (default 1)")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)  # internal: one side, in a child
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="recipe overrides, e.g. train.epochs=1")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")

    if args.side:  # a child process: run one side, print its figures as the last line
        result = SIDES[args.side](args, args.work)
        result["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
        print(json.dumps(result))
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-finetune-"))
    prepare(args, work)
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for r in range(args.rounds):
        for side in ORDER if r % 2 == 0 else ORDER[::-1]:
            runs[side].append(run_side(args, side, work))
        if args.rounds > 1:
            ours, hf = runs["ours"][-1], runs["transformers"][-1]
            print(f"round {r + 1}/{args.rounds}: nlp.train {ours['wall']:.1f} s (dev {100 * ours['dev']:.2f}), "
                  f"transformers {hf['wall']:.1f} s (dev {100 * hf['dev']:.2f})", flush=True)
    results = {side: min(rs, key=lambda res: res["wall"]) for side, rs in runs.items()}

    print()
    print(f"{'':14s}{'precision':>10s}{'wall s':>10s}{'dev acc':>10s}{'test acc':>10s}{'peak MiB':>10s}{'max RSS':>10s}")
    for side, name in (("ours", "nlp.train"), ("transformers", "transformers")):
        r = results[side]
        print(f"{name:14s}{r['precision']:>10s}{r['wall']:10.1f}{100 * r['dev']:10.2f}{100 * r['test']:10.2f}"
              f"{r['mem']:10.0f}{r['max_rss']:10.0f}")
    ours, hf = results["ours"], results["transformers"]
    print(f"\nwall-time ratio transformers / nlp.train: {hf['wall'] / ours['wall']:.2f}x (target >= 1.5x); "
          f"dev accuracy difference {100 * (ours['dev'] - hf['dev']):+.2f} points (target within 0.5); "
          f"peak memory above start {ours['mem']:.0f} vs {hf['mem']:.0f} MiB")
    rounds = "one run each" if args.rounds == 1 else f"the best of {args.rounds} runs each"
    print(f"caveat: {rounds}; on a machine shared with other jobs the figures are noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
