"""Tokenizer benchmarks, both sides in one process, printing ratios (issue 2, section 6).

    python benchmarks/tokenizer.py           # full corpora (35k reviews + 19k People's Daily lines)
    python benchmarks/tokenizer.py --quick   # a few thousand lines, for a smoke run

1. WordPiece vs transformers' BertTokenizerFast, same char-level vocab and texts (target >= 0.9x).
2. Hybrid (trained on the reviews): tokens per sentence vs character-level WordPiece, [UNK] rate.
3. Hybrid batch throughput vs the naive pipeline (jieba.lcut then the same `tokenizers` BPE
   model, one text at a time; target >= 3x with rjieba) and vs transformers' char-level
   BertTokenizerFast on the same texts (target >= 1x).
Timings are the best of `--repeat` runs; the machine may be shared, so read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tokenizer"))

from conftest import SPECIALS, read_peoples_daily, read_reviews, review_files  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="use a few thousand lines")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import jieba
    from transformers import BertTokenizerFast

    from nlp.tokenizer import WordPieceTokenizer, train_hybrid_tokenizer

    jieba.setLogLevel(50)
    reviews, daily = read_reviews(), read_peoples_daily()
    if args.quick:
        reviews, daily = reviews[::10], daily[::10]
    corpora = {"reviews": reviews, "peoples_daily": daily}
    print(f"corpora: reviews {len(reviews)} lines, People's Daily {len(daily)} lines; cpus={os.cpu_count()}")

    tmp = Path(tempfile.mkdtemp())
    chars = sorted({c.lower() for t in reviews + daily for c in t if not c.isspace()})
    (tmp / "vocab.txt").write_text("\n".join(SPECIALS + chars) + "\n", encoding="utf-8")
    ours_wp = WordPieceTokenizer.from_pretrained(tmp)
    hf_wp = BertTokenizerFast.from_pretrained(tmp)
    every = reviews + daily

    print("\n== 1. WordPiece vs transformers BertTokenizerFast (char-level vocab) ==")
    for label, kw in [("ids", {}), ("ids+offsets", {"return_offsets_mapping": True})]:
        t_ours = best(lambda: ours_wp(every, **kw), args.repeat)
        t_hf = best(lambda: hf_wp(every, **kw), args.repeat)
        print(f"{label:12s} ours {len(every) / t_ours:9.0f} texts/s  transformers {len(every) / t_hf:9.0f} "
              f"texts/s  ratio {t_hf / t_ours:.2f}x (target >= 0.9x)")

    print("\n== 2. Hybrid (jieba+BPE) trained on the reviews ==")
    files = review_files()
    if args.quick:
        f = tmp / "reviews_quick.txt"
        f.write_text("\n".join(reviews) + "\n", encoding="utf-8")
        files = [f]
    t0 = time.perf_counter()
    hybrid = train_hybrid_tokenizer(files, 30000)
    print(f"training on {len(reviews)} reviews: {time.perf_counter() - t0:.1f}s (target < 60s on 35k)")
    for name, texts in corpora.items():
        n_h = sum(map(len, hybrid(texts, add_special_tokens=False)["input_ids"]))
        n_c = sum(map(len, ours_wp(texts, add_special_tokens=False)["input_ids"]))
        hybrid.stats.clear()
        hybrid(texts)
        print(f"{name:14s} tokens/sentence hybrid {n_h / len(texts):6.1f}  char-WordPiece {n_c / len(texts):6.1f}"
              f"  ratio {n_h / n_c:.2f} ({100 * (1 - n_h / n_c):.0f}% shorter)  [UNK] rate {hybrid.unk_rate:.4%}")

    print("\n== 3. Hybrid throughput (reviews + People's Daily) ==")
    bpe = hybrid.backend_tokenizer
    hybrid.backend_tokenizer.no_truncation()
    hybrid.backend_tokenizer.no_padding()

    naive_every = every if not args.quick else every[::2]
    t_naive = best(lambda: [bpe.encode(jieba.lcut(t, HMM=False), is_pretokenized=True) for t in naive_every],
                   1) * len(every) / len(naive_every)
    t_h = best(lambda: hybrid(every), args.repeat)
    t_hf = best(lambda: hf_wp(every), args.repeat)
    print(f"hybrid batch ({hybrid.segmenter.backend}) {len(every) / t_h:9.0f} texts/s")
    print(f"naive jieba.lcut + BPE     {len(every) / t_naive:9.0f} texts/s  ratio {t_naive / t_h:.2f}x (target >= 3x)")
    print(f"transformers char-level    {len(every) / t_hf:9.0f} texts/s  ratio {t_hf / t_h:.2f}x (target >= 1x)")
    t_ho = best(lambda: hybrid(every, return_offsets_mapping=True), args.repeat)
    t_hfo = best(lambda: hf_wp(every, return_offsets_mapping=True), args.repeat)
    print(f"with offsets: hybrid {len(every) / t_ho:9.0f} texts/s  transformers {len(every) / t_hfo:9.0f} "
          f"texts/s  ratio {t_hfo / t_ho:.2f}x")


if __name__ == "__main__":
    main()
