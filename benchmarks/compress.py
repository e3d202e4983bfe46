"""The compression Pareto tables of the shipped sentiment and NER models: quality, size
and speed.

    python benchmarks/compress.py --quick                 # every row runs (figures meaningless)
    python benchmarks/compress.py --shape ernie-3.0-mini-zh   # a preset's shape, random weights: speed only
    python benchmarks/compress.py --static-variants     # static int8: which nodes stay float
    python benchmarks/compress.py \\
        --plain-run runs/student-plain --distilled-run runs/student-distilled
    python benchmarks/compress.py --task ner --accuracy-only \\
        --plain-run runs/ner-student-plain --distilled-run runs/ner-student-3l     # F1 and sizes
    python benchmarks/compress.py --task ner --no-scores \\
        --plain-run runs/ner-student-plain --distilled-run runs/ner-student-3l     # speed alone

--task sentiment: the teacher is the 6-layer model recipes/sentiment-reviews.yaml trains (--teacher
runs/sentiment-reviews; shipped as ernie-tiny-zh-sentiment until 2026-11-28, when a student of
multilingual-e5-small replaced it as the default); without --teacher the shipped 2-layer
ernie-tiny-zh-sentiment-small (the same tokenizer and labels) stands in. The students are runs
of recipes/sentiment-reviews.yaml with model.layer_map, with and without distill:; scored by
accuracy on reviews-zh's test split. --task ner: the teacher is the 6-layer model of
recipes/ner-zh.yaml (--teacher DIR: the shipped ernie-tiny-zh-ner is the 3-layer student distilled
from it), the students runs of recipes/ner-zh.yaml; scored by entity F1 on the test splits of
zh-ner and peoples-daily-1998-ner (as `nlp evaluate` scores them). See docs/compress.md for the
commands. Rows (each task runs its own subset, `TASKS[...].rows`):
    teacher-fp32        our PyTorch path, fp32
    teacher-bf16        our PyTorch path in the precision `auto` picks (bf16 on CPUs with it)
    teacher-int8-dyn    `nlp export --quantize int8` on onnxruntime
    teacher-int8-static `nlp export --quantize int8-static` (calibrated on 300 dev examples)
    student-plain       the student fine-tuned without a teacher, PyTorch fp32
    student-distilled   the student distilled from the teacher, PyTorch fp32
    distilled-bf16               that student, PyTorch bf16 (as teacher-bf16)
    distilled-int8-dyn           that student, dynamic int8
    distilled-int8-static        that student, static int8
    distilled-pruned-int8-static that student, vocabulary pruned to the train+dev tokens, static int8
    width-pruned        (sentiment) the teacher with half its heads and feed-forward neurons
                        (`nlp prune-width`), re-trained one epoch distilled from it (--width-run), fp32
    width-pruned-int8-dyn        that model, dynamic int8
    static-all-int8, static-float-embeddings, static-int8-layernorm, static-int8-softmax,
    static-int8-classifier       the teacher's static int8 with other node groups in float than
                        teacher-int8-static's (classifier, LayerNorm, softmax): `--static-variants`
                        runs these six rows (docs/compress.md, "The choices, measured")
Columns: the test metric(s), the model file on disk (safetensors as saved: the shipped teachers in
fp16, the students in fp32; model.onnx for the exports), throughput in texts/s (batches of 32
consecutive shuffled test texts, padded to their longest, real lengths up to 128 tokens; the
forward passes only: no NER decoding, see benchmarks/lexical.py for whole pipelines) and batch-1
p50 latency. Each row runs in a process of its own, the rows alternating over --rounds rounds;
the best round of each figure is kept (a row's metrics are computed in its first round only).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the teacher's static int8 with other node groups left in float (`nlp export --keep-fp32`): row ->
# the groups its export leaves in float (teacher-int8-static is the default: classifier, layernorm, softmax)
KEEP_FP32 = {
    "static-all-int8": (),
    "static-float-embeddings": ("embeddings", "classifier", "layernorm", "softmax"),
    "static-int8-layernorm": ("classifier", "softmax"),
    "static-int8-softmax": ("classifier", "layernorm"),
    "static-int8-classifier": ("layernorm", "softmax"),
}
# row -> (its model: the teacher, a student run, or the distilled student with a pruned vocabulary;
#         export: None for PyTorch, else `nlp export --quantize`; PyTorch precision)
ROW_PLAN = {
    "teacher-fp32": ("teacher", None, "fp32"),
    "teacher-bf16": ("teacher", None, "bf16"),
    "teacher-int8-dyn": ("teacher", "int8", None),
    "teacher-int8-static": ("teacher", "int8-static", None),
    "student-plain": ("plain", None, "fp32"),
    "student-distilled": ("distilled", None, "fp32"),
    "distilled-bf16": ("distilled", None, "bf16"),
    "distilled-int8-dyn": ("distilled", "int8", None),
    "distilled-int8-static": ("distilled", "int8-static", None),
    "distilled-pruned-int8-static": ("distilled-pruned", "int8-static", None),
    "width-pruned": ("width", None, "fp32"),
    "width-pruned-int8-dyn": ("width", "int8", None),
    **{row: ("teacher", "int8-static", None) for row in KEEP_FP32},
}
STATIC_VARIANTS = ("teacher-int8-static", *KEEP_FP32)


@dataclass(frozen=True)
class Task:
    """What one --task compares: its shipped teacher, its data, its metric, its rows."""

    teacher: str | None                    # directory under nlp/assets; None: not shipped, give --teacher
    dataset: str                           # test texts (timing), calibration (its dev split), vocabulary pruning
    scored: tuple[tuple[str, str], ...]    # (dataset, split): one metric column each
    metric: str                            # "accuracy" (from the timed batches' argmax) or the task's metric key
    rows: tuple[str, ...]
    work_dir: str


TASKS = {
    # the tables' teacher is a run of recipes/sentiment-reviews.yaml (--teacher); the shipped
    # 2-layer student of it stands in without one
    "sentiment": Task("ernie-tiny-zh-sentiment-small", "reviews-zh", (("reviews-zh", "test"),), "accuracy",
                      ("teacher-fp32", "teacher-bf16", "teacher-int8-dyn", "teacher-int8-static", "student-plain",
                       "student-distilled", "distilled-int8-static", "distilled-pruned-int8-static", "width-pruned",
                       "width-pruned-int8-dyn"),
                      "runs/compress-bench"),
    # ernie-tiny-zh's 7,000 characters: pruning saves ~7% (docs/compress.md), so no pruned row
    # the shipped ernie-tiny-zh-ner is the 3-layer student; its 6-layer teacher is a run of recipes/ner-zh.yaml
    "ner": Task(None, "zh-ner", (("zh-ner", "test"), ("peoples-daily-1998-ner", "test")), "f1",
                ("teacher-fp32", "teacher-bf16", "teacher-int8-dyn", "teacher-int8-static", "student-plain",
                 "student-distilled", "distilled-bf16", "distilled-int8-dyn", "distilled-int8-static"),
                "runs/compress-bench-ner"),
}


def _teacher(task: Task = TASKS["sentiment"]) -> Path:
    import nlp

    if task.teacher is None:
        raise SystemExit("this task's teacher is not shipped: give --teacher, the 6-layer model directory that "
                         "recipes/ner-zh.yaml trains (docs/compress.md, the NER student)")
    return Path(nlp.__file__).parent / "assets" / task.teacher


def shape_model(preset: str, work: Path, task: Task = TASKS["sentiment"]) -> Path:
    """A model directory of a preset's shape with random weights, the task's head and the shipped
    teacher's tokenizer and labels (its vocabulary size): for the speed columns of a shape whose
    weights are not available offline (ERNIE 3.0's), never for its accuracy. Built once."""
    import torch

    from nlp.models import preset_config
    from nlp.tasks import ErnieForSequenceClassification
    from nlp.tokenizer import load_tokenizer

    target = work / f"shape-{preset}"
    if (target / "config.json").is_file():
        return target
    teacher = _teacher(task)
    tok = load_tokenizer(teacher)
    labels = json.loads((teacher / "config.json").read_text(encoding="utf-8"))["id2label"]
    config = preset_config(preset, num_labels=len(labels), vocab_size=len(tok.get_vocab()))
    config.id2label = {int(k): v for k, v in labels.items()}
    config.label2id = {v: int(k) for k, v in labels.items()}
    torch.manual_seed(0)
    ErnieForSequenceClassification(config).save_pretrained(target)
    tok.save_pretrained(target)
    return target


def _train_dev_texts(dataset: str) -> list[str]:
    from nlp.tasks.datasets.builtin import load_builtin

    ds, _ = load_builtin(dataset)
    return [t for split in ("train", "dev") for t in _texts(ds[split])]


def _texts(rows) -> list[str]:
    """A split's raw texts: classification's `text`, token classification's characters joined."""
    return list(rows["text"]) if "text" in rows.column_names else ["".join(t) for t in rows["tokens"]]


def prepare(work: Path, plain: Path, distilled: Path, task: Task = TASKS["sentiment"],
            rows: tuple[str, ...] | None = None, width: Path | None = None,
            teacher: Path | None = None, stand_in: bool = False) -> dict[str, Path]:
    """Each row's model: a model directory (PyTorch rows) or an export directory (built once into
    `work`, reused by later calls). `teacher`: a model or run directory in place of the task's
    shipped model. `stand_in` (--quick): a student or width run that does not exist is replaced by
    a 2-layer cut of the teacher, so that every row runs on a fresh clone (figures meaningless)."""
    from nlp.deploy import export_model
    from nlp.tasks.model_dirs import find_model_dir
    from nlp.train.calibration import calibration_split
    from nlp.train.vocab_pruning import prune_vocabulary

    work.mkdir(parents=True, exist_ok=True)
    rows = rows or task.rows
    models = {"teacher": lambda: find_model_dir(teacher) if teacher else _teacher(task),
              "plain": lambda: _run_model(plain, "--plain-run", stand_in, work, task, teacher),
              "distilled": lambda: _run_model(distilled, "--distilled-run", stand_in, work, task, teacher),
              "width": lambda: _run_model(width, "--width-run", stand_in, work, task, teacher)}

    def pruned() -> Path:
        target = work / "distilled-pruned"
        if not target.is_dir():
            prune_vocabulary(models["distilled"](), _train_dev_texts(task.dataset), target)
        return target

    models["distilled-pruned"] = pruned
    out = {}
    for row in rows:
        model, quantize, _ = ROW_PLAN[row]
        source = models[model]()
        if quantize is None:
            out[row] = source
            continue
        target = work / row
        if not (target / "manifest.json").is_file():
            kw = {}
            if quantize == "int8-static":
                kw["calibration"] = calibration_split(source, task.dataset, split="dev", size=300)
            if row in KEEP_FP32:
                kw["keep_fp32"] = KEEP_FP32[row]
            export_model(source, target, quantize=quantize, force=target.exists(), **kw)
        out[row] = target
    return out


# the command that makes each run a row reads (docs/compress.md has the whole sequence)
_RUN_COMMANDS = {
    "--plain-run": "nlp finetune recipes/sentiment-reviews.yaml model.name=runs/sentiment-narrow-ft/model "
                   "tokenizer.name=runs/sentiment-narrow-ft/model model.layer_map=[0,1] train.output_dir=runs/student-plain",
    "--distilled-run": "the `train.output_dir=runs/student-distilled` command of docs/compress.md (a distilled student)",
    "--width-run": "`nlp prune-width` then the `train.output_dir=runs/sentiment-narrow-ft` command of docs/compress.md",
}


def _run_model(path: Path, flag: str, stand_in: bool, work: Path, task: Task, teacher: Path | None) -> Path:
    """The model directory of a run a row reads; with `stand_in`, a 2-layer cut of the teacher where
    the run does not exist; else SystemExit naming the flag and the command that makes the run."""
    from nlp.tasks.model_dirs import find_model_dir

    if Path(path).expanduser().exists() or not stand_in:
        if not Path(path).expanduser().exists():
            raise SystemExit(f"{flag} {str(path)!r} does not exist: make it with {_RUN_COMMANDS[flag]}, give "
                             f"{flag} DIR, or run `python benchmarks/compress.py --quick`, which stands a 2-layer "
                             "cut of the teacher in for missing runs")
        return find_model_dir(path)
    target = work / "quick-stand-in"
    if not (target / "config.json").is_file():
        from nlp.tokenizer import load_tokenizer

        source = find_model_dir(teacher) if teacher else _teacher(task)
        from nlp.models import select_layers

        select_layers(_head_of(source).from_pretrained(source), [0, 1]).save_pretrained(target)
        load_tokenizer(source).save_pretrained(target)
    print(f"--quick: {flag} {path} does not exist; a 2-layer cut of the teacher stands in", file=sys.stderr)
    return target


def _head_of(model_dir: Path) -> type:
    from nlp.tasks.model_dirs import task_of_model
    from nlp.tasks.registry import get_task

    return get_task(task_of_model(model_dir)).head


def vocab_sizes(work: Path) -> None:
    """Bytes saved by vocabulary pruning: the sentiment teacher pruned to reviews-zh's train +
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
    print(f"{_teacher().name}: vocab {tok.vocab_size:,} -> {kept:,} tokens; model.safetensors "
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


def _test_set(task: Task, n: int | None) -> tuple[list[str], list]:
    """The texts that are timed (the test split of task.dataset, shuffled with seed 0, the first
    n) and their labels (sentiment's accuracy is scored on these texts)."""
    import random

    from nlp.tasks.datasets.builtin import load_builtin

    ds, _ = load_builtin(task.dataset)
    test = ds["test"]
    labels = list(test["label"]) if "label" in test.column_names else [None] * len(test)
    rows = list(zip(_texts(test), labels))
    random.Random(0).shuffle(rows)
    rows = rows[:n] if n else rows
    return [t for t, _ in rows], [y for _, y in rows]


def _runner(row: str, path: Path):
    """(the row's forward call: a batch of int64 arrays -> its logits, the model file's size,
    the module that `nlp evaluate` would score: onnxruntime behind BackendModule, or PyTorch)."""
    import torch

    if (path / "manifest.json").is_file():
        from nlp.deploy import OnnxBackend
        from nlp.tasks.backend import BackendModule

        backend = OnnxBackend(path, threads=torch.get_num_threads())
        return lambda b: backend(b)["logits"], (path / "model.onnx").stat().st_size, BackendModule(backend)
    from nlp.tasks.model_dirs import locate_model

    model = locate_model(path).spec.head.from_pretrained(path).eval()

    def run(b):
        with torch.inference_mode(), _autocast(row):
            return model(**{k: torch.from_numpy(v) for k, v in b.items()}).logits.float().numpy()

    return run, (path / "model.safetensors").stat().st_size, model


def _autocast(row: str):
    """bf16 autocast for the bf16 rows where the CPU has native bf16 (what precision `auto` picks)."""
    import torch

    from nlp.train.precision import cpu_has_fast_bf16

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=ROW_PLAN[row][2] == "bf16" and cpu_has_fast_bf16())


def _scores(task: Task, row: str, path: Path, net, n: int | None) -> dict[str, float]:
    """The task metric on each of task.scored (the first n examples of each), as `nlp evaluate`
    computes it, in the row's precision."""
    import torch

    from nlp.train.scoring import scoring_split

    out = {}
    for dataset, split in task.scored:
        scoring, _ = scoring_split(path, dataset, split=split, backend=getattr(net, "backend", None), max_samples=n)
        with torch.inference_mode(), _autocast(row):
            out[f"{dataset} {split}"] = float(scoring.score(net)[task.metric])
    return out


def worker(args: argparse.Namespace) -> None:
    """One row, one round: prints a JSON line."""
    import numpy as np
    import torch

    from nlp.tokenizer import load_tokenizer

    logging.disable(logging.WARNING)
    torch.set_num_threads(args.threads)
    task, path = TASKS[args.task], Path(args.path)
    run, size, net = _runner(args.row, path)
    tok = load_tokenizer(path)
    texts, labels = _test_set(task, args.texts)

    def batch(part):
        enc = tok(part, truncation=True, max_length=128, padding=True)
        return {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}

    big = [batch(texts[i:i + 32]) for i in range(0, len(texts), 32)]

    def quality(preds=None) -> dict[str, float] | None:
        if args.no_scores:
            return None
        if task.metric != "accuracy":
            return _scores(task, args.row, path, net, args.score_samples)
        preds = preds if preds is not None else [run(b).argmax(-1) for b in big]
        return {f"{task.dataset} test": float((np.concatenate(preds) == np.array(labels)).mean())}

    if args.accuracy_only:
        print(json.dumps({"row": args.row, "scores": quality(), "bytes": int(size), "texts_per_s": float("nan"),
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
    print(json.dumps({"row": args.row, "scores": quality(preds), "bytes": int(size), "texts_per_s": len(texts) / seconds,
                      "p50_ms": float(np.percentile(lat, 50))}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="sentiment", choices=list(TASKS))
    p.add_argument("--plain-run", default="runs/student-plain")
    p.add_argument("--distilled-run", default="runs/student-distilled")
    p.add_argument("--teacher", default=None,
                   help="the teacher's model or run directory (default: the task's shipped model; for --task ner the "
                        "6-layer model of recipes/ner-zh.yaml, which ernie-tiny-zh-ner was distilled from)")
    p.add_argument("--shape", default=None, metavar="PRESET",
                   help="time a preset's shape (e.g. ernie-3.0-mini-zh) with random weights as the teacher: speed "
                        "only (implies --no-scores); the teacher rows alone unless --rows says otherwise")
    p.add_argument("--width-run", default="runs/sentiment-narrow-ft",
                   help="the width-pruned teacher, re-trained (docs/compress.md, width pruning)")
    p.add_argument("--work-dir", default=None,
                   help="exports are kept here (default: runs/compress-bench, runs/compress-bench-ner for --task ner)")
    p.add_argument("--rows", nargs="*", default=None, choices=list(ROW_PLAN), help="default: the task's rows")
    p.add_argument("--static-variants", action="store_true",
                   help="the teacher's static int8 with each choice of node groups left in float (rows static-*)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--texts", type=int, default=None, help="test texts timed (default: the whole test split; sentiment's accuracy is "
                                                           "theirs, NER's F1 always the whole test splits)")
    p.add_argument("--latency-texts", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="64 texts, 10 timed one by one, 1 round")
    p.add_argument("--vocab-sizes", action="store_true", help="only the vocabulary pruning size figures (no timing)")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the exports and the pruned student into --work-dir, time nothing (a busy machine's "
                        "CPU-heavy half; the timed run then reuses them)")
    p.add_argument("--accuracy-only", action="store_true",
                   help="the test metric and file size only, one round, nothing timed (a busy machine)")
    p.add_argument("--worker", dest="row", default=None, help=argparse.SUPPRESS)
    p.add_argument("--path", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-scores", action="store_true",
                   help="time only, no test metric (NER's F1 over two test splits takes longer than the timing: "
                        "score them with --accuracy-only on a busy machine); also each row's later rounds")
    p.add_argument("--score-samples", type=int, default=None, help=argparse.SUPPRESS)  # NER's scored examples
    args = p.parse_args()
    task = TASKS[args.task]
    if args.shape and args.task != "sentiment":
        p.error("--shape builds a classification model: use it with --task sentiment")
    if args.shape and not args.row:
        args.rows = args.rows or [r for r in task.rows if ROW_PLAN[r][0] == "teacher"]
        args.no_scores = True
    if args.static_variants:
        args.rows = args.rows or list(STATIC_VARIANTS)
    args.rows = args.rows or list(task.rows)
    if args.row:
        return worker(args)
    work = Path(args.work_dir or task.work_dir)
    if args.shape:
        args.teacher = str(shape_model(args.shape, work, task))
    if args.vocab_sizes:
        return vocab_sizes(work)
    if args.quick:
        args.rounds, args.texts, args.latency_texts, args.score_samples = 1, 64, 10, 64
    if args.accuracy_only:
        args.rounds = 1
    paths = prepare(work, Path(args.plain_run), Path(args.distilled_run), task, tuple(args.rows), Path(args.width_run),
                    Path(args.teacher) if args.teacher else None, stand_in=args.quick)
    if args.prepare_only:
        for row, path in paths.items():
            print(f"{row}: {path}")
        return
    best: dict[str, dict] = {}
    for r in range(args.rounds):
        for row in (args.rows if r % 2 == 0 else args.rows[::-1]):
            cmd = [sys.executable, __file__, "--task", args.task, "--worker", row, "--path", str(paths[row]),
                   "--threads", str(args.threads), "--latency-texts", str(args.latency_texts)] \
                + (["--texts", str(args.texts)] if args.texts else []) \
                + (["--accuracy-only"] if args.accuracy_only else []) \
                + (["--score-samples", str(args.score_samples)] if args.score_samples else []) \
                + (["--no-scores"] if args.no_scores or best.get(row, {}).get("scores") else [])  # scored once
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                print(f"{row}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            best[row] = merge_rounds(best.get(row), json.loads(done.stdout.strip().splitlines()[-1]))
    report(best, args)


def merge_rounds(prev: dict | None, res: dict) -> dict:
    """One row's figures over rounds: the best throughput and latency; the scores of the round
    that computed them (the first: they do not change)."""
    if prev is None:
        return res
    return {**res, "scores": res.get("scores") or prev.get("scores"), "texts_per_s": max(prev["texts_per_s"], res["texts_per_s"]),
            "p50_ms": min(prev["p50_ms"], res["p50_ms"])}


def report(best: dict[str, dict], args: argparse.Namespace) -> None:
    task = TASKS[args.task]
    columns = [f"{d} {s}" for d, s in task.scored]
    print(f"\n{args.task}: {task.metric} on {', '.join(columns)}; threads {args.threads}, best of {args.rounds} rounds")
    print(f"| row | {' | '.join(f'{c} {task.metric}' for c in columns)} | file MB | texts/s (b=32) | p50 ms (b=1) |")
    print("| --- |" + " ---: |" * (len(columns) + 3))
    for row in args.rows:
        r = best.get(row)
        if r is None:
            print(f"| {row} | failed |" + " |" * (len(columns) + 2))
            continue
        cells = " | ".join(f"{r['scores'][c]:.4f}" if r.get("scores") else "-" for c in columns)
        print(f"| {row} | {cells} | {r['bytes'] / 1e6:.2f} | {r['texts_per_s']:,.0f} | {r['p50_ms']:.2f} |")
    for line in targets(best, columns):
        print(line)


def targets(best: dict[str, dict], columns: list[str]) -> list[str]:
    """The compression targets (docs/compress.md), for the rows that ran: differences in points per scored column, and
    throughput ratios."""
    t, d, s, pl = (best.get(k) for k in ("teacher-fp32", "teacher-int8-dyn", "teacher-int8-static", "student-plain"))
    dist, b16 = best.get("student-distilled"), best.get("teacher-bf16")

    def points(a: dict, b: dict) -> str:
        if not (a.get("scores") and b.get("scores")):
            return "-"
        return ", ".join(f"{100 * (a['scores'][c] - b['scores'][c]):+.2f}" for c in columns)

    out = ["targets (docs/compress.md):"]
    if dist and pl:
        out.append(f"  distilled - plain student           {points(dist, pl)} points (target >= +1)")
    if dist and t:
        out.append(f"  distilled - teacher                 {points(dist, t)} points (target >= -1)")
        out.append(f"  distilled / teacher fp32 throughput {dist['texts_per_s'] / t['texts_per_s']:.2f}x (target >= 3x)")
    dd = best.get("distilled-int8-dyn")
    if dd and d:
        out.append(f"  distilled / teacher dynamic int8    {dd['texts_per_s'] / d['texts_per_s']:.2f}x (the same format)")
    if s and d and b16 and t:
        out.append(f"  static / dynamic int8 throughput    {s['texts_per_s'] / d['texts_per_s']:.2f}x (target >= 1.3x)")
        out.append(f"  static int8 / bf16 PyTorch          {s['texts_per_s'] / b16['texts_per_s']:.2f}x (target >= 1.0x)")
        out.append(f"  static int8 - fp32                  {points(s, t)} points (target >= -0.5)")
    w = best.get("width-pruned")
    if w and t:
        out.append(f"  width-pruned - teacher              {points(w, t)} points, "
                   f"{w['texts_per_s'] / t['texts_per_s']:.2f}x the fp32 teacher's throughput")
    small = [best[k] for k in ("distilled-int8-dyn", "distilled-int8-static", "distilled-pruned-int8-static")
             if k in best]
    if small and t:
        m = min(small, key=lambda r: r["bytes"])
        out.append(f"  smallest: {m['row']} {m['bytes'] / 1e6:.2f} MB (target <= 3 MB), "
                   f"{points(m, t)} points vs the shipped model (target >= -2)")
    return out


if __name__ == "__main__":
    main()
