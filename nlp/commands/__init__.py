"""One module per `nlp` subcommand; each defines `register(subparsers)` (see nlp/cli.py)."""
