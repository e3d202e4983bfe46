"""Training a hybrid vocabulary: contents, determinism, the CLI, reload."""

from __future__ import annotations

import json

import pytest

from nlp.cli import main
from nlp.tokenizer import HybridTokenizer, load_tokenizer, train_hybrid_tokenizer


def _corpus(tmp_path, reviews):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(reviews[::20]) + "\n", encoding="utf-8")
    return path


def test_vocab_has_specials_every_char_words_and_merges(tmp_path, reviews):
    path = _corpus(tmp_path, reviews)
    tok = train_hybrid_tokenizer([path], 8000, user_words=["飞桨"], word_fraction=0.5)
    vocab = tok.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    chars = {c.lower() for line in reviews[::20] for c in line if not c.isspace()}
    chars = {c.translate(tok._fold) for c in chars} - {" "}
    assert all(c in vocab and "##" + c in vocab for c in chars)
    assert "飞桨" in vocab and "服务" in vocab and tok.vocab_size <= 8000
    assert any(t.startswith("##") and len(t) > 3 for t in vocab)  # merged pieces exist
    assert tok.unknown_chars(reviews[::20]) == {}
    # characters and whole words are deterministic (BPE merge ties are not, see training.py)
    again = train_hybrid_tokenizer([path], 8000, user_words=["飞桨"], word_fraction=0.5)
    assert all(again.get_vocab()[c] == vocab[c] for c in chars) and again.vocab_size == tok.vocab_size


def test_hybrid_shorter_than_characters(hybrid_tok, reviews):
    sample = reviews[1::50]
    n_hybrid = sum(len(r) for r in hybrid_tok(sample, add_special_tokens=False)["input_ids"])
    n_chars = sum(len("".join(t.split())) for t in sample)
    assert n_hybrid < 0.85 * n_chars


def test_cli_train_then_encode(tmp_path, reviews, capsys):
    path = _corpus(tmp_path, reviews)
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", str(path), "--vocab-size", "6000", "--out", str(out),
                 "--user-word", "飞桨"]) == 0
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] == "HybridTokenizer"
    tok = load_tokenizer(out)
    assert isinstance(tok, HybridTokenizer) and tok.vocab_size == 6000
    capsys.readouterr()
    assert main(["tokenizer", "encode", str(out), "我爱飞桨"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["text"] for r in rows] == ["", "我", "爱", "飞桨", ""]
    assert main(["tokenizer", "train", str(tmp_path / "nope.txt"), "--vocab-size", "10", "--out", str(out)]) == 2


def test_wordpiece_vocab_is_character_level_and_reloads(tmp_path, reviews):
    from nlp.tokenizer import WordPieceTokenizer, train_wordpiece_tokenizer

    path = _corpus(tmp_path, reviews)
    tok = train_wordpiece_tokenizer([path], 3000, tmp_path / "wp")
    vocab = tok.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert isinstance(tok, WordPieceTokenizer) and tok.vocab_size <= 3000
    # every CJK character of the corpus is a token of its own; no Chinese word is one token
    cjk = {c for line in reviews[::20] for c in line if "\u4e00" <= c <= "\u9fff"}
    assert cjk <= set(vocab)
    assert not [t for t in vocab if len(t) > 1 and any("\u4e00" <= c <= "\u9fff" for c in t)]
    enc = tok("这个手机很好用iphone")
    assert enc.tokens()[1:6] == ["这", "个", "手", "机", "很"] and 1 not in enc["input_ids"]
    again = load_tokenizer(tmp_path / "wp")
    assert again("这个手机很好用iphone")["input_ids"] == enc["input_ids"]


def test_wordpiece_too_small_vocab_names_the_size_needed(tmp_path, reviews):
    import pytest

    from nlp._common import ConfigError
    from nlp.tokenizer import train_wordpiece_tokenizer

    with pytest.raises(ConfigError, match="too small.*--vocab-size"):
        train_wordpiece_tokenizer([_corpus(tmp_path, reviews)], 200)


def test_cli_train_wordpiece(tmp_path, reviews, capsys):
    path = _corpus(tmp_path, reviews)
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", str(path), "--kind", "wordpiece", "--vocab-size", "3000",
                 "--out", str(out)]) == 0
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    assert main(["tokenizer", "train", str(path), "--kind", "wordpiece", "--vocab-size", "3000",
                 "--out", str(out), "--user-word", "飞桨"]) == 2
    assert "hybrid only" in capsys.readouterr().err


def test_cli_train_never_writes_into_an_existing_out(tmp_path, reviews, capsys):
    # the tokenizer files of a model directory, overwritten, would leave a model that loads and
    # answers wrongly: an --out that exists is refused, its files untouched
    path = _corpus(tmp_path, reviews)
    model = tmp_path / "model"
    model.mkdir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "config.json"):
        (model / name).write_text(f"the model's own {name}")
    capsys.readouterr()
    assert main(["tokenizer", "train", str(path), "--vocab-size", "6000", "--out", str(model)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(model)!r} exists; choose a new directory (nothing is overwritten)" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "tokenizer.json", "tokenizer_config.json",
                                                      "vocab.txt"]
    assert all(p.read_text() == f"the model's own {p.name}" for p in model.iterdir())


def test_cli_train_writes_the_tokenizer_whole_or_not_at_all(tmp_path, reviews, monkeypatch):
    import nlp.tokenizer.base as base

    def fail(path, obj):  # the disk fills after tokenizer.json and vocab.txt were written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(base, "write_json", fail)
    path = _corpus(tmp_path, reviews)
    out = tmp_path / "tok"
    with pytest.raises(OSError, match="No space left"):
        main(["tokenizer", "train", str(path), "--vocab-size", "6000", "--out", str(out)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no out, no temporary directory


@pytest.mark.parametrize("value", ["0", "-7"])
def test_cli_train_refuses_a_max_length_below_one(tmp_path, reviews, capsys, value):
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", str(_corpus(tmp_path, reviews)), "--vocab-size", "6000", "--out", str(out),
                 "--max-length", value]) == 2
    assert f"--max-length {value}: give the longest input in tokens, 1 or more" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("where, message", [
    ("FILE", "is a file, not a directory; give a directory path"),
    ("FILE/sub", "its parent '{root}/FILE' is a file, not a directory; choose a directory you can write to"),
])
def test_cli_train_refuses_an_out_it_cannot_write_in_one_line(tmp_path, reviews, capsys, where, message):
    (tmp_path / "FILE").write_text("someone's file")
    path = _corpus(tmp_path, reviews)
    capsys.readouterr()
    assert main(["tokenizer", "train", str(path), "--vocab-size", "6000", "--out", str(tmp_path / where)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(tmp_path / where)!r}" in err and message.format(root=tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "FILE").read_text() == "someone's file"
