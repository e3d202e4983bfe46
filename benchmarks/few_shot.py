"""Few-shot learning curves: k labelled examples per class, several seeds, on the built-in labelled
sets, each method on the same k examples and the same test texts.

    python benchmarks/few_shot.py --model multilingual-e5-small --out runs/few-shot     # the full grid
    python benchmarks/few_shot.py --model M --ks 8 16 --seeds 3 --test-samples 300 --max-length 64 \\
        --num-iterations 5 --out runs/few-shot                                           # what a busy CPU fits
    python benchmarks/few_shot.py --report --out runs/few-shot                           # the table only
    python benchmarks/few_shot.py --model M --zeroshot-sweep --max-length 64             # zero-shot words, on dev
    python benchmarks/few_shot.py --model M --reranker R --methods zeroshot zeroshot-rerank --out runs/few-shot
    python benchmarks/few_shot.py --quick                                                # a tiny model, k=2

Methods, per (dataset, k, seed): the k per class are drawn from the train split by the seed
(`sample_per_class`, what `task.few_shot` draws), written to a file, and every method trains on
that file:
- `setfit`: the few-shot recipe mode (`task.few_shot`, recipes/few-shot-reviews.yaml): the
  encoder tuned on pairs of the k examples, a logistic-regression head, then `--head-epochs`
  epochs of the head (docs/tasks.md, "Few-shot classification");
- `finetune`: ordinary fine-tuning of the same model on the same examples (a classification head
  on the same mean-pooled vector, every weight trained: `--ft-epochs` at `--ft-lr`);
- `tfidf`: TF-IDF character 1-3-grams + logistic regression (scikit-learn, C=10: no dev split
  to pick it on at k examples);
and once per dataset `zeroshot`: the zero-shot pipeline with the label words and template in
DATASETS, the best of ZEROSHOT_CANDIDATES on the dev split (`--zeroshot-sweep`), and with
`--reranker R` also `zeroshot-rerank`: label words and a template scored by a cross-encoder
(`text-ranking`) instead, each (hypothesis, text) pair one row, the text read as the passage
(first window), the label with the highest relevance logit predicted; its words and template
(ZEROSHOT_RERANK) are the best on dev for it (`--zeroshot-sweep --reranker R`). The
last row, fine-tuning the same e5 model on the whole train split, is a recorded figure
(RECORDED_FULL: on reviews-zh the teacher of the shipped e5-small-zh-sentiment; on inews a run of
recipes/news-inews.yaml on it at the cells' 64 tokens: retraining either is a long run).

Scores: accuracy and macro F1 on the test split (a fixed random `--test-samples` subset, the same
for every cell; all of it when 0), mean and standard deviation over the seeds. Each cell is
written to OUT/<dataset>/<cell>.json when it finishes, so a grid can be run in parts and resumed
(existing cells are kept); `--report` prints the table from the cells there. scikit-learn is
needed for the TF-IDF rows (`pip install scikit-learn`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# dataset -> the label words (by label name) and template the zero-shot rows use: the candidates
# of ZEROSHOT_CANDIDATES that scored best on the dev split (--zeroshot-sweep), never on test
DATASETS = {
    "reviews-zh": {"labels": {"negative": "消极", "positive": "积极"}, "template": "顾客{}"},
    "inews": {"labels": {"positive": "积极", "neutral": "中立", "negative": "消极"}, "template": "{}"},
}
# the same for the zeroshot-rerank rows: the best on dev for the cross-encoder of docs/ranking.md
# (recipes/rerank-titles.yaml on the e5 student, BM25 negatives; --zeroshot-sweep --reranker)
ZEROSHOT_RERANK = {
    "reviews-zh": {"labels": {"negative": "不满意", "positive": "满意"}, "template": "{}"},
    "inews": {"labels": {"positive": "正能量", "neutral": "中性", "negative": "负能量"}, "template": "{}的新闻"},
}
# dataset -> the label-word sets and templates --zeroshot-sweep tries on the dev split
ZEROSHOT_CANDIDATES = {
    "reviews-zh": {"labels": [{"negative": "差评", "positive": "好评"},
                              {"negative": "消极", "positive": "积极"},
                              {"negative": "不满意", "positive": "满意"}],
                   "templates": ["{}", "这是一条{}", "顾客{}"]},
    "inews": {"labels": [{"positive": "正面", "neutral": "中性", "negative": "负面"},
                         {"positive": "积极", "neutral": "中立", "negative": "消极"},
                         {"positive": "好消息", "neutral": "普通消息", "negative": "坏消息"},
                         {"positive": "正能量", "neutral": "中性", "negative": "负能量"}],
              "templates": ["{}", "这是一条{}新闻", "这篇文章的情感倾向是{}", "{}的新闻"]},
}
# test accuracy of fine-tuning on the whole train split, as recorded (backbone, source)
RECORDED_FULL = {
    "reviews-zh": (0.8841, "the same e5 model fine-tuned on the whole train split, 3 epochs at 5e-5, 128 tokens: "
                           "the teacher of e5-small-zh-sentiment (its README); ernie-tiny-zh v5 on it 0.8591, "
                           "TF-IDF 1-3-gram LR 0.8502 (nlp/assets/ernie-tiny-zh/README.md)"),
    "inews": (0.7978, "the same e5 model fine-tuned on the whole train split, 3 epochs at 5e-5, 64 tokens, mean "
                      "pooling: nlp finetune recipes/news-inews.yaml model.name=E5_SMALL_ZH "
                      "model.config.classifier_pooling=mean data.max_length=64 train.optim.lr=5e-5 train.epochs=3 "
                      "(macro F1 0.7401); ernie-tiny-zh v5 at 256 tokens 0.7698, TF-IDF 1-3-gram LR 0.7548 "
                      "(nlp/assets/ernie-tiny-zh/README.md)"),
}
METHODS = ("setfit", "finetune", "tfidf", "zeroshot", "zeroshot-rerank")
ZERO_SHOT = ("zeroshot", "zeroshot-rerank")  # one cell per dataset, no k


def _subset(split, samples: int):
    """A fixed random `samples` rows of `split` (seed 0, in split order); all of it when 0."""
    if samples and samples < len(split):
        rows = np.sort(np.random.default_rng(0).choice(len(split), samples, replace=False))
        split = split.select(rows.tolist())
    return split


def _splits(name: str, test_samples: int):
    from nlp.tasks.datasets import load

    dsd = load(name)
    names = dsd["train"].features["label"].names
    return dsd["train"], _subset(dsd["test"], test_samples), list(names)


def _write(path: Path, texts: list[str], labels: list[int], names: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "label": names[y]}, ensure_ascii=False) + "\n"
                            for t, y in zip(texts, labels)), encoding="utf-8")
    return path


def _scores(gold: list[int], pred: list[int], n: int) -> dict[str, float]:
    from nlp.tasks.classification.metrics import classification_metrics

    m = classification_metrics(gold, pred, labels=range(n))
    return {"accuracy": float(m["accuracy"]), "macro_f1": float(m["macro_f1"])}


def _finetune(method: str, model: str, train_file: Path, test_file: Path, names: list[str], k: int, seed: int,
              args: argparse.Namespace, work: Path) -> dict[str, float]:
    from nlp.recipes import recipe_path
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe

    common = [f"model.name={model}", "data.dataset=null", f"data.files={{train: {train_file}, test: {test_file}}}",
              "data.dev_split=null", "data.test_split=test", f"data.label_names=[{', '.join(names)}]",
              f"data.max_length={args.max_length}", f"train.output_dir={work}", f"train.seed={seed}",
              "train.eval.metric=loss", "train.mixed_precision=no", "train.log.progress_bar=false",
              "train.log.tensorboard=false", "train.log.plots=false", "train.checkpoint.keep_last=1"]
    if method == "setfit":
        extra = [f"task.few_shot.k={k}", f"task.few_shot.seed={seed}",
                 f"task.few_shot.num_iterations={args.num_iterations}",
                 f"task.few_shot.pair_batch_size={args.pair_batch_size}", f"train.epochs={args.head_epochs}"]
    else:  # ordinary fine-tuning, the same mean-pooled vector under the head
        extra = ["task.few_shot=null", "model.config.classifier_pooling=mean", f"train.epochs={args.ft_epochs}",
                 f"train.optim.lr={args.ft_lr}", "train.optim.weight_decay=0.01", "train.schedule.warmup_ratio=0.1"]
    result = finetune(load_recipe(recipe_path("few-shot-reviews"), [*common, *extra]))
    return {"accuracy": float(result.test["accuracy"]), "macro_f1": float(result.test["macro_f1"])}


def _tfidf(train_texts: list[str], train_labels: list[int], test_texts: list[str], test_labels: list[int],
           n: int) -> dict[str, float]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True)
    clf = LogisticRegression(C=10.0, max_iter=5000).fit(vec.fit_transform(train_texts), train_labels)
    return _scores(test_labels, clf.predict(vec.transform(test_texts)).tolist(), n)


def _zeroshot(pipe, texts: list[str], gold: list[int], names: list[str], words: dict[str, str],
              template: str) -> dict[str, float]:
    scores, *_ = pipe.scores(texts, [words[n] for n in names], hypothesis_template=template, truncate=True)
    return _scores(gold, scores.argmax(1).tolist(), len(names))


class RerankerZeroShot:
    """Zero-shot scores from a cross-encoder: the relevance logit of each (hypothesis, text)
    pair, the hypothesis as the query; the zero-shot pipeline's `scores` call shape."""

    def __init__(self, reranker: str, max_length: int) -> None:
        import nlp

        self.ranker = nlp.pipeline("text-ranking", model=reranker, max_length=max_length)

    def scores(self, texts: list[str], labels: list[str], *, hypothesis_template: str,
               truncate: bool) -> tuple[np.ndarray]:
        from nlp.tasks.zero_shot.labels import hypotheses

        queries = hypotheses(labels, hypothesis_template)
        pairs = [(q, text) for text in texts for q in queries]
        logits = self.ranker.score_pairs(pairs, truncate=truncate)
        return (np.asarray(logits, dtype=np.float64).reshape(len(texts), len(queries)),)


