"""Public datasets' files go through the hub's downloader (one downloader): the hub cache, resume,
md5 + recorded sha256, locks and the offline switches. A 127.0.0.1 server stands in for the
publisher; every test is bounded in time."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from hub_servers import sha

import nlp.auto
from nlp._common import DataError
from nlp.tasks import datasets as nds
from nlp.tasks.datasets.public import PUBLIC, PublicDataset

pytestmark = pytest.mark.timeout(120)

ROWS = [{"sentence": f"第{i}句很好" if i % 2 else f"第{i}句很差", "label": str(i % 2)} for i in range(2000)]


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for split in ("train", "dev"):
            z.writestr(f"tiny_public/{split}.json", "\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS))
    return buf.getvalue()


ARCHIVE = _zip()


@pytest.fixture
def tiny(flaky, cache, monkeypatch):
    """A public dataset published as one zip on the test's server."""
    flaky.files["tiny_public.zip"] = ARCHIVE
    spec = PublicDataset(
        "tiny", "text-classification", "classification",
        {"train": ("tiny_public/train.json", None), "dev": ("tiny_public/dev.json", None)},
        url=f"{flaky.url}/tiny_public.zip", md5=hashlib.md5(ARCHIVE).hexdigest(),
        reader_kwargs={"text_column": "sentence"}, label_names=("0", "1"),
    )
    monkeypatch.setitem(PUBLIC, "tiny", spec)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    return spec


def test_public_dataset_is_fetched_into_the_hub_cache(tiny, flaky, cache):
    ds = nlp.auto.load_dataset("tiny", "dev")
    assert len(ds) == len(ROWS) and ds[1]["text"] == "第1句很好"
    archive = cache / "files--dataset-tiny" / "snapshots" / "url-main" / "tiny_public.zip"
    assert archive.read_bytes() == ARCHIVE
    assert json.loads((cache / "records/dataset-tiny.json").read_text()) == {"url-main": {"tiny_public.zip": sha(ARCHIVE)}}
    gets = len(flaky.ranges)
    nlp.auto.load_dataset("tiny", "train")  # from the cache: no second download
    assert len(flaky.ranges) == gets
    from nlp.hub import scan_cache

    assert "dataset-tiny" in [e.name for e in scan_cache(cache)]  # `nlp hub cache ls/rm` see it


def test_dataset_download_resumes(tiny, flaky, cache):
    flaky.drop_after["tiny_public.zip"] = len(ARCHIVE) * 2 // 3  # past the first 64 KiB read
    assert len(nlp.auto.load_dataset("tiny", "dev")) == len(ROWS)
    resumed = [r for r in flaky.ranges if r]
    assert resumed and int(resumed[0].split("=")[1].rstrip("-")) >= 64 * 1024, flaky.ranges


def test_dataset_md5_mismatch_leaves_nothing(tiny, flaky, cache):
    flaky.corrupt.add("tiny_public.zip")
    with pytest.raises(DataError, match=f"(?s)md5 mismatch.*expected {tiny.md5}"):
        nlp.auto.load_dataset("tiny", "dev")
    assert not [p for p in cache.rglob("*") if p.is_file() and ("zip" in p.name) and not p.name.endswith(".lock")]


@pytest.mark.parametrize("var", ["NLP_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_dataset_offline_switches(tiny, flaky, cache, monkeypatch, var, no_network):
    monkeypatch.setenv(var, "1")
    with pytest.raises(DataError, match=f"(?s){var}.*data_files="):
        nlp.auto.load_dataset("tiny", "dev")
    assert flaky.ranges == []


def test_offline_reads_what_was_fetched(tiny, flaky, cache, monkeypatch):
    nlp.auto.load_dataset("tiny", "dev")
    monkeypatch.setenv("NLP_OFFLINE", "1")
    flaky.files.clear()
    assert len(nlp.auto.load_dataset("tiny", "train")) == len(ROWS)


def test_tasks_layer_alone_names_the_way_to_download(tiny):
    """nlp.tasks does not import the hub: without a downloader it says how to get the files."""
    with pytest.raises(DataError, match=r"nlp.auto.load_dataset\('tiny'\).*nlp data download tiny.*data_files="):
        nds.load("tiny", "dev")


def test_nlp_data_download(tiny, flaky, cache, capsys):
    from nlp.cli import main

    assert main(["data", "download", "tiny", "--split", "dev"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dev: ") and out.strip().endswith("tiny_public/dev.json")
    assert main(["data", "download", "tiny", "--split", "tset"]) != 0
    assert "Did you mean 'test'" not in capsys.readouterr().err  # only train/dev exist here
    assert main(["data", "download", "reviews-zh"]) == 0
    assert "built in" in capsys.readouterr().out
