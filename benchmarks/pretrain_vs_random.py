"""Does pretraining matter? ernie-tiny-zh vs the same architecture from random initialisation.

    python benchmarks/pretrain_vs_random.py                      # both tasks, both inits
    python benchmarks/pretrain_vs_random.py --quick              # 2,000 training items, 1 epoch
    python benchmarks/pretrain_vs_random.py --task ner --init random --out runs/cmp   # one cell

Each cell fine-tunes with the SAME recipe (recipes/sentiment-reviews.yaml or
recipes/ner-peoples-daily.yaml, pointed at `--model`, default the shipped `ernie-tiny-zh`), the
same tokenizer (the model's), the same settings and epochs; only `model.init` differs:
`pretrained` loads the weights, `random` builds the same config.json with fresh weights. Scores
are the exported (best-on-dev) model's on the fixed TEST split: accuracy on reviews-zh, entity
F1 on peoples-daily-1998-ner. Cells can run as separate processes (`--task/--init`) to use
several cores; each writes OUT/<task>-<init>/results.json, and `--report` prints the table from
whatever cells have finished, with the pretrained/random ratios.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = {
    "reviews": ("sentiment-reviews", "accuracy"),
    "ner": ("ner-peoples-daily", "f1"),
}


def overrides(task: str, init: str, model: str, out: Path, args: argparse.Namespace) -> list[str]:
    o = [
        f"model.name={model}", "model.preset=null", f"model.init={init}",
        # the model's own architecture and tokenizer; dropout as usual for fine-tuning
        "model.config={hidden_dropout_prob: 0.1}", "tokenizer.train=null",
        f"train.output_dir={out / f'{task}-{init}'}", f"train.epochs={args.epochs}",
        f"train.optim.lr={args.lr}", "train.log.progress_bar=false", "train.log.tensorboard=false",
        "train.eval.every_steps=null",  # evaluate at epoch ends only: the same for both inits
    ]
    if task == "ner":
        o.append("model.config={hidden_dropout_prob: 0.1, use_crf: false}")
    if args.max_train_samples:
        o.append(f"data.max_train_samples={args.max_train_samples}")
    if args.max_eval_samples:
        o.append(f"data.max_eval_samples={args.max_eval_samples}")
    return o


def run_cell(task: str, init: str, args: argparse.Namespace) -> dict:
    from nlp.commands.finetune import hub_loaders
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    name, metric = TASKS[task]
    recipe = load_recipe(ROOT / "recipes" / f"{name}.yaml", overrides(task, init, args.model, args.out, args))
    start = time.perf_counter()
    result = finetune(recipe, hub_loaders())
    cell = {"task": task, "init": init, "metric": metric, "dev": result.dev, "test": result.test,
            "wall_seconds": round(time.perf_counter() - start, 1), "steps": result.summary.get("steps"),
            "settings": {"epochs": args.epochs, "lr": args.lr, "max_train_samples": args.max_train_samples}}
    (args.out / f"{task}-{init}" / "cell.json").write_text(json.dumps(cell, indent=1), encoding="utf-8")
    return cell


def report(out: Path) -> None:
    cells = {}
    for path in sorted(out.glob("*/cell.json")):
        c = json.loads(path.read_text(encoding="utf-8"))
        cells[(c["task"], c["init"])] = c
    print(f"{'task':8s} {'metric':9s} {'pretrained':>11s} {'random':>8s} {'ratio':>6s}   (test split; dev in brackets)")
    for task, (_, metric) in TASKS.items():
        p, r = cells.get((task, "pretrained")), cells.get((task, "random"))
        def fmt(c, metric=metric):
            return f"{c['test'][metric]:.4f} [{c['dev'][metric]:.4f}]" if c and c.get("test") else "-"
        ratio = (f"{p['test'][metric] / r['test'][metric]:.3f}" if p and r and p.get("test") and r.get("test")
                 and r["test"][metric] else "-")
        print(f"{task:8s} {metric:9s} {fmt(p):>20s} {fmt(r):>20s} {ratio:>6s}")
        for c in (p, r):
            if c:
                print(f"         {c['init']:10s} {c['wall_seconds']:.0f} s, {c['steps']} steps, {c['settings']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="ernie-tiny-zh", help="hub name or model directory")
    ap.add_argument("--task", choices=[*TASKS, "both"], default="both")
    ap.add_argument("--init", choices=["pretrained", "random", "both"], default="both")
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--lr", type=float, default=5e-4, help="the same for both inits")
    ap.add_argument("--max-train-samples", type=int, default=None)
    ap.add_argument("--max-eval-samples", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="2,000 training items, 500 dev/test, 1 epoch")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "pretrain_vs_random")
    ap.add_argument("--report", action="store_true", help="only print the table of finished cells")
    args = ap.parse_args(argv)
    if args.quick:
        args.epochs = 1
        args.max_train_samples = args.max_train_samples or 2000
        args.max_eval_samples = args.max_eval_samples or 500
    if not args.report:
        tasks = list(TASKS) if args.task == "both" else [args.task]
        inits = ["pretrained", "random"] if args.init == "both" else [args.init]
        for task in tasks:
            for init in inits:
                cell = run_cell(task, init, args)
                print(json.dumps(cell, ensure_ascii=False), flush=True)
    report(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
