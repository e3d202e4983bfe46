"""A benchmark script loaded as a module, so that tests can call its parts (nothing is timed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(script: str, module_name: str) -> ModuleType:
    """benchmarks/`script` as the module `module_name` (registered in sys.modules, as dataclasses
    and pickling need). The scripts import their neighbours (_harness, quality), so benchmarks/
    is on sys.path while it loads."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(module_name, BENCH / script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
