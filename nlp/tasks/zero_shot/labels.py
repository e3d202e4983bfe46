"""The candidate labels and the hypothesis template of a zero-shot call, checked.

transformers' zero-shot pipeline takes the labels as a list or as one string separated by
commas, and puts each into `hypothesis_template` where its "{}" is; these checks give the
errors it gives (a template that does not take a label) and the ones an answer keyed by label
needs (no blank or repeated label).
"""

from __future__ import annotations

from typing import Any

from nlp._common import ConfigError

__all__ = ["DEFAULT_TEMPLATE", "MAX_LABELS", "check_labels", "hypotheses"]

# The label itself: a template that fits every label set. A sentence around it often scores
# better ("这是一条关于{}的新闻" on news titles: docs/tasks.md, "Zero-shot classification").
DEFAULT_TEMPLATE = "{}"
MAX_LABELS = 100  # each call embeds its labels (cached per label set); an answer lists them all


def check_labels(labels: Any) -> list[str]:
    """The labels as a list: a list of non-blank, distinct strings, or one string of them
    separated by commas (transformers' form). ConfigError saying what was given otherwise."""
    if isinstance(labels, str):
        labels = [part.strip() for part in labels.split(",") if part.strip()]
    if labels is None or (isinstance(labels, (list, tuple)) and not labels):
        raise ConfigError("candidate_labels is empty: give the labels to choose from, e.g. "
                          "candidate_labels=['体育', '财经'] (or one string, '体育,财经')")
    if not isinstance(labels, (list, tuple)):
        raise ConfigError(f"candidate_labels must be a list of strings or one string separated by commas; "
                          f"got {type(labels).__name__} {labels!r:.60}")
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label.strip():
            raise ConfigError(f"candidate_labels[{i}] must be a non-blank string; got {label!r:.60}")
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise ConfigError(f"candidate_labels names {label!r} twice; an answer scores each label once, "
                              "so give each once")
        seen.add(label)
    if len(labels) > MAX_LABELS:
        raise ConfigError(f"candidate_labels has {len(labels)} labels; at most {MAX_LABELS} per call")
    return list(labels)


def hypotheses(labels: list[str], template: Any) -> list[str]:
    """Each label put into `template` where its "{}" is. ConfigError for a template that is not
    a string or has no "{}" (every label would give the same text)."""
    if not isinstance(template, str):
        raise ConfigError(f"hypothesis_template must be a string with {{}} where the label goes; "
                          f"got {type(template).__name__} {template!r:.60}")
    try:
        out = [template.format(label) for label in labels]
    except (IndexError, KeyError, ValueError) as err:
        raise ConfigError(f"hypothesis_template {template!r} cannot take a label ({type(err).__name__}: {err}); "
                          "put {} where the label goes and double other braces ({{ }})") from None
    if template.format("\x00") == template:
        raise ConfigError(f"hypothesis_template {template!r} has no {{}} for the label, so every label would "
                          "read the same; put {} where the label goes, e.g. '这是一条关于{}的新闻'")
    return out
