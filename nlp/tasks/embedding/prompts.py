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
from typing import Any, Mapping, Sequence

from nlp._common import ConfigError, did_you_mean

__all__ = ["Prompts", "QUERY", "PASSAGE", "prompt_ids", "insert_prompt"]

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


def prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The tokens of `prompt` as they start a text: those of prompt + "x" ending before "x"."""
    enc = tokenizer(prompt + "x", add_special_tokens=False, return_offsets_mapping=True)
    return [i for i, (_, end) in zip(enc["input_ids"], enc["offset_mapping"]) if end <= len(prompt)]


def insert_prompt(row: Mapping[str, Sequence[int]], ids: Sequence[int],
                  max_length: int | None = None) -> dict[str, list[int]]:
    """A tokenized text (`input_ids` and what goes with it, one entry per token) with the prompt's
    tokens `ids` after its first (special) token: attended, segment 0. Longer than `max_length`,
    the text loses tokens from its end, its last (special) token kept."""
    n = len(ids)
    fill = {"input_ids": list(ids), "attention_mask": [1] * n, "token_type_ids": [0] * n}
    out = {}
    for key, values in row.items():
        if key not in fill:
            raise ValueError(f"insert_prompt: no prompt value for the per-token key {key!r}")
        joined = list(values[:1]) + fill[key] + list(values[1:])
        if max_length is not None and len(joined) > max_length:
            joined = joined[:max_length - 1] + joined[-1:]
        out[key] = joined
    return out
