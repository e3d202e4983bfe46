"""`nlp tasks [NAME]`: the registered tasks (plugins included), each from its spec: aliases, what a
record of `nlp predict` holds, what it adds, its default model and its call options."""

from __future__ import annotations

import argparse

EPILOG = """examples:
  nlp tasks                    # every task, one line each, with its call options
  nlp tasks qa                 # one task in full: inputs, results, options with types and bounds
  nlp tasks --json             # the same as JSON (for tools)
  NLP_TASK_PLUGINS=mypkg.mytask nlp tasks   # a plugin's tasks are listed too (docs/tasks.md)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("tasks", help="list the tasks and their options", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", default=None, help="one task (a name or alias) to show in full")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def describe(spec) -> dict:
    """A task as `nlp tasks` shows it, from its spec."""
    return {
        "name": spec.name, "aliases": list(spec.aliases), "needs_model": spec.needs_model,
        "default_model": spec.default_model, "inputs": list(spec.input_fields),
        "optional_inputs": list(spec.optional_input_fields), "results": list(spec.result_fields),
        "options": [{"name": o.name, "flag": o.flag, "type": o.type.__name__, "default": o.default,
                     "minimum": o.minimum, "maximum": o.maximum, "nullable": o.nullable, "uses": list(o.uses),
                     "help": o.help} for o in spec.call_options],
    }


def run(args: argparse.Namespace) -> int:
    import json

    from nlp.tasks.registry import get_task, list_tasks

    specs = [get_task(args.name)] if args.name else [get_task(n) for n in list_tasks()]
    rows = [describe(s) for s in specs]
    if args.json:
        print(json.dumps(rows if not args.name else rows[0], ensure_ascii=False, indent=2))
        return 0
    if not args.name:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            aliases = f" (aliases: {', '.join(r['aliases'])})" if r["aliases"] else ""
            options = ", ".join(o["flag"] for o in r["options"]) or "no options"
            print(f"{r['name']:{width}s}  {options}{aliases}")
        print("\n`nlp tasks NAME` shows a task's inputs, results and options in full.")
        return 0
    spec, r = specs[0], rows[0]
    print(f"{r['name']}" + (f"  (aliases: {', '.join(r['aliases'])})" if r["aliases"] else ""))
    print(f"  inputs (nlp predict, per record): {', '.join(r['inputs'])}"
          + (f"; optional: {', '.join(r['optional_inputs'])}" if r["optional_inputs"] else ""))
    print(f"  results (added per record): {', '.join(r['results'])}")
    if r["default_model"]:
        print(f"  default model: {r['default_model']}")
    if not spec.call_options:
        print("  options: none")
    for o in spec.call_options:
        print(f"  {o.flag}: {o.describe()}  [{', '.join(o.uses)}]")
    return 0
