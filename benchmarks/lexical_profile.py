"""Where a lexical (or NER) pipeline's time goes: run it over the speed sentences of
benchmarks/lexical.py under py-spy, then group the samples into the pipeline's stages.

    py-spy record --format raw --rate 200 -o /tmp/lex.txt -- \\
        python benchmarks/lexical_profile.py run lexical-analysis=runs/lex-int8 --threads 2
    python benchmarks/lexical_profile.py stages /tmp/lex.txt

`run SPEC` is benchmarks/lexical.py's `--ours` side (`TASK[=MODEL][@PRECISION]`, PyTorch in
precision "auto" unless `@fp32`, an export directory on onnxruntime capped at --threads), warmed up on 50
sentences, then one pass over the last --sentences (2,000) of the PD-1998 test split at
--batch-size 32; `--user-dict N` adds N words of jieba's dictionary (every k-th word of two or
more characters) as a user dictionary. `stages FILE` reads py-spy's raw (collapsed) stacks and
puts each sample in the stage of the deepest frame that names one (`STAGES`), samples outside the
timed pass (loading, warm-up) left out. Run both on a quiet machine (nothing else on the CPUs).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# (stage, substrings of a frame "function (file:line)"), tried on each frame from the leaf up:
# the first frame that matches any names the sample's stage
STAGES = [
    ("model forward", ["(nlp/tasks/backend.py", "(nlp/deploy/backend.py"]),
    ("collation, batch to numpy", ["(nlp/tokenizer/collate.py", "_forward (nlp/tasks/base_pipeline.py"]),
    ("tokenization", ["(nlp/tokenizer/", "(nlp/tasks/char_windows.py"]),
    ("user dictionary", ["(nlp/tasks/lexical/userdict.py", "_apply_user_dict (", "_best_pos ("]),
    ("decoding (Viterbi)", ["(nlp/tasks/ner/crf.py", "(nlp/tasks/ner/constrained.py", "decode_tags (",
                            "decode_constrained_rows (", "_decode (", "_decode_padded ("]),
    ("output (dicts, entities)", ["_shape (", "entities_from_words (", "(nlp/tasks/ner/postprocess.py",
                                  "tags_and_scores ("]),
    ("words from tags (offsets)", ["words_from_tags (", "_words_of (", "analyse (nlp/tasks/lexical"]),
    ("windows (best window per character)", ["_emissions (", "_Window", "_tag_words (", "_Best.update ("]),
]
TIMED = "timed_pass ("


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for stage, keys in STAGES:
            if any(k in frame for k in keys):
                return stage
    return "other (input checks, pipeline glue)"


def stages(path: Path) -> dict[str, int]:
    """Samples per stage of the timed pass, from py-spy's raw output (`stack count` lines)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not any(TIMED in f for f in frames):
            continue
        counts[stage_of(frames)] += int(n)
    return dict(counts)


def user_words(n: int) -> list[str]:
    import jieba

    with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf-8") as f:
        words = [line.split()[0] for line in f if len(line.split()[0]) >= 2]
    step = max(1, len(words) // n)
    return words[::step][:n]


def timed_pass(pipe, texts: list[str]) -> float:
    start = time.perf_counter()
    pipe(texts)
    return time.perf_counter() - start


def run(args: argparse.Namespace) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    import logging

    import torch
    from lexical import pd_sentences

    import nlp

    logging.disable(logging.WARNING)
    torch.set_num_threads(args.torch_threads or args.threads)
    texts = [s.text for s in pd_sentences("test")[-args.sentences:]]
    spec, _, precision = args.spec.partition("@")
    task, _, model = spec.partition("=")
    kwargs = {"batch_size": args.batch_size}
    if args.user_dict:
        kwargs["user_dict"] = user_words(args.user_dict)
    tokenizer = None
    if model:
        from nlp.deploy import OnnxBackend, is_export_dir

        if is_export_dir(model):
            model, tokenizer = OnnxBackend(model, threads=args.threads), model
    if tokenizer is None:  # a PyTorch model
        kwargs["precision"] = precision or "auto"
    pipe = nlp.pipeline(task, model=model or None, tokenizer=tokenizer, **kwargs)
    with torch.inference_mode():
        pipe(texts[:50])
        seconds = timed_pass(pipe, texts)
    print(f"{args.spec} at {args.threads} thread(s)"
          f"{'' if args.torch_threads is None else f', torch {args.torch_threads} thread(s)'}"
          f"{f', {args.user_dict} user words' if args.user_dict else ''}: {sum(map(len, texts)) / seconds:,.0f} chars/s",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a pipeline over the speed sentences (py-spy's target)")
    r.add_argument("spec", help="TASK[=MODEL][@PRECISION], as benchmarks/lexical.py --ours")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--sentences", type=int, default=2000)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--torch-threads", type=int, default=None,
                   help="torch's intra-op threads (default --threads): an export's pipeline still runs torch ops")
    r.add_argument("--user-dict", type=int, default=0, help="this many words of jieba's dictionary as user words")
    s = sub.add_parser("stages", help="group py-spy raw stacks into the pipeline's stages")
    s.add_argument("files", type=Path, nargs="+")
    args = ap.parse_args(argv)
    if args.command == "run":
        run(args)
        return 0
    for path in args.files:
        counts = stages(path)
        total = sum(counts.values()) or 1
        print(f"{path} ({total} samples)")
        for stage, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"  {stage:40s} {100 * n / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
