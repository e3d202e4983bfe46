"""The benchmark scripts share benchmarks/_harness.py; a script that defines a function under the
name of one it imports from there shadows it (benchmarks/model.py once called its own
best_of_rounds with the harness's arguments and crashed before its first figure)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "_harness.py")


def _harness_imports(tree: ast.Module) -> set[str]:
    return {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
            and node.module == "_harness" for alias in node.names}


def _top_level_definitions(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_check_sees_a_shadowed_import():
    tree = ast.parse("from _harness import best_of_rounds\n\ndef best_of_rounds(args):\n    pass\n")
    assert _harness_imports(tree) & _top_level_definitions(tree) == {"best_of_rounds"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_shadows_what_it_imports_from_the_harness(script):
    tree = ast.parse(script.read_text(encoding="utf-8"))
    assert not _harness_imports(tree) & _top_level_definitions(tree)
