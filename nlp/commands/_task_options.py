"""The flags that tasks declare (`TaskSpec.call_options`, nlp/tasks/options.py) on the commands
that take them (`nlp predict`, `nlp evaluate`).

The task registry imports every task (and torch), which `nlp --help` and the other commands
should not pay for; so a command's parser gets the task flags when that command is the one being
parsed (`TaskOptionsParser.parse_known_args`), `--help` included. Each flag defaults to "not
given"; `given_options` collects the given ones, which the command checks against the task it
resolves (a flag of another task is refused with the task's own flags named).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["with_task_options", "given_options"]

_DEST = "task_option__"  # the namespace prefix of the task flags' values


class TaskOptionsParser(argparse.ArgumentParser):
    """A subcommand's parser that adds the registered tasks' call options of `use` on first parse."""

    use: str = "predict"
    _added: bool = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if not self._added:
            self._added = True
            _add_task_flags(self, self.use)
        return super().parse_known_args(args, namespace)


def with_task_options(parser: argparse.ArgumentParser, use: str) -> argparse.ArgumentParser:
    """Make `parser` (from `subparsers.add_parser`) add the tasks' `use` flags when it parses."""
    parser.__class__ = TaskOptionsParser  # argparse builds subparsers with one class for all
    parser.use = use  # type: ignore[attr-defined]
    return parser


def _add_task_flags(parser: argparse.ArgumentParser, use: str) -> None:
    from nlp.tasks.registry import get_task, list_tasks

    specs = [get_task(task) for task in list_tasks()]
    if use == "predict":  # what a record of each task holds, and what a result adds, from the specs
        lines = []
        for spec in specs:
            optional = "".join(f"[, {f}]" for f in spec.optional_input_fields)
            training = f"; --format training: {spec.training_format}" if spec.training_format else ""
            lines.append(f"  {spec.name}: {{{', '.join(spec.input_fields)}{optional}}} -> "
                         f"{', '.join(spec.result_fields)}{training}")
        parser.epilog = (parser.epilog or "") + "\ntasks (`nlp tasks NAME` for one in full):\n" + "\n".join(lines) + "\n"
    by_name: dict[str, list[tuple[str, Any]]] = {}
    for task in list_tasks():
        for option in get_task(task).options_for(use):
            by_name.setdefault(option.name, []).append((task, option))
    if not by_name:
        return
    group = parser.add_argument_group(
        "task options", "declared by the tasks (`nlp tasks` lists each task's); a flag applies to the tasks named")
    for name, declared in sorted(by_name.items()):
        first = declared[0][1]
        helps = "; ".join(f"{task}: {option.describe()}" for task, option in declared).replace("%", "%%")
        if first.type is bool:
            group.add_argument(first.flag, dest=_DEST + name, action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=helps)
        else:
            group.add_argument(first.flag, dest=_DEST + name, type=_parser_of(name, declared),
                               default=argparse.SUPPRESS, metavar=first.type.__name__.upper(), help=helps)


def _parser_of(name: str, declared: list[tuple[str, Any]]) -> Any:
    """The flag's string -> value: the declared type; "null" where a task takes null."""
    types = {option.type for _, option in declared}
    nullable = any(option.nullable for _, option in declared)

    def parse(text: str) -> Any:
        if nullable and text.lower() in ("null", "none", "all"):
            return None
        if list in types:  # a list of strings: one flag, the items separated by commas
            return [item.strip() for item in text.split(",")]
        for kind in (int, float, str):
            if kind in types:
                try:
                    return kind(text)
                except ValueError:
                    continue
        kinds = " or ".join(sorted(t.__name__ for t in types))
        raise argparse.ArgumentTypeError(f"expected {kinds}{' or null' if nullable else ''}, got {text!r}")

    parse.__name__ = name
    return parse


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """{option name: value} of the task flags given on the command line."""
    return {k[len(_DEST):]: v for k, v in vars(args).items() if k.startswith(_DEST)}
