"""A UIE schema, as Taskflow takes it, parsed and bounded.

    ["时间", "选手", {"竞赛名称": ["主办方", "承办方"]}]

is three entity types; under `竞赛名称`, two roles. A role is asked of each span found for its
parent with the chained prompt `"<span>的<role>"` (UIE's), so relations and event arguments are
the same mechanism one level down; deeper nesting chains again. A schema is a string, a list of
strings and one-key-or-more dicts, or a dict {type: role | [roles]}.

Bounds (a server runs whatever schema a client sends): at most `MAX_SCHEMA_DEPTH` levels, at
most `MAX_SCHEMA_PROMPTS` names in all, each at most `MAX_PROMPT_CHARS` characters. Each is
named in the error that refuses it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from nlp._common import ConfigError

__all__ = ["SchemaNode", "SchemaError", "parse_schema", "schema_key", "schema_from_key", "schema_from_text",
           "count_prompts", "MAX_SCHEMA_DEPTH", "MAX_SCHEMA_PROMPTS", "MAX_PROMPT_CHARS", "chained_prompt"]

# Entity types, relations under them, and one more level (an event's argument's attribute):
# deeper chains multiply the forward passes by the spans of every level above
MAX_SCHEMA_DEPTH = 3
# Names in one schema, every level counted: each is a prompt per text and window, and each child
# a prompt per span its parent finds
MAX_SCHEMA_PROMPTS = 64
# A type name is a label, not a passage: the prompt shares the window with the text
MAX_PROMPT_CHARS = 32
# Taskflow's sentiment-classification prompts ("情感倾向[正向，负向]") need a classification
# model this task does not have
_OPTIONS = re.compile(r"\[[^\]]*\]\s*$")


class SchemaError(ConfigError):
    """A schema that cannot be run; the message names the place in the schema and the bound."""


@dataclass(frozen=True)
class SchemaNode:
    """One prompt name and the roles asked of each span it finds."""

    name: str
    children: tuple["SchemaNode", ...] = field(default_factory=tuple)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"{where} must be a type name (a string), got {type(value).__name__} {value!r:.40}")
    name = value.strip()
    if not name:
        raise SchemaError(f"{where} is an empty type name")
    if len(name) > MAX_PROMPT_CHARS:
        raise SchemaError(f"{where} ({name[:20]}...) has {len(name)} characters; a type name has at most "
                          f"{MAX_PROMPT_CHARS} (MAX_PROMPT_CHARS)")
    if _OPTIONS.search(name):
        raise SchemaError(f"{where} ({name}) is a classification prompt with options; this task extracts spans "
                          "only: give the type name without [options]")
    return name


def _level(value: Any, where: str, depth: int) -> tuple[SchemaNode, ...]:
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"{where} nests {depth} levels deep; a schema has at most {MAX_SCHEMA_DEPTH} "
                          "levels (MAX_SCHEMA_DEPTH): entity types, their relations, one more")
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        raise SchemaError(f"{where} is an empty list; give at least one type name")
    nodes: list[SchemaNode] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, dict):
            if not item:
                raise SchemaError(f"{at} is an empty object; give {{type: [roles]}}")
            for key, sub in item.items():
                nodes.append(SchemaNode(_name(key, f"{at} key"), _level(sub, f"{at}.{key}", depth + 1)))
        else:
            nodes.append(SchemaNode(_name(item, at)))
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise SchemaError(f"{where} names {node.name!r} twice at one level; name each type once")
        seen.add(node.name)
    return tuple(nodes)


def count_prompts(nodes: tuple[SchemaNode, ...]) -> int:
    """Names in the schema, every level counted."""
    return sum(1 + count_prompts(n.children) for n in nodes)


def parse_schema(schema: Any, where: str = "schema") -> tuple[SchemaNode, ...]:
    """The top level of a schema (a str, a list, a dict), checked against the bounds."""
    if schema is None:
        raise SchemaError(f"no {where}: give the types to extract, e.g. schema=['人物', '地点', "
                          "{'组织机构': ['成立时间']}]")
    if isinstance(schema, (list, tuple)) and schema and all(isinstance(n, SchemaNode) for n in schema):
        return tuple(schema)  # parsed already
    if isinstance(schema, tuple):
        schema = list(schema)
    if not isinstance(schema, (str, list, dict)):
        raise SchemaError(f"{where} must be a type name, a list of them, or {{type: [roles]}}; "
                          f"got {type(schema).__name__}")
    nodes = _level(schema, where, 1)
    n = count_prompts(nodes)
    if n > MAX_SCHEMA_PROMPTS:
        raise SchemaError(f"{where} has {n} type names in all; a schema has at most {MAX_SCHEMA_PROMPTS} "
                          "(MAX_SCHEMA_PROMPTS); split it into several calls")
    return nodes


def _plain(nodes: tuple[SchemaNode, ...]) -> list[Any]:
    return [n.name if not n.children else {n.name: _plain(n.children)} for n in nodes]


def schema_key(nodes: tuple[SchemaNode, ...]) -> str:
    """A canonical JSON string of a parsed schema: hashable, equal for equal schemas."""
    return json.dumps(_plain(nodes), ensure_ascii=False, separators=(",", ":"))


def schema_from_key(key: str) -> tuple[SchemaNode, ...]:
    return parse_schema(json.loads(key))


def schema_from_text(text: str, where: str = "--schema") -> tuple[SchemaNode, ...]:
    """A schema given on a command line: JSON (`'["时间", {"竞赛名称": ["主办方"]}]'`), or type
    names separated by commas (`时间,选手`)."""
    text = text.strip()
    if text[:1] in "[{\"":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise SchemaError(f"{where} is not valid JSON ({err.msg} at character {err.pos}); give JSON or "
                              "type names separated by commas") from None
    else:
        value = [t for t in re.split(r"[,，]", text) if t.strip()]
    return parse_schema(value, where)


def chained_prompt(span_text: str, role: str) -> str:
    """UIE's prompt for a role of a span found one level up: "<span>的<role>"."""
    return f"{span_text}的{role}"
