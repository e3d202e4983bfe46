"""Read NER files into a `datasets.Dataset` with ``tokens`` and ``ner_tags`` columns.

Two formats:

- CoNLL-style columns (`read_conll`): one token per line, its tag in the last column, columns
  split by a tab or white space, a blank line between sentences, ``-DOCSTART-`` lines ignored.
- PaddleNLP's tsv (`read_paddle_ner`, MSRA-NER and People's Daily as PaddleNLP ships them):
  a header line, then one sentence per line, ``chars<TAB>tags`` each joined by ``\\x02``.

``ner_tags`` is a sequence of ``ClassLabel`` ids; ``ds.features["ner_tags"].feature.names``
is the tag list ("O" first). Tags are checked against the scheme: ``on_invalid="error"``
raises, ``"repair"`` re-encodes (an ``I-X`` without ``B-X`` becomes ``B-X``; entities under
the conlleval rules do not change) and counts the repaired sentences, ``"keep"`` counts them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks._io import ReadStats, iter_lines
from nlp.tasks.ner.tags import SCHEMES, convert_scheme, detect_scheme, label_list, split_tag, validate_tags

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["read_conll", "read_paddle_ner", "build_ner_dataset"]

_ON_INVALID = ("error", "repair", "keep")


def _conll_sentences(path: Path, sep: str | None, stats: ReadStats, encoding: str = "utf-8"
                     ) -> Iterator[tuple[str, list[str], list[str]]]:
    tokens: list[str] = []
    tags: list[str] = []
    start = 0
    for lineno, line in iter_lines(path, encoding):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if tokens:
                yield f"{path}:{start}", tokens, tags
                tokens, tags = [], []
            elif line.startswith("-DOCSTART-"):
                stats.skip("-DOCSTART- lines")
            continue
        fields = line.split(sep) if sep else line.split()
        if sep == "\t" and len(fields) >= 2 and not fields[0]:
            fields[0] = " "  # a space token in a tab-separated file
        if len(fields) < 2:
            raise DataError(f"{path}:{lineno}: expected 'token<TAB>tag', got {line!r}")
        if not tokens:
            start = lineno
        tokens.append(fields[0])
        tags.append(fields[-1].strip())
    if tokens:
        yield f"{path}:{start}", tokens, tags


def _paddle_sentences(path: Path, stats: ReadStats, encoding: str = "utf-8"
                      ) -> Iterator[tuple[str, list[str], list[str]]]:
    for lineno, line in iter_lines(path, encoding):
        if lineno == 1 and line.startswith("text_a"):
            continue  # the header line: "text_a\tlabel"
        if not line.strip():
            stats.skip("blank lines")
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(f"{path}:{lineno}: expected 'chars<TAB>tags' joined by \\x02, "
                            f"got {len(fields)} tab-separated fields")
        yield f"{path}:{lineno}", fields[0].split("\x02"), fields[1].split("\x02")


def build_ner_dataset(
    sentences, *, scheme: str | None = None, to_scheme: str | None = None,
    label_names: Sequence[str] | None = None, on_invalid: str = "error",
    stats: ReadStats | None = None,
) -> datasets.Dataset:
    """Check and encode ``(where, tokens, tags)`` triples; the common end of every NER reader."""
    if on_invalid not in _ON_INVALID:
        raise DataError(f"Unknown on_invalid {on_invalid!r}; valid: {', '.join(_ON_INVALID)}")
    stats = stats or ReadStats("<sentences>")
    sentences = list(sentences)
    found = {t for _, _, tags in sentences for t in tags}
    scheme = scheme or detect_scheme(found)
    if scheme not in SCHEMES or (to_scheme and to_scheme not in SCHEMES):
        raise DataError(f"Unknown tag scheme {scheme!r}/{to_scheme!r}; valid: {', '.join(SCHEMES)}")
    out_tokens, out_tags = [], []
    for where, tokens, tags in sentences:
        if len(tokens) != len(tags):
            raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
        problems = validate_tags(tags, scheme)
        if problems:
            if any("is not one of" in p for p in problems) or on_invalid == "error":
                raise DataError(f"{where}: invalid {scheme} tags: {'; '.join(problems[:3])}"
                                + ("" if on_invalid != "error" else
                                   ". Pass on_invalid='repair' to re-encode such sentences."))
            if on_invalid == "repair":
                tags = convert_scheme(tags, scheme)
                stats.repair(f"sentences with invalid {scheme} tags")
            else:
                stats.repair(f"sentences with invalid {scheme} tags kept as they are")
        if to_scheme and to_scheme != scheme:
            tags = convert_scheme(tags, to_scheme)
        out_tokens.append(list(tokens))
        out_tags.append(list(tags))
    final_scheme = to_scheme or scheme
    if label_names is None:
        types = {split_tag(t)[1] for tags in out_tags for t in tags if t != "O"}
        label_names = label_list(types, final_scheme)
    tag2id = {t: i for i, t in enumerate(label_names)}
    ids = []
    for (where, _, _), tags in zip(sentences, out_tags):
        try:
            ids.append([tag2id[t] for t in tags])
        except KeyError as err:
            raise DataError(f"{where}: tag {err.args[0]!r} is not in the label set "
                            f"({', '.join(label_names)})") from None
    feats = datasets.Features({
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=list(label_names))),
    })
    ds = datasets.Dataset.from_dict({"tokens": out_tokens, "ner_tags": ids}, features=feats)
    stats.kept = len(ds)
    stats.log()
    return ds


def read_conll(
    path: str | os.PathLike, *, sep: str | None = None, scheme: str | None = None,
    to_scheme: str | None = None, label_names: Sequence[str] | None = None,
    on_invalid: str = "error", encoding: str = "utf-8", return_stats: bool = False,
) -> datasets.Dataset | tuple[datasets.Dataset, ReadStats]:
    """Read a CoNLL-style file (token and tag columns, blank line between sentences).

    Args:
        sep: column separator; None splits on any white space.
        scheme: "BIO" or "BIOES" of the file; None detects it (E-/S- tags mean BIOES).
        to_scheme: convert the tags to this scheme.
        label_names: the tag list in id order; None builds "O" + sorted types' tags.
        on_invalid: "error", "repair" or "keep" for tag sequences that break the scheme.
        encoding: the file's text encoding, e.g. "gbk" (default UTF-8).
    """
    path = Path(path)
    stats = ReadStats(str(path))
    ds = build_ner_dataset(_conll_sentences(path, sep, stats, encoding), scheme=scheme, to_scheme=to_scheme,
                           label_names=label_names, on_invalid=on_invalid, stats=stats)
    return (ds, stats) if return_stats else ds


def read_paddle_ner(
    path: str | os.PathLike, *, scheme: str | None = None, to_scheme: str | None = None,
    label_names: Sequence[str] | None = None, on_invalid: str = "error", encoding: str = "utf-8",
    return_stats: bool = False,
) -> datasets.Dataset | tuple[datasets.Dataset, ReadStats]:
    """Read PaddleNLP's NER tsv (``text_a<TAB>label`` header; ``\\x02``-joined chars and tags);
    options as `read_conll`'s."""
    path = Path(path)
    stats = ReadStats(str(path))
    ds = build_ner_dataset(_paddle_sentences(path, stats, encoding), scheme=scheme, to_scheme=to_scheme,
                           label_names=label_names, on_invalid=on_invalid, stats=stats)
    return (ds, stats) if return_stats else ds
