"""Tokenizer benchmarks, both sides in one process, printing ratios.

    python benchmarks/tokenizer.py           # full corpora (35k reviews + 19k People's Daily lines)
    python benchmarks/tokenizer.py --quick   # a few thousand lines, for a smoke run

1. WordPiece vs transformers' BertTokenizerFast, same char-level vocab and texts (target >= 0.9x).
2. Hybrid (trained on the reviews): tokens per sentence vs character-level WordPiece, [UNK] rate.
3. Hybrid batch throughput vs the naive pipeline (jieba.lcut then the same `tokenizers` BPE
   model, one text at a time; target >= 3x with rjieba) and vs transformers' char-level
   BertTokenizerFast on the same texts, ids and ids+offsets (target >= 1x both); also the
   hybrid without the segment/encode pipeline and with the previous pre-tokenized word path.
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
    from nlp.tokenizer import hybrid as hybrid_module

    bpe = hybrid.backend_tokenizer
    bpe.no_truncation()
    bpe.no_padding()
    n = len(every)
    print(f"{n} texts, one call each, no truncation or padding. Both sides return input_ids, token_type_ids,\n"
          "attention_mask (plus offset_mapping into the original text in the 'ids+offsets' rows) and keep the\n"
          "per-row alignment (tokens, word ids, offsets) on the result. transformers: BertTokenizerFast on the\n"
          "character vocabulary of section 1 (no word segmentation). Timings interleaved, best of --repeat.")

    naive_every = every if not args.quick else every[::2]
    t_naive = best(lambda: [bpe.encode(jieba.lcut(t, HMM=False), is_pretokenized=True) for t in naive_every],
                   1) * n / len(naive_every)

    def word_path(**kw):  # the previous implementation: jieba's words handed over pre-tokenized
        hybrid._joined_ok = False
        try:
            return hybrid(every, **kw)
        finally:
            hybrid._joined_ok = True

    def no_pipeline(**kw):  # joined text, one encode_batch, segmentation not overlapped
        chunk, hybrid_module._PIPELINE_CHUNK = hybrid_module._PIPELINE_CHUNK, 1 << 30
        try:
            return hybrid(every, **kw)
        finally:
            hybrid_module._PIPELINE_CHUNK = chunk

    offs = {"return_offsets_mapping": True}
    t = race({
        "hybrid": lambda: hybrid(every), "hybrid_o": lambda: hybrid(every, **offs),
        "hf": lambda: hf_wp(every), "hf_o": lambda: hf_wp(every, **offs),
        "nopipe": no_pipeline, "nopipe_o": lambda: no_pipeline(**offs),
        "words": word_path, "words_o": lambda: word_path(**offs),
    }, args.repeat)
    print(f"{'':38s}{'ids':>10s}{'ids+offsets':>14s}   texts/s")
    rows = [("hybrid (" + hybrid.segmenter.backend + ")", "hybrid"), ("  same, segmentation not pipelined", "nopipe"),
            ("  same, words pre-tokenized (previous)", "words"), ("transformers char-level", "hf")]
    for label, key in rows:
        print(f"{label:38s}{n / t[key]:10.0f}{n / t[key + '_o']:14.0f}")
    print(f"{'naive jieba.lcut + BPE per text':38s}{n / t_naive:10.0f}")
    print(f"hybrid vs naive:        {t_naive / t['hybrid']:.2f}x (target >= 3x)")
    print(f"hybrid vs transformers: ids {t['hf'] / t['hybrid']:.2f}x, ids+offsets {t['hf_o'] / t['hybrid_o']:.2f}x "
          "(target >= 1x both)")


def race(fns: dict, repeat: int) -> dict:
    """Best time of each function, the functions interleaved round by round (fair under load)."""
    times = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k] = min(times[k], time.perf_counter() - t)
    return times


if __name__ == "__main__":
    main()
