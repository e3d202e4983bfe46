"""Width pruning: fewer heads of the same size in the encoder (`attention_head_size`), the
importance of heads and neurons (|dL/dgate|, checked against explicit gates), the pruned model
equal to the original with those heads and neurons zeroed, and `nlp prune-width` end to end
(a directory nlp evaluates and exports; transformers loads a neurons-only one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import nlp
from nlp._common import ConfigError
from nlp.models import ErnieConfig
from nlp.tasks import get_task
from nlp.tokenizer import load_tokenizer
from nlp.train.width_pruning import PRUNING_FILE, WidthImportance, prune_model_width, width_importance

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
REVIEWS = ["这家餐厅的服务非常好，菜也很新鲜。", "太难吃了，再也不来了", "物流很快，包装完好，推荐购买。", "一般般吧",
           "质量太差，用了两天就坏了", "客服态度很好，问题很快解决了", "价格便宜，性价比高", "味道不错，就是有点贵"]


def _config(**overrides) -> ErnieConfig:
    kw = dict(vocab_size=7000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
              max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              id2label={0: "negative", 1: "positive"})
    return ErnieConfig.from_dict({**kw, **overrides})


def _batch(labels: bool = True) -> dict[str, torch.Tensor]:
    enc = load_tokenizer(ASSET)(REVIEWS, padding=True, return_tensors="pt")
    batch = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    if labels:
        batch["labels"] = torch.tensor([i % 2 for i in range(len(REVIEWS))])
    return batch


def _classifier(config: ErnieConfig, seed: int = 0):
    torch.manual_seed(seed)
    model = get_task("text-classification").head(config)
    for p in model.parameters():  # weights large enough that every head and neuron matters
        torch.nn.init.normal_(p, std=0.3)
    return model.eval()


# ------------------------------------------------------------------ fewer heads of the same size
@pytest.mark.parametrize("fast_paths", ["1", "0"])
def test_an_encoder_with_fewer_heads_than_its_width_runs_saves_and_loads(tmp_path, monkeypatch, fast_paths):
    monkeypatch.setenv("NLP_FAST_PATHS", fast_paths)
    cfg = _config(num_attention_heads=3, attention_head_size=8)  # heads 24 wide in a 32-wide model
    assert cfg.attention_size == 24 and cfg.head_dim == 8
    model = _classifier(cfg)
    layer = model._encoder_backbone().layers[0]
    assert tuple(layer.qkv.weight.shape) == (72, 32) and tuple(layer.attn_out.weight.shape) == (32, 24)
    assert cfg.num_parameters + 32 * 2 + 2 == sum(p.numel() for p in model.parameters())  # + the classifier
    batch = _batch(labels=False)
    with torch.no_grad():
        logits = model(**batch).logits
        backbone = model._encoder_backbone()
        full = backbone(**batch).pooler_output
        torch.testing.assert_close(backbone.pooled_output(**batch), full, atol=1e-5, rtol=1e-5)
    model.save_pretrained(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["attention_head_size"] == 8 and saved["num_attention_heads"] == 3
    again = get_task("text-classification").head.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).logits, logits)


def test_fast_paths_and_plain_torch_agree_with_fewer_heads(monkeypatch):
    cfg = _config(num_attention_heads=3, attention_head_size=8)
    outs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("NLP_FAST_PATHS", flag)
        with torch.no_grad():
            outs.append(_classifier(cfg, seed=3)(**_batch(labels=False)).logits)
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)


def test_unpruned_configs_are_written_as_before():
    assert "attention_head_size" not in _config().to_dict()
    with pytest.raises(ConfigError, match="not divisible by num_attention_heads=3.*attention_head_size"):
        _config(num_attention_heads=3)
    with pytest.raises(ConfigError, match="attention_head_size must be a positive int"):
        _config(attention_head_size=0)


# ------------------------------------------------------------------ importance
def _gate_gradients(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/dgate for a gate on every head's output and every feed-forward neuron, computed with
    explicit gates: the layers' output linears called with their weight columns scaled."""
    layers = model._encoder_backbone().layers
    nh, hd = layers[0].num_heads, layers[0].head_dim
    head_gates = torch.ones(len(layers), nh, requires_grad=True)
    neuron_gates = torch.ones(len(layers), layers[0].ffn_out.weight.shape[1], requires_grad=True)
    params = dict(model.named_parameters())
    prefix = {id(m): n for n, m in model.named_modules()}
    for i, layer in enumerate(layers):
        p = prefix[id(layer)]
        params[f"{p}.attn_out.weight"] = layer.attn_out.weight * head_gates[i].repeat_interleave(hd)
        params[f"{p}.ffn_out.weight"] = layer.ffn_out.weight * neuron_gates[i]
    loss = torch.func.functional_call(model, params, kwargs=batch).loss
    loss.backward()
    return head_gates.grad.abs(), neuron_gates.grad.abs()