def _zeroshot_words(method: str, dataset: str) -> dict:
    """The label words and template a zero-shot method's test cell uses."""
    return (ZEROSHOT_RERANK if method == "zeroshot-rerank" else DATASETS)[dataset]


def _zeroshot_pipeline(model: str, args: argparse.Namespace, method: str = "zeroshot"):
    import nlp

    if method == "zeroshot-rerank":
        return RerankerZeroShot(args.reranker, args.max_length)
    return nlp.pipeline("zero-shot-classification", model=model, max_length=args.max_length)


def zeroshot_sweep(args: argparse.Namespace, model: str) -> None:
    """Every candidate (label words, template) of ZEROSHOT_CANDIDATES on a fixed `--dev-samples`
    of each dataset's dev split, by the embedding model and, with --reranker, by the reranker:
    the tables DATASETS' choice is read from."""
    from nlp.tasks.datasets import load

    for method in [m for m in ZERO_SHOT if m != "zeroshot-rerank" or args.reranker]:
        pipe = _zeroshot_pipeline(model, args, method)
        scorer = args.reranker if method == "zeroshot-rerank" else model
        for dataset in args.datasets:
            dsd = load(dataset)
            names = list(dsd["train"].features["label"].names)
            dev = _subset(dsd["dev"], args.dev_samples)
            texts, gold = list(dev["text"]), list(dev["label"])
            majority = np.bincount(gold, minlength=len(names)).max() / len(gold)
            print(f"\n### {dataset}, zero-shot by {scorer} on {len(texts)} dev texts (chance accuracy "
                  f"{1 / len(names):.3f}, the majority class's share {majority:.3f})")
            print("| label words | template | accuracy | macro F1 |\n| --- | --- | --- | --- |")
            candidates = ZEROSHOT_CANDIDATES[dataset]
            best = None
            for words in candidates["labels"]:
                for template in candidates["templates"]:
                    m = _zeroshot(pipe, texts, gold, names, words, template)
                    print(f"| {' / '.join(words[n] for n in names)} | {template!r} | {m['accuracy']:.4f} | "
                          f"{m['macro_f1']:.4f} |", flush=True)
                    if best is None or (m["accuracy"], m["macro_f1"]) > best[0]:
                        best = ((m["accuracy"], m["macro_f1"]), words, template)
            print(f"best on dev: {' / '.join(best[1][n] for n in names)} with {best[2]!r}")


