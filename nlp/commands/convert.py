"""`nlp convert`: turn checkpoints of other frameworks into transformers-format directories."""

from __future__ import annotations

import argparse

EPILOG = """\
examples:
  # a PaddleNLP model directory (model_state.pdparams + config.json or model_config.json + vocab.txt)
  nlp convert paddle ~/.paddlenlp/models/ernie-3.0-mini-zh ./ernie-3.0-mini-zh

  # PaddleNLP names every single-Linear head `classifier`: say which one it is when the
  # source config does not record it (question answering, token classification, ...)
  nlp convert paddle ./paddle-qa-model ./qa-model --architecture ErnieForQuestionAnswering

  # replace an existing destination (the old one is swapped out only once the new one is complete)
  nlp convert paddle ./paddle-model ./model --overwrite

The result loads with nlp.AutoModel.from_pretrained(DST) and with transformers'
AutoModel / AutoTokenizer. The .pdparams pickle is read by a restricted unpickler: a file that
names anything but numpy arrays and plain containers is refused, never executed.
"""


def _run_paddle(args: argparse.Namespace) -> int:
    from nlp.models.convert_paddle import convert_paddle_checkpoint

    dst = convert_paddle_checkpoint(args.src, args.dst, architecture=args.architecture, overwrite=args.overwrite)
    print(f"converted {args.src} -> {dst}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a PaddleNLP checkpoint to a transformers-format directory",
        description="Convert checkpoints of other frameworks into transformers-format directories.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sources = parser.add_subparsers(dest="source", metavar="SOURCE")
    paddle = sources.add_parser(
        "paddle",
        help="a PaddleNLP ERNIE/BERT model directory",
        description="Convert a PaddleNLP ERNIE/BERT model directory (model_state.pdparams, config.json "
        "or model_config.json, vocab.txt) into config.json + model.safetensors + tokenizer files "
        "with transformers' names.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    paddle.add_argument("src", metavar="SRC", help="the PaddleNLP model directory")
    paddle.add_argument("dst", metavar="DST", help="the directory to create")
    paddle.add_argument(
        "--architecture",
        default=None,
        help="transformers class of the head, e.g. ErnieForQuestionAnswering (default: from the "
        "source config, else inferred from the parameter names)",
    )
    paddle.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    paddle.set_defaults(func=_run_paddle)
    parser.set_defaults(func=lambda _args: (parser.print_help(), 0)[1])
