"""The tests that matter for a port: same weights, same inputs, same numbers as transformers."""

from __future__ import annotations

import logging

import pytest
import torch
import transformers

from nlp._common import ConfigError
from nlp.models import ErnieConfig, ErnieForMaskedLM, ErnieModel

ATOL = 1e-5

# (name, hf config class kwargs, model_type) — several tiny shapes, with and without task ids.
TINY = {
    "ernie-task": dict(model_type="ernie", vocab_size=97, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=48, max_position_embeddings=40,
                       type_vocab_size=4, use_task_id=True, task_type_vocab_size=16),
    "ernie-relu": dict(model_type="ernie", vocab_size=61, hidden_size=24, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=40, hidden_act="relu",
                       max_position_embeddings=33, use_task_id=False, layer_norm_eps=1e-5),
    "bert": dict(model_type="bert", vocab_size=83, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=40),
    # XLM-R: pad id 1, positions from pad + 1 (the table has two rows more than tokens), one
    # token type, eps 1e-5, RoBERTa's key names (`roberta.`, `lm_head`)
    "xlm-roberta": dict(model_type="xlm-roberta", vocab_size=71, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=16,
                        type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5),
}
_HF_PREFIX = {"ernie": "Ernie", "bert": "Bert", "xlm-roberta": "XLMRoberta"}


def _hf_config(kw):
    kw = dict(kw)
    model_type = kw.pop("model_type")
    return getattr(transformers, _HF_PREFIX[model_type] + "Config")(**kw)


def _hf_class(model_type: str, head: str):
    return getattr(transformers, _HF_PREFIX[model_type] + head)


