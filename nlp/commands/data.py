"""`nlp data`: list the named datasets, show one's sources and figures, check a local file."""

from __future__ import annotations

import argparse
import json

EPILOG = """examples:
  nlp data ls
  nlp data info reviews-zh            # split sizes and label counts (parses once, then cached)
  nlp data info peoples-daily-1998-ner
  nlp data info msra-ner              # the standard SIGHAN 2006 test set, published results
  nlp data info inews
  nlp data info tnews                 # public sources: URL, md5, Hugging Face name
  nlp data download tnews             # the published files, into the hub cache (NLP_HUB_CACHE)
  nlp data stats train.tsv --task classification --text-column text_a
  nlp data stats dev.json --task qa
"""


def _ls(args) -> int:
    from nlp.tasks.datasets import BUILTIN, PUBLIC
    from nlp.tasks.datasets.builtin import package_info

    for name, spec in BUILTIN.items():
        pkgs = "; ".join(f"{p['distribution']} {p['version'] or ''}, {p['bytes'] / 1e6:.1f} MB, "
                         f"licence: {p['license']}" for p in package_info(spec))
        print(f"{name:24s} {spec.task:22s} built-in (offline)  {spec.description}")
        print(f"{'':24s} {'':22s} from {pkgs}")
    for name, spec in PUBLIC.items():
        hf = f"hf: {spec.hf_name}" + (f"/{spec.hf_config}" if spec.hf_config else "") if spec.hf_name else ""
        print(f"{name:24s} {spec.task:22s} public              {hf}")
    return 0


def _info(args) -> int:
    from nlp.tasks.datasets import dataset_info

    info = dataset_info(args.name)
    if args.json:
        print(json.dumps(info, ensure_ascii=False, indent=1))
        return 0
    print(f"{info['name']}  ({info['task']})")
    if info.get("description"):
        print(f"  {info['description']}")
    if info.get("label_names"):
        names = info["label_names"]
        print(f"  labels ({len(names)}): {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}")
    for split, fig in info.get("splits", {}).items():
        # whatever the task counts per split (its reader's figures: labels, entities, ...), by name
        counted = "   ".join(f"{what}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                               for what, counts in fig.items() if isinstance(counts, dict))
        print(f"  {split:6s} {fig['rows']:7d} rows   {counted}".rstrip())
    for reason, n in info.get("skipped", {}).items():
        print(f"  skipped: {n} {reason}")
    for reason, n in info.get("repaired", {}).items():
        print(f"  repaired: {n} {reason}")
    if info.get("source"):
        print(f"  source: {info['source']}")
    for p in info.get("packages", []):
        print(f"  package: {p['distribution']} {p['version']}, licence: {p['license']}")
    if info.get("published"):
        print(f"  published: {info['published']}")
    if "sources" in info:
        src = info["sources"]
        print(f"  format: {info['format']}")
        print(f"  paddlenlp: {src['paddlenlp']}" + (f"  (md5 {src['archive_md5']})" if src["archive_md5"] else ""))
        for split, f in src["files"].items():
            print(f"    {split}: {f['path']}" + (f"  md5 {f['md5']}" if f["md5"] else ""))
        if src["huggingface"]:
            print(f"  huggingface: {src['huggingface']}")
    return 0


def _download(args) -> int:
    from nlp.hub import fetch_file
    from nlp.tasks.datasets import BUILTIN, PUBLIC, dataset_info, fetch_split

    info = dataset_info(args.name, with_stats=False)  # UnknownNameError with a did-you-mean
    if info["name"] in BUILTIN:
        print(f"{info['name']} is built in (installed with the toolkit): nothing to download")
        return 0
    spec = PUBLIC[info["name"]]
    for split in args.split or list(spec.splits):
        if split not in spec.splits:
            from nlp._common import UnknownNameError, did_you_mean

            raise UnknownNameError(f"{spec.name!r} has no split {split!r}; valid: {', '.join(spec.splits)}."
                                   f"{did_you_mean(split, list(spec.splits))}")
        print(f"{split}: {fetch_split(spec, split, fetch=fetch_file)}")
    return 0


def _stats(args) -> int:
    import inspect

    from nlp.tasks import get_task

    spec = get_task(args.task)
    options = {"text_column": args.text_column, "text_pair_column": args.text_pair_column,
               "label_column": args.label_column, "skip_empty": args.skip_empty,
               "on_invalid": "repair" if args.repair else "error", "encoding": args.encoding}
    accepted = inspect.signature(spec.reader).parameters  # each task's reader takes its own options
    ds, st = spec.reader(args.file, **{k: v for k, v in options.items() if k in accepted}, return_stats=True)
    for line in spec.summarize(ds):
        print(line)
    for reason, n in sorted(st.skipped.items()):
        print(f"  skipped: {n} {reason}")
    for reason, n in sorted(st.repaired.items()):
        print(f"  repaired: {n} {reason}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("data", help="named datasets and data files",
                                   epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    sub.add_parser("ls", help="list the dataset names").set_defaults(func=_ls)
    info = sub.add_parser("info", help="a dataset's task, labels, sources, sizes and label counts")
    info.add_argument("name")
    info.add_argument("--json", action="store_true", help="print the figures as JSON")
    info.set_defaults(func=_info)
    download = sub.add_parser("download", help="fetch a public dataset's files into the hub cache; prints their paths")
    download.add_argument("name")
    download.add_argument("--split", action="append", help="only this split (repeatable); default: all")
    download.set_defaults(func=_download)
    stats = sub.add_parser("stats", help="read a local file, print its counts and what was skipped")
    stats.add_argument("file")
    stats.add_argument("--task", required=True,
                       help="the file's task: a name or alias from `nlp tasks` (its reader reads the file)")
    stats.add_argument("--text-column", default="text")
    stats.add_argument("--text-pair-column", default=None)
    stats.add_argument("--label-column", default="label")
    stats.add_argument("--skip-empty", action="store_true", help="skip empty texts instead of failing")
    stats.add_argument("--repair", action="store_true", help="repair invalid BIO/BIOES tags instead of failing")
    stats.add_argument("--encoding", default="utf-8", help="the file's text encoding, e.g. gbk (default utf-8)")
    stats.set_defaults(func=_stats)
