"""`nlp tokenizer`: train a vocabulary (jieba+BPE hybrid, or character-level WordPiece), or encode text."""

from __future__ import annotations

import argparse
import json

EPILOG = """examples:
  nlp tokenizer train reviews.txt more.txt --vocab-size 30000 --out tok/
  nlp tokenizer train corpus.txt --vocab-size 20000 --out tok/ --user-word 飞桨 --user-word 文心
  nlp tokenizer train corpus.txt --kind wordpiece --vocab-size 7000 --out tok-chars/
  nlp tokenizer encode tok/ "我爱飞桨深度学习框架"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenizer", help="train or try a tokenizer", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="tokenizer_command", metavar="SUBCOMMAND", required=True)

    train = sub.add_parser("train", help="learn a hybrid (jieba+BPE) or WordPiece vocabulary from text files",
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("corpus", nargs="+", help="UTF-8 text files, one text a line")
    train.add_argument("--vocab-size", type=int, required=True, help="size of the vocabulary to learn")
    train.add_argument("--out", required=True, metavar="DIR", help="the new tokenizer directory (must not exist)")
    train.add_argument("--kind", choices=("hybrid", "wordpiece"), default="hybrid",
                       help="hybrid: jieba words + BPE pieces (short sequences); wordpiece: one token per "
                            "Chinese character, as bert-base-chinese and ERNIE (NER-friendly)")
    train.add_argument("--word-fraction", type=float, default=0.5,
                       help="share of the budget left after characters for whole words (rest: BPE merges)")
    train.add_argument("--min-frequency", type=int, default=2, help="ignore words/merges seen fewer times")
    train.add_argument("--user-word", action="append", default=[],
                       help="a word jieba must keep whole (repeatable; hybrid only)")
    train.add_argument("--max-length", type=int, default=512,
                       help="model_max_length written to the config: the longest input in tokens (>= 1)")
    train.set_defaults(func=_train)

    enc = sub.add_parser("encode", help="print tokens, ids and offsets of TEXT",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    enc.add_argument("directory", help="a tokenizer directory (WordPiece or hybrid)")
    enc.add_argument("text", help="the text to encode")
    enc.set_defaults(func=_encode)


def _train(args: argparse.Namespace) -> int:
    import time

    from nlp._common import ConfigError, atomic_directory, check_output_path
    from nlp.tokenizer import train_hybrid_tokenizer, train_wordpiece_tokenizer

    if args.kind == "wordpiece" and args.user_word:
        raise ConfigError("--user-word applies to --kind hybrid only: a WordPiece vocabulary splits "
                          "Chinese text into characters, so there are no whole words to keep")
    if args.max_length < 1:
        raise ConfigError(f"--max-length {args.max_length}: give the longest input in tokens, 1 or more "
                          "(default 512)")
    # refused before any work: an --out that exists is a model or someone's files, and writing the
    # tokenizer files into it would leave a model that loads and answers wrongly
    out = check_output_path(args.out, "--out", directory=True, new=True)
    start = time.perf_counter()
    if args.kind == "wordpiece":
        tok = train_wordpiece_tokenizer(args.corpus, args.vocab_size, min_frequency=args.min_frequency,
                                        model_max_length=args.max_length)
    else:
        tok = train_hybrid_tokenizer(
            args.corpus, args.vocab_size, word_fraction=args.word_fraction,
            min_frequency=args.min_frequency, user_words=args.user_word, model_max_length=args.max_length,
        )
    with atomic_directory(out) as tmp:  # whole or not at all
        tok.save_pretrained(tmp)
    print(f"trained {tok!r} in {time.perf_counter() - start:.1f}s -> {args.out}")
    return 0


def _encode(args: argparse.Namespace) -> int:
    from nlp.tokenizer import load_tokenizer

    tok = load_tokenizer(args.directory)
    enc = tok(args.text, return_offsets_mapping=True)
    rows = [
        {"token": t, "id": i, "offsets": list(o), "text": args.text[o[0]:o[1]], "word": w}
        for t, i, o, w in zip(enc.tokens(), enc["input_ids"], enc["offset_mapping"], enc.word_ids())
    ]
    print(json.dumps(rows, ensure_ascii=False))
    return 0
