"""`nlp hub`: list and inspect model cards, download into the cache, manage it, serve a mirror."""

from __future__ import annotations

import argparse
import json
import os

EPILOG = """\
examples:
  nlp hub ls                                   # every registered name
  nlp hub ls 'ernie-3.0-*'                     # a glob, or a substring: nlp hub ls macbert
  nlp hub info ernie-3.0-mini-zh               # sources in the order they are tried, files, licence
  nlp hub download ernie-3.0-mini-zh           # into the cache (NLP_HUB_CACHE, else $NLP_HOME/hub)
  nlp hub download hfl/rbt3 --revision main    # any owner/repo on a Hugging Face-protocol endpoint
  nlp hub download rbt3 --cache-dir ./hub-cache   # fill a folder to carry to an offline machine
  nlp hub download ernie-3.0-mini-zh --force   # a cached file is broken: drop the cached copy, fetch again
  nlp hub cache ls
  nlp hub cache rm ernie-3.0-mini-zh
  nlp hub serve /data/mirror --host 0.0.0.0 --port 8080 --token "$MIRROR_TOKEN" --workers 4
      # DIR/owner/name/... ; clients: NLP_HUB_MIRROR=http://host:8080 (this toolkit),
      # HF_ENDPOINT=http://host:8080 with HF_TOKEN=$MIRROR_TOKEN (huggingface_hub, transformers)

maintainers: ship a finished fine-tuning run inside the package, as a builtin hub model
  nlp hub ship runs/sentiment-reviews --name ernie-tiny-zh-sentiment
  nlp hub ship runs/ner-zh --name ernie-tiny-zh-ner
  nlp hub ship runs/lexical-peoples-daily --name ernie-tiny-zh-lexical --weights int8
      # writes nlp/assets/NAME/ (fp16 weights, config, tokenizer, README.md with the run's
      # dev/test figures) and NAME's card in nlp/hub/cards.yaml (sha256 + size of every file)

offline: NLP_OFFLINE=1 (or HF_HUB_OFFLINE=1) reads only the cache and never opens a socket.
The cache layout and every environment variable: docs/hub.md.
"""


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _ls(args: argparse.Namespace) -> int:
    from nlp.hub import get_card, list_models

    names = list_models(args.pattern)
    if not names:
        print(f"no registered model matches {args.pattern!r}")
        return 1
    width = max(len(n) for n in names)
    for name in names:
        card = get_card(name)
        kinds = ",".join(dict.fromkeys(s.kind + ("(paddle)" if s.format == "paddle" else "") for s in card.sources))
        print(f"{name:<{width}}  {card.architecture:<5}  {card.license:<10}  {kinds}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from nlp.hub import hub_cache_dir, resolve_card
    from nlp.hub.download import effective_sources
    from nlp.hub.records import recorded

    card = resolve_card(args.name)
    if args.json:
        print(json.dumps(card.to_dict(), indent=2, ensure_ascii=False))
        return 0
    print(f"name:         {card.name}")
    print(f"architecture: {card.architecture or '(from config.json)'}")
    if card.preset:
        print(f"preset:       {card.preset}")
    if card.heads:
        print(f"heads:        {', '.join(card.heads)}")
    print(f"license:      {card.license}")
    if card.description:
        print(f"description:  {card.description}")
    if card.homepage:
        print(f"homepage:     {card.homepage}")
    rec = recorded(hub_cache_dir(args.cache_dir), card.name)
    print("sources (tried in this order):")
    for i, src in enumerate(effective_sources(card), 1):
        print(f"  {i}. {src.describe()}")
        for f in src.files:
            size = f" {_human(f.size)}" if f.size is not None else ""
            digest = f.sha256
            if digest == "unknown":
                label = f"{src.kind}-{src.revision or ('master' if src.kind == 'modelscope' else 'main')}"
                seen = rec.get(label, {}).get(f.name)
                digest = f"unknown (recorded {seen})" if seen else "unknown"
            print(f"       {f.name}{size}  sha256 {digest}")
            if f.url:
                print(f"         {f.url}")
    return 0


def _cached_names(name: str) -> set[str]:
    """The cache entries of `name`: itself, and the repos of a card's hf sources."""
    from nlp._common import UnknownNameError
    from nlp.hub import resolve_card

    names = {name}
    try:
        card = resolve_card(name)
        names |= {s.repo for s in card.sources if s.kind == "hf" and s.repo}
    except UnknownNameError:
        pass
    return names


def _download(args: argparse.Namespace) -> int:
    from nlp.auto import CONVERTERS  # the models layer's converters (Paddle), handed to the hub
    from nlp.hub import download, remove_from_cache

    if args.force and not os.path.isdir(args.name):
        for p in (p for n in sorted(_cached_names(args.name)) for p in remove_from_cache(n, args.cache_dir)):
            print(f"removed {p}")
    path = download(
        args.name, revision=args.revision, cache_dir=args.cache_dir, progress=not args.quiet, converters=CONVERTERS
    )
    print(path)
    return 0


def _cache_ls(args: argparse.Namespace) -> int:
    from nlp.hub import hub_cache_dir, scan_cache

    root = hub_cache_dir(args.cache_dir)
    entries = scan_cache(root)
    print(f"cache: {root}")
    if not entries:
        print("(empty)")
        return 0
    width = max(len(e.name) for e in entries)
    for e in entries:
        print(f"{e.name:<{width}}  {e.kind:<9}  {_human(e.size):>9}  {', '.join(e.snapshots)}")
    print(f"total {_human(sum(e.size for e in entries))}")
    return 0


def _cache_rm(args: argparse.Namespace) -> int:
    from nlp.hub import remove_from_cache

    names = _cached_names(args.name)  # a card name also removes the repos of its hf sources
    removed = [p for n in sorted(names) for p in remove_from_cache(n, args.cache_dir)]
    if not removed:
        print(f"nothing cached for {args.name!r} (see `nlp hub cache ls`)")
        return 1
    for p in removed:
        print(f"removed {p}")
    return 0


def _port(text: str) -> int:
    """argparse type of --port: a TCP port, refused otherwise (uvicorn would wrap 99999 round to 34463)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a port from 1 to 65535") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port; give a number from 1 to 65535 (0 picks a free one)")
    return port


def _serve(args: argparse.Namespace) -> int:
    from nlp._common import ConfigError
    from nlp.hub.server import create_app, serve

    if not os.path.isdir(args.dir):
        raise ConfigError(f"{args.dir!r} is not a directory; give the folder holding owner/name/ snapshots")
    token = args.token or os.environ.get("NLP_HUB_TOKEN") or None
    create_app(args.dir, token=token)  # a bad token is refused before the banner
    print(f"serving {os.path.abspath(args.dir)} on http://{args.host}:{args.port}" + (" (bearer token required)" if token else ""))
    serve(args.dir, host=args.host, port=args.port, token=token, workers=args.workers)
    return 0


def _ship(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nlp._common import ConfigError
    from nlp.ship import ship

    how_made = ""
    if args.how_made:
        try:
            how_made = Path(args.how_made).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"--how-made {args.how_made!r}: cannot read it as UTF-8 text ({err})") from None
    r = ship(args.run, args.name, license=args.license, assets_dir=args.assets_dir,
             cards_file=args.cards_file, package=args.package, weights=args.weights, how_made=how_made,
             inference_precision=args.inference_precision)
    for name, f in r.files.items():
        print(f"  {name:<26} {_human(f['size']):>9}  sha256 {f['sha256']}")
    print(f"shipped {r.name}: {r.folder} ({_human(r.total_bytes)}), card in {r.cards_file} "
          f"(revision {r.card.sources[0].revision})")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = subparsers.add_parser(
        "hub", help="model names, downloads, the cache and a mirror server",
        description="Named models from several sources, verified downloads, the offline cache, a mirror.",
        epilog=EPILOG, formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="hub_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda a: (parser.print_help(), 0)[1])

    p = sub.add_parser("ls", help="list registered model names", epilog=EPILOG, formatter_class=fmt)
    p.add_argument("pattern", nargs="?", metavar="PATTERN", help="shell glob or substring")
    p.set_defaults(func=_ls)

    p = sub.add_parser("info", help="show a model card", epilog=EPILOG, formatter_class=fmt)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print the card as JSON (re-registrable)")
    p.add_argument("--cache-dir", default=None, help="cache to read recorded digests from")
    p.set_defaults(func=_info)

    p = sub.add_parser("download", help="download a model into the cache; prints the snapshot path",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("name", metavar="NAME", help="registered name, owner/repo, or a local directory")
    p.add_argument("--revision", default=None, help="branch, tag or commit (Hugging Face-protocol sources)")
    p.add_argument("--cache-dir", default=None, help="cache folder (default: NLP_HUB_CACHE or $NLP_HOME/hub)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("--force", action="store_true",
                   help="remove what the cache holds for NAME (files, conversions, recorded digests), then download again")
    p.set_defaults(func=_download)

    cache = sub.add_parser("cache", help="list or remove cached models", epilog=EPILOG, formatter_class=fmt)
    csub = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    cache.set_defaults(func=_cache_ls, cache_dir=None)  # bare `nlp hub cache` lists
    p = csub.add_parser("ls", help="list cached models with their size")
    p.add_argument("--cache-dir", default=None)
    p.set_defaults(func=_cache_ls)
    p = csub.add_parser("rm", help="remove a model (card name or owner/repo) from the cache")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--cache-dir", default=None)
    p.set_defaults(func=_cache_rm)

    p = sub.add_parser("serve", help="serve a directory of snapshots with the Hugging Face protocol",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("dir", metavar="DIR", help="folder holding owner/name/<files>")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=8080, help="TCP port, 1-65535 (default 8080)")
    p.add_argument("--token", default=None, help="require `Authorization: Bearer TOKEN` (or set NLP_HUB_TOKEN)")
    p.add_argument("--workers", type=int, default=1, help="server processes (use about one per core on a busy mirror)")
    p.set_defaults(func=_serve)

    p = sub.add_parser("ship", help="(maintainers) ship a fine-tuned run as a builtin model of the package",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("run", metavar="RUN_DIR", help="a finished `nlp finetune` run (train.output_dir, with results.json)")
    p.add_argument("--name", required=True, help="the hub name, e.g. ernie-tiny-zh-sentiment (base model + what it does)")
    p.add_argument("--license", default=None, help="the weights' licence (default: the base model's card's)")
    p.add_argument("--assets-dir", default=None, help="where the model folder goes (default: the package's nlp/assets)")
    p.add_argument("--cards-file", default=None, help="the cards file to update (default: the package's nlp/hub/cards.yaml)")
    p.add_argument("--package", default="nlp", help="the Python package holding --assets-dir (the builtin source's package)")
    p.add_argument("--weights", choices=("fp16", "int8"), default="fp16",
                   help="fp16 (default; transformers reads it) or int8 rows with a scale each (half the size; "
                        "read by this toolkit only), where the package's 50 MB would not hold another fp16 model")
    p.add_argument("--how-made", default=None, metavar="FILE",
                   help="a Markdown file for the model card's 'How it was made': the steps that made the run's "
                        "base model (pruning, distillation), put before the fine-tuning and ship commands")
    p.add_argument("--inference-precision", choices=("int8", "fp32"), default=None,
                   help="the precision pipelines and `nlp serve` run the model in by default on the CPU, written "
                        "into its config.json: int8 (the encoder's linear layers) once its int8 figures were measured "
                        "(`nlp evaluate RUN --data D --precision int8`; put them in --how-made)")
    p.set_defaults(func=_ship)