def test_importance_is_the_gradient_of_a_gate_on_each_head_and_neuron(monkeypatch):
    monkeypatch.setenv("NLP_FAST_PATHS", "0")  # functional_call replaces the weights the plain kernels read
    model = _classifier(_config(), seed=1)
    batch = _batch()
    heads, neurons = _gate_gradients(model, batch)
    imp = width_importance(model, [batch, batch])
    assert imp.batches == 2 and imp.examples == 2 * len(REVIEWS)
    torch.testing.assert_close(imp.heads.float(), 2 * heads, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(imp.neurons.float(), 2 * neurons, rtol=1e-4, atol=1e-7)
    assert heads.min() > 0 and len(set(heads.flatten().tolist())) == heads.numel()  # a real ranking
    assert all(p.grad is None for p in model.parameters()) and not model.training


def test_importance_needs_labels():
    with pytest.raises(ConfigError, match="computed no loss.*need their labels"):
        width_importance(_classifier(_config()), [_batch(labels=False)])
    with pytest.raises(ConfigError, match="no batches"):
        width_importance(_classifier(_config()), [])


# ------------------------------------------------------------------ pruning
def test_the_pruned_model_equals_the_original_with_those_heads_and_neurons_zeroed():
    model = _classifier(_config(), seed=2)
    torch.manual_seed(5)
    imp = WidthImportance(heads=torch.rand(2, 4, dtype=torch.float64), neurons=torch.rand(2, 48, dtype=torch.float64),
                          batches=1, examples=1)
    pruned, kept = prune_model_width(model, imp, heads=0.5, neurons=0.25)
    assert pruned.config.num_attention_heads == 2 and pruned.config.attention_head_size == 8
    assert pruned.config.intermediate_size == 12 and pruned.config.attention_size == 16
    for i in range(2):  # the most important ones, in their order
        assert kept["heads"][i] == sorted(imp.heads[i].argsort(descending=True)[:2].tolist())
        assert kept["neurons"][i] == sorted(imp.neurons[i].argsort(descending=True)[:12].tolist())
    zeroed = _classifier(_config(), seed=2)
    with torch.no_grad():
        for i, layer in enumerate(zeroed._encoder_backbone().layers):
            for h in set(range(4)) - set(kept["heads"][i]):
                layer.attn_out.weight[:, h * 8:(h + 1) * 8] = 0
            for n in set(range(48)) - set(kept["neurons"][i]):
                layer.ffn_out.weight[:, n] = 0
        batch = _batch(labels=False)
        torch.testing.assert_close(pruned.eval()(**batch).logits, zeroed(**batch).logits, atol=1e-5, rtol=1e-5)
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in model.parameters())


def test_keeping_everything_changes_nothing_and_bad_shares_are_refused():
    model = _classifier(_config(), seed=4)
    imp = WidthImportance(heads=torch.ones(2, 4, dtype=torch.float64), neurons=torch.ones(2, 48, dtype=torch.float64),
                          batches=1, examples=1)
    same, _ = prune_model_width(model, imp, heads=1.0, neurons=1.0)
    assert "attention_head_size" not in same.config.to_dict()
    with torch.no_grad():
        batch = _batch(labels=False)
        torch.testing.assert_close(same.eval()(**batch).logits, model(**batch).logits)
    for bad in (0, 1.5, -0.2, True):
        with pytest.raises(ConfigError, match=r"share of heads to keep must be in \(0, 1\]"):
            prune_model_width(model, imp, heads=bad)