def _inputs(kw, seed=0, B=3, T=11):
    g = torch.Generator().manual_seed(seed)
    pad = kw.get("pad_token_id", 0)
    ids = torch.randint(pad + 1, kw["vocab_size"], (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = pad
    tt = torch.randint(0, kw.get("type_vocab_size", 2), (B, T), generator=g)
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}
    if kw.get("use_task_id"):
        batch["task_type_ids"] = torch.randint(0, kw["task_type_vocab_size"], (B, T), generator=g)
    return batch


def _close(a, b):
    diff = (a - b).abs().max().item()
    assert diff <= ATOL, f"max abs diff {diff}"


def _assert_same_outputs(ours, ref, batch):
    """Our model and transformers' on one batch: the hidden states and pooled output of a
    backbone, or the logits of a head."""
    with torch.no_grad():
        r, o = ref(**batch), ours(**batch)
    if isinstance(ours, ErnieModel):
        _close(o.last_hidden_state, r.last_hidden_state)
        _close(o.pooler_output, r.pooler_output)
    else:
        _close(o.logits, r.logits)


@pytest.mark.parametrize("name", list(TINY))
@pytest.mark.parametrize("head", ["Model", "ForMaskedLM"])
def test_transformers_dir_loads_here(tmp_path, name, head):
    kw = TINY[name]
    torch.manual_seed(0)
    ref = _hf_class(kw["model_type"], head)(_hf_config(kw)).eval()
    ref.save_pretrained(tmp_path)
    ours_cls = ErnieModel if head == "Model" else ErnieForMaskedLM
    ours = ours_cls.from_pretrained(tmp_path)
    batch = _inputs(kw)
    _assert_same_outputs(ours, ref, batch)


@pytest.mark.parametrize("name", list(TINY))
@pytest.mark.parametrize("head", ["Model", "ForMaskedLM"])
def test_our_dir_loads_in_transformers(tmp_path, name, head):
    kw = TINY[name]
    torch.manual_seed(1)
    ours_cls = ErnieModel if head == "Model" else ErnieForMaskedLM
    ours = ours_cls(ErnieConfig(**kw)).eval()
    with torch.no_grad():  # non-trivial LayerNorm / bias values, so a swapped key would show
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ours.save_pretrained(tmp_path)
    ref_cls = _hf_class(kw["model_type"], head)
    ref, info = ref_cls.from_pretrained(tmp_path, output_loading_info=True, attn_implementation="sdpa")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    ref.eval()
    batch = _inputs(kw, seed=3)
    _assert_same_outputs(ours, ref, batch)


def test_training_mode_grads_match_transformers_without_dropout(tmp_path):
    kw = dict(TINY["ernie-task"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(2)
    ref = transformers.ErnieForMaskedLM(_hf_config(kw))
    ref.save_pretrained(tmp_path)
    ours = ErnieForMaskedLM.from_pretrained(tmp_path).train()
    ref.train()
    batch = _inputs(kw)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    lr, lo = ref(**batch, labels=labels).loss, ours(**batch, labels=labels).loss
    _close(lo, lr)
    lr.backward()
    lo.backward()
    qkv = ours.backbone.layers[0].qkv.weight.grad
    hq = ref.ernie.encoder.layer[0].attention.self
    _close(qkv, torch.cat([hq.query.weight.grad, hq.key.weight.grad, hq.value.weight.grad]))
    _close(ours.backbone.embeddings.word.weight.grad, ref.ernie.embeddings.word_embeddings.weight.grad)


def test_legacy_pytorch_bin_with_tf_names_and_tied_copies(tmp_path):
    """bert-base-chinese style: pytorch_model.bin, LayerNorm.gamma/beta, decoder copy, NSP head."""
    kw = TINY["bert"]
    torch.manual_seed(3)
    ref = transformers.BertForPreTraining(_hf_config(kw)).eval()
    state = {}
    for k, v in ref.state_dict().items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[k] = v.clone()
    state["bert.embeddings.position_ids"] = torch.arange(kw["max_position_embeddings"])[None]
    torch.save(state, tmp_path / "pytorch_model.bin")
    _hf_config(kw).save_pretrained(tmp_path)
    ours = ErnieForMaskedLM.from_pretrained(tmp_path)
    batch = _inputs(kw)
    with torch.no_grad():
        _close(ours(**batch).logits, ref(**batch).prediction_logits)


def test_head_checkpoint_into_backbone_warns_by_name(tmp_path, caplog):
    kw = TINY["ernie-task"]
    torch.manual_seed(4)
    transformers.ErnieForMaskedLM(_hf_config(kw)).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="nlp.models._modeling"):
        model = ErnieModel.from_pretrained(tmp_path)
    text = caplog.text
    assert "pooler.dense.weight" in text and "newly initialised" in text  # MLM has no pooler
    assert "cls.predictions.transform.dense.weight" in text  # another head's weight, not used
    assert model.pooler is not None


def test_backbone_checkpoint_into_mlm_warns_new_head(tmp_path, caplog):
    kw = TINY["bert"]
    torch.manual_seed(5)
    transformers.BertModel(_hf_config(kw)).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="nlp.models._modeling"):
        ErnieForMaskedLM.from_pretrained(tmp_path)
    assert "cls.predictions.bias" in caplog.text and "newly initialised" in caplog.text
    assert "pooler.dense" in caplog.text  # unused by the MLM model


def test_mismatch_errors_name_keys_and_shapes(tmp_path):
    kw = TINY["ernie-task"]
    torch.manual_seed(6)
    transformers.ErnieModel(_hf_config(kw)).save_pretrained(tmp_path)
    # a config that disagrees with the weights: no task ids -> unexpected task_type_embeddings
    with pytest.raises(ConfigError, match="unexpected keys: embeddings.task_type_embeddings.weight"):
        ErnieModel.from_pretrained(tmp_path, use_task_id=False)
    with pytest.raises(ConfigError, match=r"shape mismatches: .*word_embeddings.weight \(97, 32\)"):
        ErnieModel.from_pretrained(tmp_path, vocab_size=98)
    with pytest.raises(ConfigError, match=r"missing keys: .*encoder.layer.2.attention.self.query.weight"):
        ErnieModel.from_pretrained(tmp_path, num_hidden_layers=3)


def test_missing_weights_file_says_what_to_do(tmp_path):
    ErnieConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, num_hidden_layers=1,
                intermediate_size=8).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="nlp convert paddle"):
        ErnieModel.from_pretrained(tmp_path)


def test_xlm_roberta_positions_follow_the_padding_offset(tmp_path):
    """Position ids count a row's non-pad tokens from pad + 1 on, so a row padded on the right
    and the same row alone agree; a sequence of max_position_embeddings - pad - 1 tokens fits,
    one more is refused naming the limit."""
    kw = TINY["xlm-roberta"]
    torch.manual_seed(7)
    model = ErnieModel(ErnieConfig(**kw)).eval()
    assert model.config.position_offset == 2 and model.config.max_sequence_length == 14
    ids = torch.randint(2, kw["vocab_size"], (1, 14))
    padded = torch.cat([ids[:, :9], torch.ones(1, 5, dtype=torch.long)], 1)
    mask = padded.ne(1).long()
    with torch.no_grad():
        alone = model(ids[:, :9]).last_hidden_state
        both = model(padded, attention_mask=mask).last_hidden_state[:, :9]
        model(ids)  # 14 tokens use positions 2..15, the table's last row
    _close(both, alone)
    with pytest.raises(Exception, match=r"16 less the 2 rows .* max_length<=14"):
        model(torch.randint(2, kw["vocab_size"], (1, 15)))
