"""Text correction side by side on SIGHAN-15: quality (sentence and character level) and speed.

    python benchmarks/correction.py --model runs/correction-csc/model            # ours vs pycorrector
    python benchmarks/correction.py --model runs/correction-csc/model --model runs/csc-export-int8
    python benchmarks/correction.py --quick                                      # a smoke run

Gold: `pycorrector/data/sighan2015_test.tsv` read from the installed pycorrector 1.1.4 wheel (707
sentences, 373 with errors; 10 pairs whose texts differ in length count at sentence level only),
through the task's own reader. Scores: `nlp.tasks.correction.metrics.csc_metrics` for every side
(sentence-level detection / correction P/R/F1 as SpellGCN and later papers count them, the share
of the 334 correct sentences changed, character-level P/R/F1).

Sides, each in a process of its own (loading and a warm-up excluded from the timing):
- ours: each --model (a run's model directory or an `nlp export` directory) through
  `nlp.pipeline("text-correction", ...)` at --threshold;
- pycorrector-proper: pycorrector's `ProperCorrector` (proper-noun and idiom correction by pinyin
  and stroke similarity with its shipped word lists): the rule corrector that runs offline.
pycorrector's other correctors could not run offline and are not sides: `ConfusionCorrector`
replaces what a user's confusion dictionary lists (pycorrector ships none, and with an empty one
it raises: its automaton is never built); `Corrector` (kenlm with a 2.95 GB language model it
downloads, and the kenlm package), `MacBertCorrector`,
`ErnieCscCorrector`, `T5Corrector`, `ConvSeq2SeqCorrector`, `DeepContextCorrector`,
`GptCorrector` (model weights downloaded from the Hugging Face hub).

Published SIGHAN-15 figures are printed for context only: those models were trained on SIGHAN's
own training sets plus 271k generated sentences (Wang et al. 2018) with base-size encoders, and
pycorrector's copy of the test set is not the 1,100-sentence official one, so they are not
comparable with a 6-layer model trained on synthetic errors alone.

Speed: characters per second over the test sentences (each side as it is scored, --rounds
rounds alternating sides, best round kept). Timing figures need a quiet machine; --quick runs
every side on the first 40 sentences with a model built on the spot (ernie-tiny-zh's own masked-LM
head as the correction head, untrained detection), which checks that every side runs, nothing more.
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

from _harness import best_of_rounds

PUBLISHED = [  # (model, detection F1, correction F1, source)
    ("Soft-Masked BERT", 73.5, 66.4, "Zhang et al., ACL 2020, table 2 (SIGHAN-15, sentence level)"),
    ("ERNIE-CSC", 74.64, 72.96, "PaddleNLP legacy/examples/text_correction/ernie-csc/README.md"),
    ("MacBERT4CSC", None, 77.89, "pycorrector/macbert/README.md, macbert4csc-base-chinese (P 82.64, R 73.66)"),
]
PEERS = ("pycorrector-proper",)


def sighan_pairs(split: str = "test") -> tuple[list[str], list[str]]:
    """SIGHAN-15 ("test"), or the synthetic dev split of csc-synthetic ("dev": what a threshold is
    chosen on)."""
    from nlp.tasks.correction.data import read_pairs
    from nlp.tasks.correction.resources import pycorrector_file

    if split == "dev":
        from nlp.tasks.datasets import load_builtin

        ds = load_builtin("csc-synthetic")[0]["dev"]
    else:
        ds = read_pairs(pycorrector_file("sighan2015_test.tsv"), unequal="keep")
    return list(ds["source"]), list(ds["target"])


def _apply(result: dict, threshold: float, same_sound: bool = False) -> str:
    """A pipeline result's target keeping only the corrections scored at least `threshold` (and,
    with `same_sound`, whose two characters share a toneless pinyin reading: pypinyin)."""
    from nlp.tasks.correction.pipeline import readings

    chars = list(result["source"])
    for e in result["errors"]:
        (wrong, right), = e["correction"].items()
        if e["score"] >= threshold and (not same_sound or readings(wrong) & readings(right)):
            chars[e["position"]] = right
    return "".join(chars)


def _corrector(side: str, threshold: float):
    """A function: list of texts -> list of results ({"target"}, and ours its scored errors), for
    one side (loaded here)."""
    if side in PEERS:
        import logging

        from loguru import logger
        logger.remove()  # pycorrector logs every sentence at DEBUG
        logging.disable(logging.INFO)
        from pycorrector import ProperCorrector

        model = ProperCorrector()
        return lambda texts: [{"target": model.correct(t)["target"]} for t in texts]
    import nlp

    pipe = nlp.pipeline("text-correction", model=side)
    return lambda texts: pipe(texts, threshold=threshold)


def run_side(side: str, n: int | None, threshold: float, sweep: list[float], split: str = "test") -> dict:
    """In this process: load the side, warm it up, correct the sentences, time it, score it."""
    from nlp.tasks.correction.metrics import csc_metrics

    sources, targets = sighan_pairs(split)
    sources, targets = sources[:n], targets[:n]
    t0 = time.perf_counter()
    # ours runs once at the lowest threshold asked for: every higher one keeps a subset of its
    # corrections (each position is decided alone), so one pass scores the whole sweep
    lowest = min([threshold, *sweep])
    correct = _corrector(side, lowest)
    load_s = time.perf_counter() - t0
    correct(sources[:8])
    t0 = time.perf_counter()
    results = correct(sources)
    seconds = time.perf_counter() - t0
    peer = side in PEERS
    predictions = [r["target"] if peer else _apply(r, threshold) for r in results]
    scores = csc_metrics(sources, targets, predictions)
    swept = {} if peer else {
        f"{t}{' same sound' if same else ''}": csc_metrics(sources, targets, [_apply(r, t, same) for r in results])
        for t in sweep for same in (False, True)}
    return {"side": side, "load_s": load_s, "seconds": seconds,
            "chars_per_s": sum(map(len, sources)) / max(seconds, 1e-9), "scores": scores, "sweep": swept,
            "examples": [{"source": s, "target": t, "prediction": p}
                         for s, t, p in zip(sources, targets, predictions) if p != s][:20]}


def _in_process(side: str, args: argparse.Namespace) -> dict | None:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, __file__, "--side", side, "--out", out, "--threshold", str(args.threshold),
           "--split", args.split, "--sweep", *map(str, args.sweep)]
    if args.n is not None:
        cmd += ["--n", str(args.n)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    try:
        if done.returncode != 0:
            print(f"# {side} failed (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        return json.loads(Path(out).read_text(encoding="utf-8"))
    finally:
        os.unlink(out)


def quick_model(directory: Path) -> str:
    """ernie-tiny-zh as a correction model before any fine-tuning: its MLM head corrects."""
    import nlp
    from nlp.tasks.correction.heads import ErnieForSpellingCorrection
    from nlp.tokenizer import load_tokenizer

    tiny = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
    ErnieForSpellingCorrection.from_pretrained(tiny).save_pretrained(directory)
    load_tokenizer(tiny).save_pretrained(directory)
    return str(directory)


def table(results: dict[str, dict]) -> str:
    keys = [("sentence_detection_precision", "det P"), ("sentence_detection_recall", "det R"),
            ("sentence_detection_f1", "det F1"), ("sentence_correction_precision", "cor P"),
            ("sentence_correction_recall", "cor R"), ("sentence_correction_f1", "cor F1"),
            ("false_positive_rate", "FPR"), ("char_detection_f1", "char det F1"),
            ("char_correction_f1", "char cor F1")]
    lines = ["| side | " + " | ".join(h for _, h in keys) + " | chars/s |", "|---" * (len(keys) + 2) + "|"]
    for side, r in results.items():
        s = r["scores"]
        lines.append(f"| {side} | " + " | ".join(f"{100 * s[k]:.1f}" for k, _ in keys) + f" | {r['chars_per_s']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", default=[], help="our model or export directory (repeatable)")
    p.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    p.add_argument("--threshold", type=float, default=None, help="default: the pipeline's DEFAULT_THRESHOLD")
    p.add_argument("--sweep", type=float, nargs="*", default=[],
                   help="also score our sides at these thresholds, each also keeping only the corrections "
                        "that sound alike (pypinyin), from the same pass")
    p.add_argument("--split", choices=("test", "dev"), default="test",
                   help="test: SIGHAN-15; dev: csc-synthetic's synthetic dev split (to choose a threshold on)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of every side")
    p.add_argument("--n", type=int, default=None, help="the first N sentences only")
    p.add_argument("--quick", action="store_true", help="40 sentences, a model built here: checks every side runs")
    p.add_argument("--json", type=Path, help="write every side's results here")
    p.add_argument("--side", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.threshold is None:
        from nlp.tasks.correction.pipeline import DEFAULT_THRESHOLD

        args.threshold = DEFAULT_THRESHOLD
    if args.side:  # a child: one side, results to --out
        result = run_side(args.side, args.n, args.threshold, args.sweep, args.split)
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:
            args.n, args.model = 40, [quick_model(Path(tmp) / "untrained")]
        if not args.model:
            p.error("give --model DIR (a text-correction model or export directory), or --quick")
        sides = [*args.model, *args.peers]
        best = best_of_rounds(sides, args.rounds, lambda side, r: _in_process(side, args),
                              better=lambda new, old: new["chars_per_s"] > old["chars_per_s"])
    missing = [s for s in sides if s not in best]
    if missing:
        raise SystemExit(f"sides that failed: {', '.join(missing)}")
    name = "SIGHAN-15" if args.split == "test" else "csc-synthetic dev"
    print(f"{name} ({best[sides[0]]['scores']['sentences']:.0f} sentences), threshold {args.threshold}, "
          f"OMP_NUM_THREADS={args.threads}; sentence level unless named; FPR: correct sentences changed")
    print(table({s: best[s] for s in sides}))
    for side in args.model:
        if best[side]["sweep"]:
            print(f"\n{side} by threshold (the same pass):")
            print(table({f"threshold {t}": {"scores": sc, "chars_per_s": best[side]["chars_per_s"]}
                         for t, sc in best[side]["sweep"].items()}))
    print("\nPublished SIGHAN-15 figures (trained on SIGHAN train + 271k generated sentences, base-size "
          "encoders, the official 1,100-sentence test set: context, not comparable):")
    for name, det, cor, src in PUBLISHED:
        print(f"  {name}: detection F1 {det if det is not None else '-'}, correction F1 {cor}  ({src})")
    if args.json:
        args.json.write_text(json.dumps(best, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
