"""The compression Pareto table of the shipped sentiment model (issue 27): accuracy, size and speed.

    python benchmarks/compress.py --quick                 # every row runs (figures meaningless)
    /work/quiet python benchmarks/compress.py \\
        --plain-run runs/student-plain --distilled-run runs/student-distilled

Rows (the teacher is nlp/assets/ernie-tiny-zh-sentiment, 6 layers; the students are runs of
recipes/sentiment-reviews.yaml with model.layer_map, with and without distill:, see
docs/compress.md for the commands):
    teacher-fp32        our PyTorch path, fp32
    teacher-bf16        our PyTorch path in the precision `auto` picks (bf16 on CPUs with it)
    teacher-int8-dyn    `nlp export --quantize int8` on onnxruntime
    teacher-int8-static `nlp export --quantize int8-static` (calibrated on 300 dev reviews)
    student-plain       the student fine-tuned without a teacher, PyTorch fp32
    student-distilled   the student distilled from the teacher, PyTorch fp32
    distilled-int8-static        that student, static int8
    distilled-pruned-int8-static that student, vocabulary pruned to reviews-zh's train+dev tokens, static int8
    width-pruned        the teacher with half its heads and feed-forward neurons (`nlp prune-width`),
                        re-trained one epoch distilled from the teacher (--width-run), PyTorch fp32
    width-pruned-int8-dyn        that model, dynamic int8
Columns: test accuracy on reviews-zh's test split, the model file on disk (safetensors as
saved: the shipped teacher in fp16, the students in fp32; model.onnx for the exports),
throughput in texts/s (batches of 32 consecutive shuffled test reviews, padded to their longest,
real lengths up to 128 tokens) and batch-1 p50 latency. Each row runs in a process of its own,
the rows alternating over --rounds rounds; the best round of each figure is kept.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROWS = ("teacher-fp32", "teacher-bf16", "teacher-int8-dyn", "teacher-int8-static", "student-plain",
        "student-distilled", "distilled-int8-static", "distilled-pruned-int8-static", "width-pruned",
        "width-pruned-int8-dyn")


def _teacher() -> Path:
    import nlp

    return Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh-sentiment"


def prepare(work: Path, plain: Path, distilled: Path, width: Path) -> dict[str, Path]:
    """Each row's model: a model directory (PyTorch rows) or an export directory."""
    from nlp.deploy import export_model
    from nlp.tasks.model_dirs import find_model_dir
    from nlp.train.calibration import calibration_split
    from nlp.train.vocab_pruning import prune_vocabulary

    work.mkdir(parents=True, exist_ok=True)
    teacher, distilled_dir = _teacher(), find_model_dir(distilled)
    out = {"teacher-fp32": teacher, "teacher-bf16": teacher, "student-plain": find_model_dir(plain),
           "student-distilled": distilled_dir}

    def export(name: str, source: Path, **kw) -> Path:
        target = work / name
        if not (target / "manifest.json").is_file():
            if kw.get("quantize") == "int8-static":
                kw["calibration"] = calibration_split(source, "reviews-zh", split="dev", size=300)
            export_model(source, target, **kw)
        return target

    out["teacher-int8-dyn"] = export("teacher-int8-dyn", teacher, quantize="int8")
    out["teacher-int8-static"] = export("teacher-int8-static", teacher, quantize="int8-static")
    out["distilled-int8-static"] = export("distilled-int8-static", distilled_dir, quantize="int8-static")
    pruned = work / "distilled-pruned"
    if not pruned.is_dir():
        from nlp.tasks.datasets.builtin import load_builtin

        ds, _ = load_builtin("reviews-zh")
        prune_vocabulary(distilled_dir, list(ds["train"]["text"]) + list(ds["dev"]["text"]), pruned)
    out["distilled-pruned-int8-static"] = export("distilled-pruned-int8-static", pruned, quantize="int8-static")
    out["width-pruned"] = find_model_dir(width)
    out["width-pruned-int8-dyn"] = export("width-pruned-int8-dyn", out["width-pruned"], quantize="int8")
    return out


