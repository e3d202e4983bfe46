"""Vocabulary pruning: the tokens of the data and the specials are kept, the embeddings and the
tokenizer remapped; the result is a model directory nlp and transformers load, with the same
outputs on those texts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.tasks import get_task
from nlp.tokenizer import load_tokenizer
from nlp.train.vocab_pruning import prune_vocabulary

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TEXTS = ["这家餐厅的服务非常好，菜也很新鲜。", "太难吃了", "物流很快，包装完好，iPhone推荐购买。", "一般般吧"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prune") / "clf"
    torch.manual_seed(0)
    cfg = nlp.AutoConfig.from_pretrained(ASSET, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=128, id2label={0: "negative", 1: "positive"})
    model = get_task("text-classification").head(cfg)
    model.save_pretrained(out)
    load_tokenizer(ASSET).save_pretrained(out)
    return out


def test_the_pruned_model_keeps_the_data_tokens_and_its_outputs(source, tmp_path):
    r = prune_vocabulary(source, TEXTS, tmp_path / "small")
    old_tok, new_tok = load_tokenizer(source), load_tokenizer(r.out)
    used = {i for row in old_tok(TEXTS)["input_ids"] for i in row} | set(old_tok.all_special_ids)
    assert r.kept == len(used) == new_tok.vocab_size < 60 and r.vocab_before == 7000
    assert r.param_bytes_after < r.param_bytes_before and r.model_bytes_after < r.model_bytes_before
    # the specials keep their ids; the texts' tokens are the same strings
    assert [new_tok.convert_ids_to_tokens(i) for i in range(5)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert new_tok.tokenize(TEXTS[2]) == old_tok.tokenize(TEXTS[2])
    assert new_tok.tokenize("鑫") == ["[UNK]"]  # a character the data never used
    head = get_task("text-classification").head
    old, new = head.from_pretrained(source).eval(), head.from_pretrained(r.out).eval()
    a, b = old_tok(TEXTS, padding=True, return_tensors="pt"), new_tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(new(**b).logits, old(**a).logits)
    # transformers reads the directory: model and tokenizer
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(r.out).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(r.out)
    enc = hf_tok(TEXTS, padding=True, return_tensors="pt")
    assert enc["input_ids"].tolist() == b["input_ids"].tolist()
    with torch.no_grad():
        torch.testing.assert_close(hf(**enc).logits, old(**a).logits, atol=1e-4, rtol=1e-4)
    assert transformers.AutoModel.from_pretrained(r.out).config.vocab_size == r.kept


def test_min_count_and_the_cli(source, tmp_path, capsys):
    few = prune_vocabulary(source, TEXTS * 2 + ["鑫"], tmp_path / "twice", min_count=2)
    assert load_tokenizer(few.out).tokenize("鑫") == ["[UNK]"]  # seen once: dropped
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    from nlp.cli import main

    assert main(["prune-vocab", str(source), "--out", str(tmp_path / "cli"), "--data", str(corpus.with_suffix(".x")),
                 "--split", "none", "--corpus", str(corpus)]) == 2  # --data is not a dataset, a split or a file
    assert not (tmp_path / "cli").exists()


def test_bad_input_is_refused_and_nothing_is_overwritten(source, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(ConfigError, match="exists; choose a new directory"):
        prune_vocabulary(source, TEXTS, tmp_path / "taken")
    with pytest.raises(ConfigError, match="no texts to take the vocabulary from"):
        prune_vocabulary(source, ["", "  "], tmp_path / "empty")
    with pytest.raises(ConfigError, match="--min-count 0"):
        prune_vocabulary(source, TEXTS, tmp_path / "zero", min_count=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_a_layer_as_wide_as_the_vocabulary_is_not_cut():
    """Rows are cut where a tensor's shape follows vocab_size, not wherever a dimension equals
    it: with hidden_size == vocab_size the LayerNorms and biases keep every entry."""
    from nlp.models import ErnieConfig, ErnieModel
    from nlp.train.vocab_pruning import prune_model_vocab

    torch.manual_seed(0)
    config = ErnieConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=16, pad_token_id=0)
    model = ErnieModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.normal_()
    keep = [0, 1, 2, 5, 7, 9, 11]
    pruned = prune_model_vocab(model, keep).eval()
    assert pruned.config.vocab_size == len(keep)
    ids = torch.tensor([[1, 5, 9, 11, 2]])
    new_ids = torch.tensor([[keep.index(int(i)) for i in ids[0]]])
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
        got = pruned(input_ids=new_ids).last_hidden_state
    torch.testing.assert_close(got, want)
