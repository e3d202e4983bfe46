"""nlp: a Chinese NLP model hub and fine-tuning toolkit on PyTorch.

The public API mirrors Hugging Face names::

    import nlp
    tok = nlp.AutoTokenizer.from_pretrained("ernie-3.0-mini-zh")
    model = nlp.AutoModelForSequenceClassification.from_pretrained("ernie-3.0-mini-zh", num_labels=2)

Attributes are imported lazily so that `import nlp` (and `nlp --help`) stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "AutoConfig": "nlp.auto",
    "AutoTokenizer": "nlp.auto",
    "AutoModel": "nlp.auto",
    "AutoModelForMaskedLM": "nlp.auto",
    "AutoModelForSequenceClassification": "nlp.auto",
    "AutoModelForTokenClassification": "nlp.auto",
    "AutoModelForQuestionAnswering": "nlp.auto",
    "pipeline": "nlp.auto",
}
_SUBMODULES = ("hub", "tokenizer", "models", "tasks", "train", "deploy", "auto")

__all__ = ["__version__", *_EXPORTS, *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"nlp.{name}")
    raise AttributeError(f"module 'nlp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
