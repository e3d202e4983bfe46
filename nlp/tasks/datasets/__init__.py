"""Datasets by name: five built-in offline corpora and a table of public Chinese datasets.

    from nlp.tasks import datasets as nds
    dsd = nds.load("reviews-zh")                     # DatasetDict train/dev/test, offline
    test = nds.load("peoples-daily-1998-ner", "test")
    tnews = nds.load("tnews", data_files={"dev": "tnews_public/dev.json"})   # a local copy
    nds.dataset_info("tnews")                        # task, labels, sources, figures
"""

from __future__ import annotations

import os
from typing import Mapping

from nlp._common import DataError, UnknownNameError, did_you_mean
from nlp._extras import LazyModule
from nlp.tasks.classification.data import read_classification
from nlp.tasks.datasets._download import FileFetcher, fetch_split
from nlp.tasks.datasets.builtin import BUILTIN, BuiltinDataset, load_builtin, register_dataset
from nlp.tasks.datasets.public import PUBLIC, PublicDataset
from nlp.tasks.ner.data import read_conll, read_paddle_ner
from nlp.tasks.qa.data import read_squad

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["load", "load_dataset_by_name", "list_datasets", "dataset_info", "read_public_file",
           "fetch_split", "FileFetcher", "BUILTIN", "PUBLIC", "BuiltinDataset", "register_dataset"]


def list_datasets() -> list[str]:
    """Every dataset name: built-in ones first (a name may be both: `load` reads the built-in
    corpus, or with `data_files=` the public entry's published format, e.g. msra-ner)."""
    return list(dict.fromkeys([*BUILTIN, *PUBLIC]))


def _check(name: str) -> str:
    key = name.lower()
    if key not in BUILTIN and key not in PUBLIC:
        raise UnknownNameError(f"Unknown dataset {name!r}.{did_you_mean(key, list_datasets())} "
                               "See `nlp data ls`.")
    return key


def read_public_file(spec: PublicDataset, path: str | os.PathLike, split: str) -> datasets.Dataset:
    """Read one split file of a public dataset in its published format."""
    kwargs = dict(spec.reader_kwargs)
    if spec.reader == "classification":
        if spec.label_names:
            kwargs.setdefault("label_names", spec.label_names)
        return read_classification(path, **kwargs)
    if spec.reader == "paddle_ner":
        kwargs.setdefault("label_names", ["O", *[t for t in spec.label_names or () if t != "O"]])
        return read_paddle_ner(path, **kwargs)
    if spec.reader == "conll":
        return read_conll(path, **kwargs)
    return read_squad(path, **kwargs)


def load(
    name: str, split: str | None = None, *, data_files: Mapping[str, str] | None = None,
    cache_dir: str | os.PathLike | None = None, local_files_only: bool = False, fetch: FileFetcher | None = None,
) -> datasets.DatasetDict | datasets.Dataset:
    """A `DatasetDict` of every split of `name`, or one `Dataset` when `split` is given.

    Built-in datasets parse installed corpora once, then load from the cache
    (``$NLP_HOME/datasets``). Public ones read `data_files` (split -> local path, in the
    published format) or download their published files with `fetch`, the hub's downloader
    (`nlp.hub.fetch_file`; `nlp.auto.load_dataset` passes it: this layer does not import the hub).
    """
    key = _check(name)
    if key in BUILTIN and not (data_files and key in PUBLIC):
        if data_files:
            raise DataError(f"{name!r} is built in and reads installed packages; data_files= "
                            "is for the public datasets")
        dsd, _ = load_builtin(key, cache_dir)
        splits = list(dsd)
    else:
        spec = PUBLIC[key]
        splits = list(data_files) if data_files else list(spec.splits)
        dsd = None
    if split is not None and split not in splits:
        raise UnknownNameError(f"{name!r} has no split {split!r}; valid: {', '.join(splits)}."
                               f"{did_you_mean(split, splits)}")
    if dsd is None:
        wanted = [split] if split else splits
        dsd = datasets.DatasetDict({
            s: read_public_file(
                spec, data_files[s] if data_files else fetch_split(spec, s, fetch=fetch, local_files_only=local_files_only), s)
            for s in wanted})
    return dsd[split] if split else dsd


load_dataset_by_name = load


def dataset_info(name: str, *, with_stats: bool = True, cache_dir=None) -> dict:
    """Task, labels, sources and, for built-in datasets, split sizes and label/entity counts."""
    key = _check(name)
    if key in BUILTIN:
        spec = BUILTIN[key]
        from nlp.tasks.datasets.builtin import package_info

        info = {"name": key, "task": spec.task, "description": spec.description,
                "label_names": list(spec.label_names), "source": spec.source, "builtin": True,
                "packages": package_info(spec), "published": spec.published or None}
        if with_stats:
            _, stats = load_builtin(key, cache_dir)
            info.update(stats)
        return info
    spec = PUBLIC[key]
    return {"name": key, "task": spec.task, "builtin": False, "format": spec.note,
            "label_names": list(spec.label_names) if spec.label_names else None,
            "sources": {"paddlenlp": spec.url or spec.split_urls, "archive_md5": spec.md5,
                        "files": {s: {"path": p, "md5": m} for s, (p, m) in spec.splits.items()},
                        "huggingface": spec.hf_name + (f" ({spec.hf_config})" if spec.hf_config else "")
                        if spec.hf_name else None},
            "homepage": spec.homepage}
