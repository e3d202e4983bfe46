"""Reranker throughput side by side: (query, passage) pairs per second, same weights everywhere.

    python benchmarks/rerank_speed.py --quick        # a few pairs: checks that every side runs
    python benchmarks/rerank_speed.py                # 2,000 pairs, 3 rounds
    python benchmarks/rerank_speed.py --model runs/rerank-titles/model

Model: a reranker directory (default: the shipped ernie-tiny-zh with a fresh one-score head, as
`nlp finetune` with task text-ranking saves it; speed does not depend on the weights).
transformers loads the same directory as `AutoModelForSequenceClassification` (one label: the
same architecture and weights). Pairs: a query made of a review's first 16 characters, paired with
another review (real lengths, mean ~60 characters), in calls of --batch-size pairs, truncated to
--max-length tokens; every side tokenizes the pairs, runs the model and returns one score per
pair, i.e. the work of answering `POST /rerank`. Each side gets a call's pairs at once; what it
does inside is its own (transformers pads the call to its longest pair; ours sorts by length and
runs --pipeline-batch-size pairs per forward pass, by default the pipeline's own).

Sides (each in a process of its own, --threads threads; the sides alternate over --rounds rounds
and each side's best round counts):
    transformers-fp32      AutoModelForSequenceClassification + AutoTokenizer
    ours-fp32              nlp.pipeline("text-ranking").score_pairs on PyTorch
    ort-fp32, ort-int8     the same on `nlp export` / `nlp export --quantize int8`
The ratio printed last is the reranking issue's target: ort-int8 >= 3x transformers-fp32.
Never run it beside another busy process: the figures become noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _harness import best_of_rounds, run_side_process, onnx_exports, review_texts, shipped_encoder_with_head

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIDES = ("transformers-fp32", "ours-fp32", "ort-fp32", "ort-int8")


def _pairs(n: int) -> list[tuple[str, str]]:
    texts = review_texts(2 * n, shuffle=True, cycle=True)
    return [(texts[2 * i][:16], texts[2 * i + 1]) for i in range(n)]


def _scorer(side: str, model_dir: Path, exports: dict[str, str], args: argparse.Namespace):
    """A function [(query, passage)] -> one score per pair, for one side."""
    import torch

    if side == "transformers-fp32":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()

        @torch.inference_mode()
        def score(pairs):
            enc = tok([q for q, _ in pairs], [p for _, p in pairs], truncation="only_second",
                      max_length=args.max_length, padding=True, return_tensors="pt")
            return model(**enc).logits[:, 0].tolist()
        return score
    import nlp

    rows = {} if args.pipeline_batch_size is None else {"batch_size": args.pipeline_batch_size}
    target = exports[side] if side.startswith("ort-") else str(model_dir)
    pipe = nlp.pipeline("text-ranking", model=target, max_length=args.max_length, **rows)

    def score(pairs):
        with torch.inference_mode():
            return pipe.score_pairs(pairs, truncate=True)  # one window a pair, as transformers truncates
    return score


def run_side(args: argparse.Namespace) -> None:
    """In the side's own process: warm up, then time every call once; print one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    score = _scorer(args.side, Path(args.model), json.loads(args.exports), args)
    pairs = _pairs(args.pairs)
    calls = [pairs[i:i + args.batch_size] for i in range(0, len(pairs), args.batch_size)]
    for c in calls[:3]:
        score(c)
    start = time.perf_counter()
    n = 0
    for c in calls:
        n += len(score(c))
    seconds = time.perf_counter() - start
    print(json.dumps({"side": args.side, "pairs_per_s": n / seconds, "seconds": seconds, "pairs": n}))


def _prepare(args: argparse.Namespace, tmp: Path) -> tuple[Path, dict[str, str]]:
    """The reranker directory (default: ernie-tiny-zh with a fresh head) and its two exports."""
    if args.model:
        model_dir = Path(args.model)
    else:
        import torch

        from nlp.tasks.ranking import ErnieForTextRanking

        torch.manual_seed(0)
        model_dir = shipped_encoder_with_head(ErnieForTextRanking, tmp / "ernie-tiny-zh-reranker")
    exports = onnx_exports(model_dir, tmp)
    return model_dir, exports


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a reranker directory (default: ernie-tiny-zh with a fresh head)")
    ap.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32, help="pairs per call (one /rerank request's texts)")
    ap.add_argument("--pipeline-batch-size", type=int, default=None,
                    help="ours: pairs per forward pass inside the pipeline (default: the pipeline's default)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="64 pairs, 1 round")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--exports", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        run_side(args)
        return 0
    if args.quick:
        args.pairs, args.rounds = 64, 1
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, exports = _prepare(args, Path(tmp))

        def run(side: str, _round: int):
            cmd = [sys.executable, __file__, "--side", side, "--model", str(model_dir), "--exports", json.dumps(exports),
                   "--pairs", str(args.pairs), "--batch-size", str(args.batch_size),
                   "--max-length", str(args.max_length), "--threads", str(args.threads)]
            if args.pipeline_batch_size is not None:
                cmd += ["--pipeline-batch-size", str(args.pipeline_batch_size)]
            return run_side_process(cmd, args.threads, side)

        best = best_of_rounds(args.sides, args.rounds, run,
                              better=lambda new, old: new["pairs_per_s"] > old["pairs_per_s"],
                              on_result=lambda side, r, res: print(json.dumps({"round": r, **(res or {"side": side})}),
                                                                   flush=True))
    print(f"\n{'side':24s} {'pairs/s':>9s}")
    for side in args.sides:
        if side in best:
            print(f"{side:24s} {best[side]['pairs_per_s']:9.1f}")
    missing = [s for s in args.sides if s not in best]
    base = best.get("transformers-fp32")
    if base:
        for side in args.sides:
            if side in best and side != "transformers-fp32":
                print(f"{side} / transformers-fp32: {best[side]['pairs_per_s'] / base['pairs_per_s']:.2f}x")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