def run_grid(args: argparse.Namespace, model: str, out: Path) -> None:
    from nlp.tasks.classification.few_shot import sample_per_class

    pipes: dict[str, object] = {}  # the zero-shot scorers, made when a zero-shot cell is missing
    for dataset in args.datasets:
        train, test, names = _splits(dataset, args.test_samples)
        folder = out / dataset
        folder.mkdir(parents=True, exist_ok=True)
        test_texts, test_labels = list(test["text"]), list(test["label"])
        cells = [(m, 0, 0) for m in ZERO_SHOT if m in args.methods]
        cells += [(m, k, s) for k in args.ks for s in range(args.seeds) for m in args.methods if m not in ZERO_SHOT]
        for method, k, seed in cells:
            path = folder / (f"{method}.json" if method in ZERO_SHOT else f"{method}-k{k}-s{seed}.json")
            if path.exists():
                continue
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                tmp = Path(tmp)
                if method in ZERO_SHOT:
                    if method not in pipes:
                        pipes[method] = _zeroshot_pipeline(model, args, method)
                    words = _zeroshot_words(method, dataset)
                    scores = _zeroshot(pipes[method], test_texts, test_labels, names, words["labels"],
                                       words["template"])
                else:
                    rows = sample_per_class(train["label"], k, seed)
                    texts, labels = [train[i]["text"] for i in rows], [train[i]["label"] for i in rows]
                    if method == "tfidf":
                        scores = _tfidf(texts, labels, test_texts, test_labels, len(names))
                    else:
                        scores = _finetune(method, model, _write(tmp / "train.jsonl", texts, labels, names),
                                           _write(tmp / "test.jsonl", test_texts, test_labels, names), names,
                                           k, seed, args, tmp / "run")
            cell = {"dataset": dataset, "method": method, "k": k, "seed": seed, **scores,
                    "seconds": round(time.perf_counter() - start, 1), "test_texts": len(test_texts),
                    "majority_accuracy": float(np.bincount(test_labels).max() / len(test_labels)),
                    "settings": {key: getattr(args, key) for key in ("max_length", "num_iterations", "pair_batch_size",
                                                                     "head_epochs", "ft_epochs", "ft_lr")}}
            if method in ZERO_SHOT:
                cell["settings"]["zeroshot"] = _zeroshot_words(method, dataset)
            if method == "zeroshot-rerank":
                cell["settings"]["reranker"] = str(args.reranker)
            path.write_text(json.dumps(cell, indent=1), encoding="utf-8")
            print(f"{dataset} {method} k={k} seed={seed}: accuracy {scores['accuracy']:.4f}, macro F1 "
                  f"{scores['macro_f1']:.4f} ({cell['seconds']} s)", flush=True)


