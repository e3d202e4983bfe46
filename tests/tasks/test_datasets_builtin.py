"""Built-in datasets: fixed splits, no text across splits, PER names merged, cache, CLI, offline errors."""

import pytest

from nlp._common import DataError, UnknownNameError
from nlp.tasks import datasets as nds
from nlp.tasks.datasets.builtin import load_builtin, parse_peoples_daily_line, split_of_text
from nlp.tasks.ner.tags import get_entities


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "nlp-datasets-cache"


def test_reviews_split_is_fixed_and_disjoint(cache):
    dsd, stats = load_builtin("reviews-zh", cache)
    splits = {s: set(dsd[s]["text"]) for s in ("train", "dev", "test")}
    assert not (splits["train"] & splits["dev"]) and not (splits["train"] & splits["test"])
    assert not (splits["dev"] & splits["test"])
    assert all(split_of_text(t) == "dev" for t in list(splits["dev"])[:200])
    assert sum(len(v) for v in splits.values()) == sum(f["rows"] for f in stats["splits"].values())
    assert stats["skipped"]["texts in both files (dropped from both)"] > 0
    assert dsd["train"].features["label"].names == ["negative", "positive"]
    n = len(dsd["train"])
    assert 0.75 < n / sum(f["rows"] for f in stats["splits"].values()) < 0.85


def test_peoples_daily_parse_rules():
    doc, sents = parse_peoples_daily_line(
        "19980101-01-001-002/m  [中共/nt 中央/n]nt  总书记/n  江/nr  泽民/nr  李/nr  鹏/nr  克林顿/nr  "
        "在/p  [香港/ns 特别/a 行政区/n]ns  说/v  。/w  ”/w  北京/ns  [新/a 世纪/n]nz")
    assert doc == "19980101-01-001"
    (chars, spans), (chars2, spans2) = sents
    text = "".join(chars)
    assert text.endswith("说。”") and "".join(chars2) == "北京新世纪"
    got = [(t, text[s : e + 1]) for t, s, e in spans]
    assert got == [("ORG", "中共中央"), ("PER", "江泽民"), ("PER", "李鹏"), ("PER", "克林顿"),
                   ("LOC", "香港特别行政区")]
    assert [(t, "".join(chars2)[s : e + 1]) for t, s, e in spans2] == [("LOC", "北京")]


def test_peoples_daily_dataset(cache):
    dsd = nds.load("peoples-daily-1998-ner", cache_dir=cache)
    assert list(dsd) == ["train", "dev", "test"]
    names = dsd["dev"].features["ner_tags"].feature.names
    assert names == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    row = dsd["train"][1]  # "中共中央总书记、国家主席江泽民"
    ents = [("".join(row["tokens"][s : e + 1]), t) for t, s, e in get_entities([names[i] for i in row["ner_tags"]])]
    assert ("江泽民", "PER") in ents and ("中共中央", "ORG") in ents
    info = nds.dataset_info("peoples-daily-1998-ner", cache_dir=cache)
    assert set(info["splits"]["test"]["entities"]) == {"LOC", "ORG", "PER"}
    assert max(len(t) for t in dsd["dev"]["tokens"]) < 600  # sentences, not whole paragraphs


def test_names_splits_and_offline_errors(monkeypatch, cache):
    with pytest.raises(UnknownNameError, match="Did you mean 'tnews'"):
        nds.load("tnws")
    with pytest.raises(UnknownNameError, match="no split 'validation'"):
        nds.load("reviews-zh", "validation", cache_dir=cache)
    monkeypatch.setenv("NLP_OFFLINE", "1")
    with pytest.raises(DataError, match=r"cmrc2018_dev.json.*data_files=\{'dev'"):
        nds.load("cmrc2018", "dev")


def test_every_public_entry_is_complete():
    for name, spec in nds.PUBLIC.items():
        assert spec.splits and (spec.url or set(spec.split_urls) == set(spec.splits)), name
        assert spec.reader in ("classification", "conll", "paddle_ner", "squad"), name
        assert all(m is None or len(m) == 32 for _, m in spec.splits.values()), name


def test_cli_data_commands(capsys, monkeypatch, cache, tmp_path):
    from nlp.cli import main

    monkeypatch.setenv("NLP_HOME", str(cache.parent))
    assert main(["data", "ls"]) == 0
    assert "peoples-daily-1998-ner" in capsys.readouterr().out
    assert main(["data", "info", "afqmc"]) == 0
    assert "afqmc_public.zip" in capsys.readouterr().out
    f = tmp_path / "a.jsonl"
    f.write_text('{"text": "好", "label": "pos"}\n\n{"text": "", "label": "neg"}\n', encoding="utf-8")
    assert main(["data", "stats", str(f), "--task", "classification", "--skip-empty"]) == 0
    out = capsys.readouterr().out
    assert "1 records" in out and "skipped: 1 empty texts" in out and "skipped: 1 blank lines" in out
    assert main(["data", "stats", str(f), "--task", "classification"]) == 2
    assert "a.jsonl:3: empty text" in capsys.readouterr().err
