"""Entity tag schemes: BIO (IOB2) and BIOES, spans, validation, conversion and repair.

Entity extraction follows seqeval's default (conlleval-style, lenient) rules exactly, so
that `ner_metrics` equals `seqeval.metrics` on the same tags, malformed sequences included:
an ``I-X`` after ``O`` or after another type starts a new entity instead of being dropped.
The strict extractor (seqeval ``mode="strict"``) keeps only well-formed entities.

A span is ``(type, start, end)`` with ``end`` inclusive, as seqeval's ``get_entities``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from nlp._common import DataError

__all__ = [
    "SCHEMES",
    "split_tag",
    "get_entities",
    "get_entities_strict",
    "tags_from_spans",
    "convert_scheme",
    "validate_tags",
    "repair_tags",
    "detect_scheme",
    "label_list",
    "allowed_transitions",
]

SCHEMES = ("BIO", "BIOES")
Span = tuple[str, int, int]


def split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", "_")`` (seqeval's empty type)."""
    prefix = tag[:1]
    type_ = tag[1:].split("-", maxsplit=1)[-1] or "_"
    return prefix, type_


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags: Sequence[str]) -> list[Span]:
    """Entities of one tag sequence with conlleval's lenient rules (seqeval's default)."""
    prev_tag, prev_type, begin = "O", "", 0
    chunks: list[Span] = []
    for i, chunk in enumerate([*tags, "O"]):
        tag, type_ = split_tag(chunk)
        if _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


def get_entities_strict(tags: Sequence[str], scheme: str = "BIO") -> list[Span]:
    """Only well-formed entities (seqeval ``mode="strict"``): B I* for BIO, B I* E | S for BIOES.

    An entity is dropped when any of its tags breaks the scheme, e.g. ``I-X`` after ``O``,
    or (BIOES) a ``B-X`` not closed by ``E-X``.
    """
    _check_scheme(scheme)
    spans: list[Span] = []
    i, n = 0, len(tags)
    while i < n:
        prefix, type_ = split_tag(tags[i])
        if scheme == "BIOES" and prefix == "S":
            spans.append((type_, i, i))
            i += 1
            continue
        if prefix != "B":
            i += 1
            continue
        j = i + 1
        while j < n and split_tag(tags[j]) == ("I", type_):
            j += 1
        if scheme == "BIO":
            spans.append((type_, i, j - 1))
            i = j
        elif j < n and split_tag(tags[j]) == ("E", type_):
            spans.append((type_, i, j))
            i = j + 1
        else:
            i = j
    return spans


def tags_from_spans(spans: Iterable[Span], length: int, scheme: str = "BIO") -> list[str]:
    """Encode non-overlapping spans ``(type, start, end_inclusive)`` as tags."""
    _check_scheme(scheme)
    tags = ["O"] * length
    for type_, start, end in spans:
        if not 0 <= start <= end < length:
            raise DataError(f"span ({type_!r}, {start}, {end}) is outside a sequence of {length}")
        if any(t != "O" for t in tags[start : end + 1]):
            raise DataError(f"span ({type_!r}, {start}, {end}) overlaps another span")
        if scheme == "BIOES" and start == end:
            tags[start] = f"S-{type_}"
            continue
        tags[start] = f"B-{type_}"
        for k in range(start + 1, end + 1):
            tags[k] = f"I-{type_}"
        if scheme == "BIOES":
            tags[end] = f"E-{type_}"
    return tags


def convert_scheme(tags: Sequence[str], to: str) -> list[str]:
    """BIO <-> BIOES through the lenient spans (so a malformed input is repaired on the way)."""
    return tags_from_spans(get_entities(tags), len(tags), to)


def validate_tags(tags: Sequence[str], scheme: str = "BIO") -> list[str]:
    """Problems of a tag sequence under `scheme`, as messages naming the position; [] if valid."""
    _check_scheme(scheme)
    allowed = {"B", "I", "O"} if scheme == "BIO" else {"B", "I", "O", "E", "S"}
    problems = []
    for i, tag in enumerate(tags):
        prefix, _ = split_tag(tag)
        if tag != "O" and (prefix not in allowed or tag[1:2] != "-" or len(tag) < 3):
            problems.append(f"position {i}: tag {tag!r} is not one of O, {'/'.join(sorted(allowed - {'O'}))}-TYPE")
    if problems:
        return problems
    strict = get_entities_strict(tags, scheme)
    covered = {k for _, s, e in strict for k in range(s, e + 1)}
    for i, tag in enumerate(tags):
        if tag != "O" and i not in covered:
            prev = tags[i - 1] if i else "start"
            problems.append(f"position {i}: {tag!r} after {prev!r} does not continue an entity")
    return problems


def repair_tags(tags: Sequence[str], scheme: str = "BIO") -> list[str]:
    """Re-encode the lenient (conlleval) entities, so `I-X` without `B-X` begins an entity.

    The repaired sequence has the same entities under seqeval's default rules, so metrics do
    not change; only the tags become well formed.
    """
    return convert_scheme(tags, scheme)


def detect_scheme(tag_set: Iterable[str]) -> str:
    """"BIOES" when any E-/S- tag occurs, else "BIO"."""
    return "BIOES" if any(t[:2] in ("E-", "S-") for t in tag_set) else "BIO"


def label_list(types: Iterable[str], scheme: str = "BIO") -> list[str]:
    """The tag vocabulary: "O" first, then each type's prefixes in order (stable ids)."""
    _check_scheme(scheme)
    prefixes = "BI" if scheme == "BIO" else "BIES"
    return ["O"] + [f"{p}-{t}" for t in sorted(set(types)) for p in prefixes]


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise DataError(f"Unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)}")


def allowed_transitions(label_names: Sequence[str]) -> tuple[list[list[bool]], list[bool], list[bool]] | None:
    """Which tag may follow which under the label set's scheme, for constrained decoding.

    Returns ``(follows, start, end)``: ``follows[i][j]`` is True when tag j may come right after
    tag i, ``start[j]`` when a sentence may begin with j, ``end[i]`` when it may end with i.
    BIO: an ``I-X`` only after ``B-X`` or ``I-X``. BIOES: after ``B-X``/``I-X`` only ``I-X`` or
    ``E-X``; ``I-X``/``E-X`` only after ``B-X``/``I-X``; a sentence ends on ``O``, ``E-`` or
    ``S-``. None when the labels are not a BIO/BIOES tag set (e.g. plain word classes).
    """
    tags = [split_tag(t) if t != "O" else ("O", "") for t in label_names]
    if not tags or any(p not in "OBIES" or (p != "O" and t == "_") for p, t in tags):
        return None
    scheme = detect_scheme(label_names)
    inside = ("I",) if scheme == "BIO" else ("I", "E")  # tags that continue an entity

    def may_follow(prev: tuple[str, str], nxt: tuple[str, str]) -> bool:
        if nxt[0] in inside:
            return prev[0] in ("B", "I") and prev[1] == nxt[1]
        return scheme == "BIO" or prev[0] not in ("B", "I")  # BIOES: B-/I- must be continued

    follows = [[may_follow(a, b) for b in tags] for a in tags]
    start = [p not in inside for p, _ in tags]
    end = [scheme == "BIO" or p in ("O", "E", "S") for p, _ in tags]
    return follows, start, end