def report(out: Path) -> None:
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        cells = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        if not cells:
            continue
        dataset = folder.name
        n_labels = len(DATASETS.get(dataset, {}).get("labels", {})) or None
        majority = next((c["majority_accuracy"] for c in cells if "majority_accuracy" in c), None)
        print(f"\n### {dataset} (test texts: {cells[0]['test_texts']}; chance accuracy {1 / n_labels:.3f}"
              + (f", the majority class's share {majority:.3f})" if majority is not None else ")"))
        print("| method | k | seeds | accuracy mean ± sd | macro F1 mean ± sd |\n| --- | --- | --- | --- | --- |")
        groups: dict[tuple[str, int], list[dict]] = {}
        for c in cells:
            groups.setdefault((c["method"], c["k"]), []).append(c)
        for (method, k), group in sorted(groups.items(), key=lambda kv: (kv[0][1], METHODS.index(kv[0][0]))):
            acc = np.array([c["accuracy"] for c in group])
            f1 = np.array([c["macro_f1"] for c in group])
            print(f"| {method} | {k or '-'} | {len(group)} | {acc.mean():.4f} ± {acc.std():.4f} | "
                  f"{f1.mean():.4f} ± {f1.std():.4f} |")
        if dataset in RECORDED_FULL:
            value, source = RECORDED_FULL[dataset]
            print(f"| full fine-tuning (recorded) | all | 1 | {value:.4f} (whole test split) | - |\n\n({source})")