# ------------------------------------------------------------------ the command
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A classification run (RUN/model + recipe.yaml) whose dev split is a file of 40 reviews."""
    root = tmp_path_factory.mktemp("width")
    run = root / "run"
    model = _classifier(_config(num_hidden_layers=2, num_attention_heads=4, intermediate_size=64), seed=6)
    model.save_pretrained(run / "model")
    load_tokenizer(ASSET).save_pretrained(run / "model")
    dev = root / "dev.jsonl"
    dev.write_text("".join(json.dumps({"text": t, "label": ["negative", "positive"][i % 2]}, ensure_ascii=False)
                           + "\n" for i, t in enumerate(REVIEWS * 5)), encoding="utf-8")
    (run / "recipe.yaml").write_text(yaml.safe_dump({"task": {"name": "text-classification"},
                                                     "data": {"max_length": 64, "files": {"dev": str(dev)}}}),
                                     encoding="utf-8")
    return run


def test_prune_width_cli_writes_a_model_that_evaluates_and_exports(tiny_run, tmp_path, capsys):
    from nlp.cli import main
    from nlp.deploy.manifest import read_manifest

    out = tmp_path / "narrow"
    assert main(["prune-width", str(tiny_run), "--out", str(out), "--heads", "0.5", "--neurons", "0.5",
                 "--examples", "24", "--batch-size", "8"]) == 0
    printed = capsys.readouterr().out
    assert "ranked on 24 examples" in printed and "heads per layer 4 -> 2" in printed and "64 -> 32" in printed
    record = json.loads((out / PRUNING_FILE).read_text())
    assert record["examples"] == 24 and len(record["kept_heads"]) == 2 and len(record["kept_neurons"][0]) == 32
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["num_attention_heads"], cfg["attention_head_size"], cfg["intermediate_size"]) == (2, 8, 32)
    assert (out / "vocab.txt").is_file() and not list(tmp_path.glob(".tmp-narrow~*"))
    # the pruned model scores, and exports: fp32, dynamic and static int8
    dev = yaml.safe_load((tiny_run / "recipe.yaml").read_text())["data"]["files"]["dev"]
    assert main(["evaluate", str(out), "--data", dev, "--split", "dev", "--task", "text-classification"]) == 0
    assert '"accuracy"' in capsys.readouterr().out
    static = ["--quantize", "int8-static", "--calibration", dev, "--calibration-split", "dev",
              "--calibration-size", "20"]
    for i, quantize in enumerate(([], ["--quantize", "int8"], static)):
        exported = tmp_path / f"export-{i}"
        assert main(["export", str(out), "--out", str(exported), *quantize]) == 0
        m = read_manifest(exported)
        assert m["check"]["fp32"]["max_abs_diff"] <= 1e-4  # the graph against PyTorch, before quantizing
        if quantize:  # dynamic: onnxruntime's fused attention with heads narrower than the model
            assert m["attention"] == ("fused" if i == 1 else "standard")
            assert m["check"]["int8"]["label_agreement"] >= 0.9
    assert main(["prune-width", str(tiny_run), "--out", str(out), "--heads", "0.5"]) != 0  # exists: refused
    assert "exists" in capsys.readouterr().err


def test_prune_width_refuses_what_would_prune_nothing(tiny_run, tmp_path, capsys):
    from nlp.cli import main

    assert main(["prune-width", str(tiny_run), "--out", str(tmp_path / "x")]) != 0
    assert "nothing to prune" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["prune-width", str(tiny_run), "--out", str(tmp_path / "y"), "--heads", "0"])
    assert "not in (0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_transformers_loads_a_neurons_only_pruning_and_refuses_fewer_heads(tiny_run, tmp_path):
    transformers = pytest.importorskip("transformers")
    from nlp.train.width_pruning import prune_width

    narrow = prune_width(tiny_run, tmp_path / "neurons", neurons=0.5, examples=16).out
    ours = get_task("text-classification").head.from_pretrained(narrow).eval()
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(narrow).eval()
    batch = _batch(labels=False)
    with torch.no_grad():
        torch.testing.assert_close(hf(**batch).logits, ours(**batch).logits, atol=1e-4, rtol=1e-4)
    fewer = prune_width(tiny_run, tmp_path / "heads", heads=0.5, examples=16).out
    with pytest.raises(Exception, match="(?i)size|shape"):  # never a silently different model
        transformers.AutoModelForSequenceClassification.from_pretrained(fewer)


def test_a_pruned_model_is_retrained_by_distillation_from_the_unpruned_one(tiny_run, tmp_path):
    from nlp.recipes import recipe_path
    from nlp.train.finetune import finetune
    from nlp.train.recipe import load_recipe
    from nlp.train.width_pruning import prune_width

    narrow = prune_width(tiny_run, tmp_path / "narrow", heads=0.5, neurons=0.5, examples=16).out
    out = tmp_path / "retrained"
    recipe = load_recipe(recipe_path("sentiment-reviews"), [
        f"model.name={narrow}", f"tokenizer.name={narrow}", f"distill.teacher={tiny_run}", "distill.hidden_weight=1",
        "train.max_steps=6", "train.data.batch_size=8", "train.eval.every_steps=null", "data.max_train_samples=48",
        "data.max_eval_samples=16", "data.max_length=64", f"train.output_dir={out}", "train.log.progress_bar=false",
        "train.log.tensorboard=false", "train.log.plots=false"])
    result = finetune(recipe)
    assert result.status == "finished" and "accuracy" in result.dev
    saved = json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))
    assert (saved["num_attention_heads"], saved["attention_head_size"], saved["intermediate_size"]) == (2, 8, 32)
    before = get_task("text-classification").head.from_pretrained(narrow).state_dict()
    after = get_task("text-classification").head.from_pretrained(out / "model").state_dict()
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
