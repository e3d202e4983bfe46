"""Information extraction with many schema types: one pooled call against one call per type.

    python benchmarks/extraction_batching.py --quick          # runs end to end (figures meaningless)
    python benchmarks/extraction_batching.py                  # ernie-tiny-zh-sized UIE, 200 reviews
    python benchmarks/extraction_batching.py --model RUN/model --types 1,5,10,20

For each schema size N (the first N of `TYPES`), texts/s of:
    pooled     `ie(texts, schema=N types)`: every (type, text) row of the level in one pool,
               sorted by length, `--batch-size` rows per forward pass (how the pipeline runs)
    per-type   `ie(texts, schema=[type])` once per type: what a caller looping over types, or a
               pipeline asking one prompt at a time, pays
and their ratio. Each side runs in a process of its own, alternating over rounds, best round
kept (benchmarks/_harness.py). The pooled side's texts/s should fall far slower than 1/N, and
its lead over per-type grow with N. The model: `--model`, or random weights at ernie-tiny-zh's
shape with its tokenizer (random weights cost what trained ones do; the heads' bias is set so
that few tokens pass position_prob, as with a trained model, so that relation-free schemas run
one level). Timing figures are only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _harness import best_of_rounds, review_texts  # noqa: E402

SIDES = ("pooled", "per-type")
TYPES = ["时间", "地点", "人物", "组织机构", "产品", "价格", "品牌", "数量", "事件", "评价对象",
         "颜色", "尺寸", "服务", "物流", "店铺", "型号", "材质", "功能", "口味", "日期"]


def make_model(out: Path, quick: bool) -> Path:
    """Random UIE weights at ernie-tiny-zh's shape (a toy in quick mode), its tokenizer."""
    import torch

    import nlp
    from nlp.models import ErnieConfig
    from nlp.tasks.extraction import ErnieForInformationExtraction
    from nlp.tokenizer import load_tokenizer

    asset = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
    config = ErnieConfig.from_pretrained(asset)
    if quick:
        config = config.replace(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    model = ErnieForInformationExtraction(config)
    for head in (model.linear_start, model.linear_end):
        torch.nn.init.constant_(head.bias, -3.0)
    model.save_pretrained(out)
    load_tokenizer(asset).save_pretrained(out)
    return out


def run_side(side: str, model: str, texts_file: str, n_types: int, batch_size: int, max_length: int) -> dict:
    """One timed pass of one side (in this process): texts/s after one warm-up call."""
    import nlp

    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    ie = nlp.pipeline("information-extraction", model=model, batch_size=batch_size, max_length=max_length)
    schema = TYPES[:n_types]

    def once() -> None:
        if side == "pooled":
            ie(texts, schema=schema)
        else:
            for t in schema:
                ie(texts, schema=[t])

    ie(texts[:8], schema=schema)  # kernels built, weights touched
    start = time.perf_counter()
    once()
    seconds = time.perf_counter() - start
    return {"side": side, "types": n_types, "texts": len(texts), "seconds": seconds, "texts_per_s": len(texts) / seconds}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a toy model, 16 texts, 1 and 5 types, one round")
    ap.add_argument("--model", help="a UIE model directory (default: random weights at ernie-tiny-zh's shape)")
    ap.add_argument("--types", default="1,5,10,20", help="schema sizes, comma-separated (at most 20)")
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0")) or None)
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: run one side and print its JSON
    ap.add_argument("--texts-file", help=argparse.SUPPRESS)
    ap.add_argument("--n-types", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        print(json.dumps(run_side(args.side, args.model, args.texts_file, args.n_types, args.batch_size,
                                  args.max_length)))
        return
    sizes = [1, 5] if args.quick else [int(x) for x in args.types.split(",")]
    if not sizes or max(sizes) > len(TYPES) or min(sizes) < 1:
        ap.error(f"--types takes sizes from 1 to {len(TYPES)}, got {args.types}")
    n_texts, rounds = (16, 1) if args.quick else (args.texts, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(make_model(Path(tmp) / "model", args.quick))
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(review_texts(n_texts, shuffle=True), ensure_ascii=False), encoding="utf-8")
        print(f"model {model if args.model else 'random, ' + ('toy' if args.quick else 'ernie-tiny-zh shape')}; "
              f"{n_texts} reviews; batch {args.batch_size}; max_length {args.max_length}; best of {rounds} round(s)")
        print(f"{'types':>5}  {'pooled texts/s':>15}  {'per-type texts/s':>17}  {'pooled / per-type':>17}")
        for n in sizes:
            def run(side: str, _round: int) -> dict | None:
                cmd = [sys.executable, __file__, "--side", side, "--model", model, "--texts-file", str(texts_file),
                       "--n-types", str(n), "--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
                if args.threads:
                    cmd += ["--threads", str(args.threads)]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{side} with {n} types failed:\n{done.stderr[-2000:]}")
                return json.loads(done.stdout.strip().splitlines()[-1])

            best = best_of_rounds(SIDES, rounds, run, better=lambda new, old: new["texts_per_s"] > old["texts_per_s"])
            pooled, per_type = best["pooled"]["texts_per_s"], best["per-type"]["texts_per_s"]
            print(f"{n:>5}  {pooled:>15.1f}  {per_type:>17.1f}  {pooled / per_type:>16.2f}x")


if __name__ == "__main__":
    main()