def _quick_model(directory: Path, ranking: bool = False) -> str:
    """ernie-tiny-zh (shipped) with a mean-pooled sentence-embedding head: a stand-in embedding
    model; `ranking`: with a fresh one-score head instead, a stand-in cross-encoder."""
    import nlp
    from nlp.tasks.embedding.heads import ErnieForSentenceEmbedding
    from nlp.tasks.ranking.heads import ErnieForTextRanking
    from nlp.tokenizer import load_tokenizer

    asset = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
    head = ErnieForTextRanking if ranking else ErnieForSentenceEmbedding
    head.from_pretrained(asset).save_pretrained(directory)
    load_tokenizer(asset).save_pretrained(directory)
    return str(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--model", help="an embedding model: hub name or directory (mean-pooled, e.g. e5)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--ks", nargs="+", type=int, default=[8, 16, 32, 64], help="examples per class")
    parser.add_argument("--seeds", type=int, default=5, help="draws per k (seeds 0..N-1)")
    parser.add_argument("--methods", nargs="+", default=None, choices=METHODS,
                        help="default: all, zeroshot-rerank only with --reranker")
    parser.add_argument("--reranker", default=None,
                        help="a text-ranking model (directory or hub name): the zeroshot-rerank rows")
    parser.add_argument("--test-samples", type=int, default=0, help="a fixed random subset of the test split (0: all)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per text (longer ones keep their start)")
    parser.add_argument("--num-iterations", type=int, default=20, help="setfit: pairs per example / 2")
    parser.add_argument("--pair-batch-size", type=int, default=16)
    parser.add_argument("--head-epochs", type=float, default=2.0, help="setfit: epochs of the head after the pairs")
    parser.add_argument("--ft-epochs", type=float, default=10.0, help="finetune: epochs on the k examples")
    parser.add_argument("--ft-lr", type=float, default=5e-5, help="finetune: learning rate (every weight)")
    parser.add_argument("--out", type=Path, default=Path("runs/few-shot"), help="where the cells are written")
    parser.add_argument("--report", action="store_true", help="print the table of the cells in --out only")
    parser.add_argument("--zeroshot-sweep", action="store_true",
                        help="score every zero-shot candidate (label words, template) on the dev split, nothing else")
    parser.add_argument("--dev-samples", type=int, default=500, help="--zeroshot-sweep: a fixed random subset of dev")
    parser.add_argument("--quick", action="store_true", help="a stand-in model (ernie-tiny-zh), k=2, 1 seed, 8 test texts")
    args = parser.parse_args()
    if args.methods is None:
        args.methods = [m for m in METHODS if m != "zeroshot-rerank" or args.reranker or args.quick]
    elif "zeroshot-rerank" in args.methods and not (args.reranker or args.quick):
        parser.error("--methods zeroshot-rerank needs --reranker (a text-ranking model)")
    logging.basicConfig(level=logging.WARNING)
    if args.report:
        report(args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:
            args.ks, args.seeds, args.test_samples, args.max_length = [2], 1, 8, 32
            args.num_iterations, args.head_epochs, args.ft_epochs, args.dev_samples = 1, 1.0, 1.0, 8
            args.out = Path(tmp) / "cells"
            model = _quick_model(Path(tmp) / "model")
            args.reranker = _quick_model(Path(tmp) / "reranker", ranking=True)
        elif args.model is None:
            parser.error("--model is required (an embedding model, e.g. multilingual-e5-small), or --quick")
        else:
            model = args.model
        if args.quick or args.zeroshot_sweep:  # the quick mode runs the sweep and the grid
            zeroshot_sweep(args, model)
        if not args.zeroshot_sweep:
            run_grid(args, model, args.out)
            report(args.out)


if __name__ == "__main__":
    main()
