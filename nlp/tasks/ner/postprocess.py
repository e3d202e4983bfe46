"""NER post-processing: per-character (or per-word) tags -> entities with type, text, offsets, score.

Entities are read with the lenient conlleval rules (`get_entities`, seqeval's default), so what
the pipeline returns is what `ner_metrics` scores. Offsets are character offsets into the
original text, `end` exclusive: `text[start:end] == entity["text"]` always holds. An entity's
score is the mean probability of its words' predicted tags.
"""

from __future__ import annotations

from collections.abc import Sequence

from nlp._common import DataError
from nlp.tasks.ner.tags import get_entities

__all__ = ["tags_to_entities"]


def tags_to_entities(text: str, tags: Sequence[str], spans: Sequence[tuple[int, int]],
                     scores: Sequence[float] | None = None) -> list[dict]:
    """Entities of `text` whose words are `spans` ((start, end) char offsets) tagged `tags`.

    Returns dicts {"type", "text", "start", "end", "score"} in text order.
    """
    if len(tags) != len(spans) or (scores is not None and len(scores) != len(tags)):
        raise DataError(f"{len(tags)} tags, {len(spans)} word spans"
                        + ("" if scores is None else f", {len(scores)} scores") + "; they must match")
    out = []
    for type_, first, last in get_entities(list(tags)):
        start, end = spans[first][0], spans[last][1]
        score = 1.0 if scores is None else float(sum(scores[first:last + 1]) / (last - first + 1))
        out.append({"type": type_, "text": text[start:end], "start": int(start), "end": int(end),
                    "score": score})
    return out