def vocab_sizes(work: Path) -> None:
    """Bytes saved by vocabulary pruning: ernie-tiny-zh-sentiment pruned to reviews-zh's train +
    dev tokens (nlp prune-vocab), and the ernie-3.0 mini / micro / nano shapes (random weights,
    2-label head) pruned to as many tokens. ERNIE 3.0's own 40,000-token vocabulary is not
    available offline; its Chinese part is one token per character, as ernie-tiny-zh's, so the
    count kept from ernie-tiny-zh's vocabulary (plus the characters it maps to [UNK]) stands in."""
    import torch

    from nlp.models import preset_config
    from nlp.tasks import ErnieForSequenceClassification
    from nlp.tasks.datasets.builtin import load_builtin
    from nlp.tokenizer import load_tokenizer
    from nlp.train.vocab_pruning import prune_model_vocab, prune_vocabulary

    ds, _ = load_builtin("reviews-zh")
    texts = list(ds["train"]["text"]) + list(ds["dev"]["text"])
    target = work / "teacher-pruned"
    if not target.is_dir():
        prune_vocabulary(_teacher(), texts, target)
    tok = load_tokenizer(_teacher())
    unk = {c for t in texts for c in t if not c.isspace() and tok.tokenize(c) == ["[UNK]"]}
    kept = load_tokenizer(target).vocab_size
    print(f"ernie-tiny-zh-sentiment: vocab 7,000 -> {kept:,} tokens; model.safetensors (fp16) "
          f"{(_teacher() / 'model.safetensors').stat().st_size / 1e6:.2f} MB -> "
          f"{(target / 'model.safetensors').stat().st_size / 1e6:.2f} MB")
    k = kept + len(unk)
    print(f"ernie-3.0 shapes pruned to {k:,} tokens ({kept:,} + {len(unk)} characters ernie-tiny-zh maps to [UNK]); fp32:")
    print("| shape | params before | params after | MB before | MB after | saved |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ("ernie-3.0-mini-zh", "ernie-3.0-micro-zh", "ernie-3.0-nano-zh"):
        torch.manual_seed(0)
        model = ErnieForSequenceClassification(preset_config(name, num_labels=2))
        small = prune_model_vocab(model, list(range(k)))
        sizes = []
        for m, sub in ((model, "full"), (small, "pruned")):
            d = work / "shapes" / f"{name}-{sub}"
            m.save_pretrained(d)
            sizes.append((sum(p.numel() for p in m.state_dict().values()), (d / "model.safetensors").stat().st_size))
        (n0, b0), (n1, b1) = sizes
        print(f"| {name} | {n0 / 1e6:.2f}M | {n1 / 1e6:.2f}M | {b0 / 1e6:.1f} | {b1 / 1e6:.1f} | {1 - b1 / b0:.0%} |")


def _test_set(n: int | None):
    import random

    from nlp.tasks.datasets.builtin import load_builtin

    ds, _ = load_builtin("reviews-zh")
    test = ds["test"]
    rows = list(zip(test["text"], test["label"]))
    random.Random(0).shuffle(rows)
    return rows[:n] if n else rows


def _runner(row: str, path: Path):
    import numpy as np
    import torch

    if (path / "manifest.json").is_file():
        from nlp.deploy import OnnxBackend

        backend = OnnxBackend(path, threads=torch.get_num_threads())
        return lambda b: backend(b)["logits"], (path / "model.onnx").stat().st_size
    from nlp.tasks import ErnieForSequenceClassification
    from nlp.train.precision import cpu_has_fast_bf16

    model = ErnieForSequenceClassification.from_pretrained(path).eval()
    bf16 = row.endswith("bf16") and cpu_has_fast_bf16()

    def run(b):
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return model(**{k: torch.from_numpy(v) for k, v in b.items()}).logits.float().numpy()

    return run, (path / "model.safetensors").stat().st_size + np.int64(0)


def worker(args: argparse.Namespace) -> None:
    """One row, one round: prints a JSON line."""
    import numpy as np
    import torch

    from nlp.tokenizer import load_tokenizer

    logging.disable(logging.WARNING)
    torch.set_num_threads(args.threads)
    path = Path(args.path)
    run, size = _runner(args.row, path)
    tok = load_tokenizer(path)
    rows = _test_set(args.texts)
    texts, labels = [t for t, _ in rows], np.array([y for _, y in rows])

    def batch(part):
        enc = tok(part, truncation=True, max_length=128, padding=True)
        return {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}

    big = [batch(texts[i:i + 32]) for i in range(0, len(texts), 32)]
    if args.accuracy_only:
        accuracy = float((np.concatenate([run(b).argmax(-1) for b in big]) == labels).mean())
        print(json.dumps({"row": args.row, "accuracy": accuracy, "bytes": int(size), "texts_per_s": float("nan"),
                          "p50_ms": float("nan")}))
        return
    ones = [batch([t]) for t in texts[: args.latency_texts]]
    for b in big[:2] + ones[:5]:  # warm-up: thread pools, oneDNN primitives, onnxruntime arenas
        run(b)
    t0 = time.perf_counter()
    preds = [run(b).argmax(-1) for b in big]
    seconds = time.perf_counter() - t0
    lat = []
    for b in ones:
        t = time.perf_counter()
        run(b)
        lat.append((time.perf_counter() - t) * 1e3)
    accuracy = float((np.concatenate(preds) == labels).mean())
    print(json.dumps({"row": args.row, "accuracy": accuracy, "bytes": int(size), "texts_per_s": len(texts) / seconds,
                      "p50_ms": float(np.percentile(lat, 50))}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plain-run", default="runs/student-plain")
    p.add_argument("--distilled-run", default="runs/student-distilled")
    p.add_argument("--width-run", default="runs/sentiment-narrow-ft",
                   help="the width-pruned teacher, re-trained (docs/compress.md, width pruning)")
    p.add_argument("--work-dir", default="runs/compress-bench", help="exports are kept here")
    p.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--texts", type=int, default=None, help="test reviews (default: the whole test split)")
    p.add_argument("--latency-texts", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="64 texts, 10 timed one by one, 1 round")
    p.add_argument("--vocab-sizes", action="store_true", help="only the vocabulary pruning size figures (no timing)")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the exports and the pruned student into --work-dir, time nothing (a busy machine's "
                        "CPU-heavy half; the timed run then reuses them)")
    p.add_argument("--accuracy-only", action="store_true",
                   help="accuracy and file size only, one round, nothing timed (a busy machine)")
    p.add_argument("--worker", dest="row", default=None, help=argparse.SUPPRESS)
    p.add_argument("--path", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.row:
        return worker(args)
    if args.vocab_sizes:
        return vocab_sizes(Path(args.work_dir))
    if args.quick:
        args.rounds, args.texts, args.latency_texts = 1, 64, 10
    if args.accuracy_only:
        args.rounds = 1
    paths = prepare(Path(args.work_dir), Path(args.plain_run), Path(args.distilled_run), Path(args.width_run))
    if args.prepare_only:
        for row, path in paths.items():
            print(f"{row}: {path}")
        return
    best: dict[str, dict] = {}
    for r in range(args.rounds):
        for row in (args.rows if r % 2 == 0 else args.rows[::-1]):
            cmd = [sys.executable, __file__, "--worker", row, "--path", str(paths[row]), "--threads", str(args.threads),
                   "--latency-texts", str(args.latency_texts)] + (["--texts", str(args.texts)] if args.texts else []) \
                + (["--accuracy-only"] if args.accuracy_only else [])
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                print(f"{row}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            res = json.loads(done.stdout.strip().splitlines()[-1])
            prev = best.get(row)
            best[row] = res if prev is None else {**res, "texts_per_s": max(prev["texts_per_s"], res["texts_per_s"]),
                                                  "p50_ms": min(prev["p50_ms"], res["p50_ms"])}
    report(best, args)


def report(best: dict[str, dict], args: argparse.Namespace) -> None:
    print(f"\nreviews-zh test, threads {args.threads}, best of {args.rounds} rounds")
    print("| row | test accuracy | file MB | texts/s (b=32) | p50 ms (b=1) |\n| --- | ---: | ---: | ---: | ---: |")
    for row in args.rows:
        r = best.get(row)
        if r is None:
            print(f"| {row} | failed | | | |")
            continue
        print(f"| {row} | {r['accuracy']:.4f} | {r['bytes'] / 1e6:.2f} | {r['texts_per_s']:,.0f} | {r['p50_ms']:.2f} |")
    t, d, s, pl = (best.get(k) for k in ("teacher-fp32", "teacher-int8-dyn", "teacher-int8-static", "student-plain"))
    dist, b16 = best.get("student-distilled"), best.get("teacher-bf16")
    print("targets (issue 27):")
    if dist and pl and t:
        print(f"  distilled - plain student accuracy  {100 * (dist['accuracy'] - pl['accuracy']):+.2f} points (target >= +1)")
        print(f"  distilled - teacher accuracy        {100 * (dist['accuracy'] - t['accuracy']):+.2f} points (target >= -1)")
        print(f"  distilled / teacher fp32 throughput {dist['texts_per_s'] / t['texts_per_s']:.2f}x (target >= 3x)")
    if s and d and b16 and t:
        print(f"  static / dynamic int8 throughput    {s['texts_per_s'] / d['texts_per_s']:.2f}x (target >= 1.3x)")
        print(f"  static int8 / bf16 PyTorch          {s['texts_per_s'] / b16['texts_per_s']:.2f}x (target >= 1.0x)")
        print(f"  static int8 - fp32 accuracy         {100 * (s['accuracy'] - t['accuracy']):+.2f} points (target >= -0.5)")
    w = best.get("width-pruned")
    if w and t:
        print(f"  width-pruned - teacher accuracy     {100 * (w['accuracy'] - t['accuracy']):+.2f} points, "
              f"{w['texts_per_s'] / t['texts_per_s']:.2f}x the fp32 teacher's throughput")
    small = [best[k] for k in ("distilled-int8-static", "distilled-pruned-int8-static") if k in best]
    if small and t:
        m = min(small, key=lambda r: r["bytes"])
        print(f"  smallest: {m['row']} {m['bytes'] / 1e6:.2f} MB (target <= 3 MB), accuracy "
              f"{100 * (m['accuracy'] - t['accuracy']):+.2f} points vs the shipped model (target >= -2)")


if __name__ == "__main__":
    main()
