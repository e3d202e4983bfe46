"""The prompts an embedding model declares: text put before a query or a passage.

Some embedding models were trained with an instruction before each text and embed well only
with it: e5 wants "query: " before a query (and before either text of a symmetric task) and
"passage: " before a text searched; BGE puts an instruction before queries alone. The model
declares them in config.json, under sentence-transformers' names:

    "prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"

and the pipelines apply them by role, never by the model's name: `search` and `/embed` with
`prompt_name` put the "query" prompt before queries, `index` the "passage" prompt before the
corpus, and a text given with no prompt name gets the default one (none when the model names
no default). A text longer than one window gets the prompt in every window (pipeline.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nlp._common import ConfigError, did_you_mean

__all__ = ["Prompts", "QUERY", "PASSAGE"]

QUERY, PASSAGE = "query", "passage"  # the roles search and index ask for


@dataclass(frozen=True)
class Prompts:
    """name -> the text put before a text of that role; `default`: the name used when a call
    names none (None: no prompt)."""

    prompts: dict[str, str] = field(default_factory=dict)
    default: str | None = None

    @classmethod
    def from_config(cls, extra: dict[str, Any]) -> "Prompts":
        prompts = extra.get("prompts") or {}
        if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in prompts.items()):
            raise ConfigError(f"config.json `prompts` must map names to strings, got {prompts!r}")
        default = extra.get("default_prompt_name")
        if default is not None and default not in prompts:
            raise ConfigError(f"config.json default_prompt_name={default!r} is not one of its prompts "
                              f"{sorted(prompts)}")
        return cls(dict(prompts), default)

    def text(self, name: str | None) -> str:
        """The prompt called `name` ("" for None when the model has no default)."""
        if name is None:
            return self.prompts[self.default] if self.default else ""
        if name not in self.prompts:
            valid = sorted(self.prompts)
            raise ConfigError(f"prompt_name={name!r} is not a prompt of this model; its prompts: "
                              f"{valid or 'none (config.json declares no prompts)'}.{did_you_mean(name, valid)}")
        return self.prompts[name]

    def for_role(self, role: str) -> str:
        """The prompt of a role ("query", "passage"): the one of that name; none where the model
        names a prompt for the other role only (BGE: queries alone); the default one where it
        names neither."""
        if role in self.prompts:
            return self.prompts[role]
        return "" if {QUERY, PASSAGE} & set(self.prompts) else self.text(None)
