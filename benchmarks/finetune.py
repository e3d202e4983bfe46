"""The sentiment recipe (nlp.train) against an equivalent transformers `Trainer` script.

    python benchmarks/finetune.py            # recipes/sentiment-reviews.yaml as written
    python benchmarks/finetune.py --quick    # 4,000 training reviews, 500 dev/test, 2 epochs

Same everything but the engine, in one process:
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
  train_sampling_strategy="group_by_length" (transformers 5's name for group_by_length).
Wall time covers training + the final dev/test evaluation on each side. Peak memory is the
process's resident set sampled every 20 ms during each side, minus its size when that side
started (both sides run in one process, so ru_maxrss cannot separate them).
Target (issue 6 section 5): ours >= 1.5x less wall time at equal dev accuracy (within 0.5 points).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class PeakRSS:
    """Peak resident memory (MiB) above the level at entry, sampled from /proc/self/statm."""

    def __enter__(self) -> "PeakRSS":
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4,000 training reviews, 500 dev/test, 2 epochs")
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "sentiment-reviews.yaml"))
    parser.add_argument("overrides", nargs="*", help="recipe overrides, e.g. train.epochs=1")
    args = parser.parse_args()

    import torch
    import transformers

    from nlp.tokenizer import DataCollatorWithPadding
    from nlp.commands.finetune import hub_loaders  # resolves hub names such as ernie-tiny-zh
    from nlp.train.finetune import TaskMetrics, build_model, featurize, finetune, load_task_data, _build_tokenizer
    from nlp.train.recipe import load_recipe

    # 2 epochs, as the recipe: one epoch of 4,000 reviews (125 steps) would compare two runs
    # that have barely started.
    quick = ["data.max_train_samples=4000", "data.max_eval_samples=500", "train.epochs=2"] if args.quick else []
    work = Path(tempfile.mkdtemp(prefix="bench-finetune-"))
    base = load_recipe(args.recipe, [*quick, *args.overrides, f"train.output_dir={work / 'unused'}"])
    torch.manual_seed(base.train.seed)

    # ---- shared set-up (not timed): tokenizer, initial weights, features
    data = load_task_data(base)
    tok = _build_tokenizer(base, data.splits["train"], hub_loaders(), work / "none")
    tok.save_pretrained(work / "init")
    model = build_model(base, tok, data.label_names, hub_loaders())
    model.save_pretrained(work / "init")
    n_params = sum(p.numel() for p in model.parameters())
    del model
    s = base.train
    print(f"data: {len(data.splits['train'])} train / {len(data.splits['dev'])} dev / {len(data.splits['test'])} test; "
          f"model {n_params / 1e6:.2f}M parameters; tokenizer vocab {tok.vocab_size}; {s.epochs:g} epochs, "
          f"batch {s.data.batch_size}, lr {s.optim.lr}; torch threads {torch.get_num_threads()}")

    # ---- ours: the recipe, starting from the saved initial weights
    ours_recipe = load_recipe(args.recipe, [
        *quick, *args.overrides, f"model.name={work / 'init'}", "model.preset=null", "model.init=pretrained",
        "model.config={}", f"tokenizer.name={work / 'init'}", "tokenizer.train=null",
        f"train.output_dir={work / 'ours'}", "train.eval.every_steps=null", "train.log.progress_bar=false",
        "train.log.tensorboard=false", "train.log.plots=false",
    ])
    with PeakRSS() as mem_ours:
        t0 = time.perf_counter()
        ours = finetune(ours_recipe)
        wall_ours = time.perf_counter() - t0

    # ---- transformers: Trainer with dynamic padding and group_by_length, same everything
    with PeakRSS() as mem_hf:
        t0 = time.perf_counter()
        feats = {role: featurize(base, ds, tok, data.label_names) for role, ds in data.splits.items()}
        hf_model = transformers.ErnieForSequenceClassification.from_pretrained(work / "init")
        collate = DataCollatorWithPadding(pad_token_id=tok.pad_token_id)
        metrics = TaskMetrics(base.task.name, data.label_names, hf_model, base)

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
        )
        hf = transformers.Trainer(model=hf_model, args=targs, train_dataset=feats["train"],
                                  eval_dataset=feats["dev"], data_collator=collate, compute_metrics=compute)
        hf.train()
        hf_dev = hf.evaluate(feats["dev"])["eval_accuracy"]
        hf_test = hf.evaluate(feats["test"])["eval_accuracy"]
        wall_hf = time.perf_counter() - t0
    del metrics

    ours_dev, ours_test = ours.dev["accuracy"], ours.test["accuracy"]
    print()
    print(f"{'':14s}{'wall s':>10s}{'dev acc':>10s}{'test acc':>10s}{'peak MiB':>10s}")
    print(f"{'nlp.train':14s}{wall_ours:10.1f}{100 * ours_dev:10.2f}{100 * ours_test:10.2f}{mem_ours.mib:10.0f}")
    print(f"{'transformers':14s}{wall_hf:10.1f}{100 * hf_dev:10.2f}{100 * hf_test:10.2f}{mem_hf.mib:10.0f}")
    speedup = wall_hf / wall_ours
    gap = 100 * (ours_dev - hf_dev)
    print(f"\nwall-time ratio transformers / nlp.train: {speedup:.2f}x (target >= 1.5x); "
          f"dev accuracy difference {gap:+.2f} points (target within 0.5)")
    print("caveat: one run each on a machine shared with other jobs; figures are noisy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
