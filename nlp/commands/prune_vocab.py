"""`nlp prune-vocab RUN_OR_MODEL --out DIR [--data ...]`: keep the tokens a task's data uses."""

from __future__ import annotations

import argparse

EPILOG = """examples:
  nlp prune-vocab runs/sentiment-reviews --out runs/sentiment-small           # the run's train + dev texts
  nlp prune-vocab runs/ner --out runs/ner-small --data peoples-daily-1998-ner --split train --split dev
  nlp prune-vocab runs/sentiment-reviews --out runs/s-small --corpus my_reviews.txt --min-count 2
  nlp prune-vocab ernie-tiny-zh-lexical --out lexical-small --corpus my_texts.txt   # a hub name, corpus alone
  nlp export runs/sentiment-small --out export/small-s8 --quantize int8-static --calibration reviews-zh

  # a multilingual model's XLM-R vocabulary (250,002 pieces) cut to what Chinese text uses: the
  # offline pretraining corpus plus the embedding tasks' training splits
  nlp prune-vocab runs/multilingual-e5-small --task feature-extraction --out runs/e5-small-zh \
      --pretraining-corpus --data inews-titles --data xinhua-idioms --split train

DIR is a normal model directory (config.json with the new vocab_size, model.safetensors,
vocab.txt and tokenizer.json with the kept tokens in their old order): nlp and transformers load
it. On the texts given the pruned tokenizer gives the same tokens (checked before DIR is written),
so the model's outputs there are unchanged; a token it dropped becomes [UNK] in other text.
See docs/compress.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("prune-vocab", help="keep only the tokens a task's data uses (smaller embeddings)",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="RUN_OR_MODEL", help="a fine-tuned run or model directory, or a hub name "
                                                        "(nlp hub ls)")
    p.add_argument("--out", required=True, metavar="DIR", help="the new model directory (must not exist)")
    p.add_argument("--data", action="append", default=None,
                   help="whose texts: a split of the run's own data (default train, unless --corpus or "
                        "--pretraining-corpus alone is given), a dataset name or a file (repeatable)")
    p.add_argument("--split", action="append", default=None,
                   help="splits of --data to read (repeatable; default: train and dev)")
    p.add_argument("--corpus", action="append", default=[], metavar="FILE",
                   help="also keep the tokens of this UTF-8 text file, one text a line (repeatable)")
    p.add_argument("--pretraining-corpus", action="store_true",
                   help="also keep the tokens of the offline pretraining corpus (nlp/train/corpus.py: People's "
                        "Daily, the novel, reviews, the Xinhua dictionary, MSRA and inews train texts)")
    p.add_argument("--min-count", type=int, default=1, help="keep tokens seen at least this often (default 1)")
    p.add_argument("--task", default=None, help="the task, when the model's config does not say")
    p.set_defaults(func=run)


def _corpus_lines(path, given: str) -> list[str]:
    """The lines of a UTF-8 corpus; DataError naming the file, line and byte of the first byte
    that is not UTF-8."""
    from nlp._common import DataError

    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        offset = err.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw[:offset].count(b"\n") + 1
        raise DataError(f"--corpus {given}:{line}: not UTF-8 text (byte {raw[offset:offset + 1]!r} at byte offset "
                        f"{offset}); save the corpus as UTF-8 (e.g. iconv -f GBK -t UTF-8)") from None
    return text.splitlines()


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from nlp._common import ConfigError
    from nlp.commands._models import local_model
    from nlp.train.scoring import scoring_split
    from nlp.train.vocab_pruning import prune_vocabulary

    args.model = local_model(args.model)
    texts: list[str] = []
    # --corpus (or --pretraining-corpus) alone takes the texts from there: a model directory,
    # which has no run data, prunes so
    alone = args.data is None and not args.split and (args.corpus or args.pretraining_corpus)
    splits = args.split or ["train", "dev"]
    for source in [] if alone else args.data or ["train"]:
        for split in splits:
            data = split if source == "train" and split in ("train", "dev", "test") else source
            scoring, _ = scoring_split(args.model, data, split=split, task=args.task)
            texts += scoring.spec.training_texts(scoring.examples)
            print(f"read {len(scoring.examples)} examples of {scoring.data} {scoring.split}", file=sys.stderr)
    if args.pretraining_corpus:
        from nlp.train.corpus import build_corpus

        for source, documents in build_corpus().items():
            texts += documents
            print(f"read {len(documents)} documents of the pretraining corpus's {source}", file=sys.stderr)
    for corpus in args.corpus:
        path = Path(corpus).expanduser()
        if not path.is_file():
            raise ConfigError(f"--corpus {corpus!r} is not a file")
        texts += _corpus_lines(path, corpus)
    r = prune_vocabulary(args.model, texts, args.out, min_count=args.min_count, task=args.task)
    print(f"kept {r.kept:,} of {r.vocab_before:,} tokens (seen in {r.texts:,} texts); wrote {r.out}")
    print(f"  parameters {r.param_bytes_before / 1e6:.2f} MB -> {r.param_bytes_after / 1e6:.2f} MB in fp32 "
          f"({1 - r.param_bytes_after / r.param_bytes_before:.1%} smaller); model.safetensors "
          f"{r.model_bytes_before / 1e6:.2f} MB -> {r.model_bytes_after / 1e6:.2f} MB")
    return 0
