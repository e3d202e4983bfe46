"""The `nlp` command. Thin: it parses arguments, then calls library code.

Each subcommand lives in its own module under `nlp/commands/` and exposes
`register(subparsers)`; the module's parser sets `func` to the function to run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from nlp import __version__
from nlp._common import NlpError
from nlp._signals import terminate_raises


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nlp",
        description="Chinese NLP model hub and fine-tuning toolkit on PyTorch.",
        epilog="Run `nlp COMMAND --help` for the options and examples of a command.",
    )
    parser.add_argument("--version", action="version", version=f"nlp {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    import nlp.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"nlp.commands.{info.name}").register(subparsers)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """`parser.parse_args`, except that a command's `key.sub=value` overrides may also come after
    its options (`nlp finetune R --validate-only a=1`): argparse stops filling a `nargs="*"`
    positional at the first option and would refuse the rest."""
    args, rest = parser.parse_known_args(argv)
    if rest and isinstance(getattr(args, "overrides", None), list) \
            and not any(item.startswith("-") for item in rest):
        args.overrides += rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        with terminate_raises():  # SIGTERM / SIGHUP end a command as Ctrl-C does: its cleanup runs
            return int(args.func(args) or 0)
    except NlpError as err:
        # Errors raised on purpose carry their own fix; no stack trace for them.
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
