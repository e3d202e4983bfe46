"""Models of one task side by side as users run them: texts per second through `nlp.pipeline`.

    python benchmarks/pipeline_speed.py --quick     # the fast shipped model and its export, 32 texts, 1 round
    python benchmarks/pipeline_speed.py             # the sentiment default against the fast shipped one,
                                                    # each on PyTorch and as its int8 export
    python benchmarks/pipeline_speed.py --models e5-small-zh-sentiment runs/sentiment-reviews --no-int8

Sides: each of --models (a hub name, a run, model or export directory) through
`nlp.pipeline(--task, model=MODEL)` as it comes (its own precision and max_length: what a user
who names the model gets), and, unless --no-int8, the same model's `nlp export --quantize int8`
on onnxruntime (written to a temporary directory first; an export directory is timed as given).
Texts: the first --texts reviews of reviews-zh's test split (real lengths), in calls of
--batch-size texts; each side warms up on two calls, then times every call once.

Each side runs in a process of its own with --threads threads; the sides alternate over --rounds
rounds and each side's best round counts. The ratios printed last are every side against the
first. Never run it beside another busy process: the figures become noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _harness import best_of_rounds, nlp_export, run_side_process

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ("e5-small-zh-sentiment", "ernie-tiny-zh-sentiment-small")


def _texts(n: int) -> list[str]:
    from nlp.tasks import datasets as nds

    test = nds.load("reviews-zh", "test")
    return list(test.select(range(min(n, len(test))))["text"])


def run_side(args: argparse.Namespace) -> None:
    """In the side's own process: warm up, then time every call once; print one JSON line."""
    import torch

    import nlp

    torch.set_num_threads(args.threads)
    pipe = nlp.pipeline(args.task, model=args.side)
    texts = _texts(args.texts)
    calls = [texts[i:i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    for call in calls[:2]:
        pipe(call)
    start = time.perf_counter()
    with torch.inference_mode():
        for call in calls:
            pipe(call)
    seconds = time.perf_counter() - start
    print(json.dumps({"texts_per_s": len(texts) / seconds, "seconds": seconds, "texts": len(texts)}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None,
                    help="hub names or run / model / export directories; the first is the reference (default: "
                         f"{' '.join(DEFAULT_MODELS)}; with --quick the last of them only)")
    ap.add_argument("--task", default="text-classification", help="the pipeline's task (default text-classification)")
    ap.add_argument("--no-int8", action="store_true", help="PyTorch sides only: no int8 exports")
    ap.add_argument("--texts", type=int, default=800)
    ap.add_argument("--batch-size", type=int, default=32, help="texts per pipeline call")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="32 texts, 1 round")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        run_side(args)
        return 0
    from nlp.deploy import is_export_dir

    if args.quick:
        args.texts, args.rounds = 32, 1
    if args.models is None:
        args.models = list(DEFAULT_MODELS[-1:] if args.quick else DEFAULT_MODELS)
    with tempfile.TemporaryDirectory() as tmp:
        sides: dict[str, str] = {}  # side name -> what the pipeline loads
        for i, model in enumerate(args.models):
            sides[model] = model
            if not args.no_int8 and not is_export_dir(model):
                print(f"exporting {model} to int8 ...", file=sys.stderr, flush=True)
                sides[f"{model} (int8 export)"] = nlp_export(model, Path(tmp) / f"int8-{i}", "--quantize", "int8")

        def run(side: str, _round: int):
            cmd = [sys.executable, __file__, "--side", sides[side], "--task", args.task, "--texts", str(args.texts),
                   "--batch-size", str(args.batch_size), "--threads", str(args.threads)]
            return run_side_process(cmd, args.threads, side)

        best = best_of_rounds(list(sides), args.rounds, run,
                              better=lambda new, old: new["texts_per_s"] > old["texts_per_s"],
                              on_result=lambda side, r, res: print(json.dumps({"round": r, "side": side, **(res or {})},
                                                                              ensure_ascii=False), flush=True))
    width = max(len(s) for s in sides)
    print(f"\n{'side':{width}s} {'texts/s':>9s} {'x first':>8s}")
    reference = best.get(next(iter(sides)))
    for side in sides:
        if side in best:
            ratio = f"{best[side]['texts_per_s'] / reference['texts_per_s']:.2f}x" if reference else "-"
            print(f"{side:{width}s} {best[side]['texts_per_s']:9.1f} {ratio:>8s}")
    return 0 if len(best) == len(sides) else 1


if __name__ == "__main__":
    sys.exit(main())
