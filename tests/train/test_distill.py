"""Knowledge distillation (a recipe's distill: section): the student learns the teacher's outputs
for classification, NER with a CRF and QA; the teacher runs once; a resume is exact; errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nlp
from nlp._common import ConfigError
from nlp.recipes import recipe_path
from nlp.tasks import get_task
from nlp.tokenizer import load_tokenizer
from nlp.train import TrainingInterrupted
from nlp.train.finetune import finetune
from nlp.train.recipe import load_recipe

from tasks._task_fixtures import save_as_fine_tuned
from train._recipe_fixtures import cmrc_files
from train._toy import StopAt, losses

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
QUIET = ["train.log.progress_bar=false", "train.log.tensorboard=false", "train.log.plots=false"]


def _teacher(task: str, out: Path, **head) -> Path:
    """A 2-layer, 64-wide 'fine-tuned' model of `task` (random weights, larger head) with
    ernie-tiny-zh's tokenizer."""
    torch.manual_seed(1)
    model = get_task(task).head(nlp.AutoConfig.from_pretrained(ASSET, **TINY, **head))
    return save_as_fine_tuned(model, out, head_std=1.0)


@pytest.fixture(scope="module")
def clf_teacher(tmp_path_factory) -> Path:
    return _teacher("text-classification", tmp_path_factory.mktemp("t") / "clf",
                    id2label={0: "negative", 1: "positive"})


def _overrides(out: Path, teacher: Path, *extra: str, steps: int = 12) -> list[str]:
    return [f"model.name={teacher}", f"tokenizer.name={teacher}", "model.layer_map=[1]",
            f"distill.teacher={teacher}", f"train.max_steps={steps}", "train.data.batch_size=8",
            "train.eval.every_steps=null", "data.max_train_samples=48", "data.max_eval_samples=16",
            "train.log.every_steps=2", "train.checkpoint.every_steps=4", f"train.output_dir={out}", *QUIET, *extra]


def _recipe(name: str, out: Path, teacher: Path, *extra: str, steps: int = 12):
    return load_recipe(recipe_path(name), _overrides(out, teacher, *extra, steps=steps))


def test_the_student_learns_the_teacher_whose_outputs_are_computed_once(clf_teacher, tmp_path, monkeypatch):
    import nlp.train.distill as distill

    calls = []
    load = distill._load_teacher

    def counting(*args, **kwargs):
        teacher = load(*args, **kwargs)
        teacher.register_forward_hook(lambda *a: calls.append(1))
        return teacher

    monkeypatch.setattr(distill, "_load_teacher", counting)
    out = tmp_path / "run"
    # soft targets only, 4 epochs of 6 batches: the loss is the KL to the teacher, and it falls
    result = finetune(_recipe("sentiment-reviews", out, clf_teacher, "distill.hard_weight=0",
                              "distill.teacher_batch_size=16", "train.optim.lr=1e-3", "train.mixed_precision=no",
                              steps=24))
    assert result.status == "finished" and "accuracy" in result.dev
    assert len(calls) == 3  # one pass over the 48 training examples (16 a batch), not one per epoch
    curve = losses(out)
    assert curve[24] < 0.5 * curve[2], curve
    saved = json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))
    assert saved["num_hidden_layers"] == 1 and saved["id2label"] == {"0": "negative", "1": "positive"}
    # the exported student is a plain model (no projection, no teacher) that transformers-style loaders read
    student = get_task("text-classification").head.from_pretrained(out / "model")
    assert not any("projection" in k or "student." in k for k in student.state_dict())


def test_cached_outputs_are_each_examples_own_whatever_the_batch_order(tmp_path):
    """The teacher pass batches longest first; each example gets its own outputs back, cut to
    its length (NER: per token), equal to a forward of that example alone."""
    from nlp.train.distill import teacher_outputs

    tags = ["O", "B-PER", "I-PER"]
    d = _teacher("token-classification", tmp_path / "ner", id2label=dict(enumerate(tags)))
    spec, tok = get_task("ner"), load_tokenizer(d)
    model = spec.head.from_pretrained(d).eval()
    texts = ["张三", "李四在北京大学工作了很多年", "好", "王五去了广州和上海"]
    feats = [{"input_ids": tok(t)["input_ids"], "attention_mask": [1] * len(tok(t)["input_ids"]),
              "labels": [0] * len(tok(t)["input_ids"])} for t in texts]
    cached = teacher_outputs(model, feats, spec.collator(tok), ["logits"], batch_size=3, per_token=["logits"],
                             label_keys=spec.label_keys)
    for f, c in zip(feats, cached):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([f["input_ids"]])).logits[0].numpy()
        assert c["logits"].shape == alone.shape
        np.testing.assert_allclose(c["logits"], alone, atol=1e-5)


def test_hidden_states_through_a_projection_and_an_exact_resume(clf_teacher, tmp_path):
    """A narrower student (32 wide, from a preset) matches the 64-wide teacher's last hidden
    states through a learned projection; stopped at step 4 and resumed, the loss curve is the
    unbroken run's (the projection and the cached targets come back)."""
    extra = ["model.name=null", "model.layer_map=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
             "model.config.num_hidden_layers=1", "model.config.hidden_size=32", "model.config.num_attention_heads=2",
             "model.config.intermediate_size=64", "model.config.vocab_size=7000", "distill.hidden_weight=1.0",
             "train.mixed_precision=no"]
    from safetensors import safe_open

    with safe_open(str(_resumed_like_unbroken(clf_teacher, tmp_path, extra)), "pt") as f:
        assert f.get_tensor("projections.0.weight").shape == (64, 32)  # student width -> teacher width


def _resumed_like_unbroken(teacher: Path, tmp_path: Path, extra: list[str]) -> Path:
    """Run the recipe 8 steps unbroken, and again stopped at step 4 and resumed: the loss curves
    must agree. Returns the resumed run's last checkpoint weights."""
    full = finetune(_recipe("sentiment-reviews", tmp_path / "full", teacher, *extra, steps=8))
    assert full.status == "finished"
    with pytest.raises(TrainingInterrupted):
        finetune(_recipe("sentiment-reviews", tmp_path / "run", teacher, *extra, steps=8), callbacks=[StopAt(4)])
    finetune(_recipe("sentiment-reviews", tmp_path / "run", teacher, *extra, steps=8))
    a, b = losses(tmp_path / "full"), losses(tmp_path / "run")
    assert sorted(a) == sorted(b) == [2, 4, 6, 8]
    assert b == pytest.approx(a, rel=1e-5)
    return sorted((tmp_path / "run" / "checkpoints").glob("step-*"))[-1] / "model.safetensors"


NARROW = ["model.name=null", "model.layer_map=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
          "model.config.hidden_size=32", "model.config.num_attention_heads=2", "model.config.intermediate_size=64",
          "model.config.vocab_size=7000", "train.mixed_precision=no"]


def test_layer_pairs_relations_and_augmented_copies_resume_exactly(clf_teacher, tmp_path):
    """A 2-layer, 32-wide student learns the 64-wide teacher's outputs, the hidden states of two
    layer pairs (one projection each) and MiniLM's relations of its layer 0 against the teacher's
    layer 1, on the training set and one rewritten copy of each example; stopped at step 4 and
    resumed, the loss curve is the unbroken run's (the projections, copies and cached targets
    come back the same)."""
    extra = [*NARROW, "model.config.num_hidden_layers=2", "distill.hidden_weight=1.0",
             "distill.layer_pairs=[[0, 0], [1, 1]]", "distill.relation_weight=1.0", "distill.relation_layers=[0, 1]",
             "distill.augment.copies=1", "distill.augment.p=0.5"]
    from safetensors import safe_open

    with safe_open(str(_resumed_like_unbroken(clf_teacher, tmp_path, extra)), "pt") as f:
        assert [f.get_tensor(f"projections.{i}.weight").shape for i in (0, 1)] == [(64, 32)] * 2
    # without the relation loss the curve differs (a little: the random models' relations are near
    # uniform, so their KL is small; two runs of one recipe agree to the last digit)
    other = finetune(_recipe("sentiment-reviews", tmp_path / "other", clf_teacher,
                             *[e for e in extra if not e.startswith("distill.relation")], steps=8))
    assert other.status == "finished"
    assert losses(tmp_path / "other")[2] != pytest.approx(losses(tmp_path / "full")[2], rel=1e-6)


def test_relations_and_masked_lm_augmentation_through_nlp_finetune(clf_teacher, tmp_path, caplog):
    from nlp.cli import main

    out = tmp_path / "run"
    with caplog.at_level("INFO", logger="nlp.train.distill"):
        code = main(["finetune", "recipes/sentiment-reviews.yaml",
                     *_overrides(out, clf_teacher, "distill.relation_weight=1", "distill.relation_heads=4",
                                 "distill.augment.copies=2", f"distill.augment.mlm={ASSET}", steps=6)])
    assert code == 0
    assert "96 augmented copies" in caplog.text and "caching the teacher's logits on 144 training examples" in caplog.text
    assert all(v == v for v in losses(out).values())
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "finished" and "accuracy" in results["test"]
    student = get_task("text-classification").head.from_pretrained(out / "model")
    assert student.config.num_hidden_layers == 1
    assert not any("projection" in k or "student." in k for k in student.state_dict())


def test_ner_with_a_crf_distils_the_emissions(tmp_path):
    tags = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]  # the data's order
    teacher = _teacher("token-classification", tmp_path / "ner", id2label=dict(enumerate(tags)), use_crf=True)
    out = tmp_path / "run"
    result = finetune(_recipe("ner-peoples-daily", out, teacher, "distill.hard_weight=0.5", "task.use_crf=true",
                              steps=6))
    assert result.status == "finished" and "f1" in result.dev
    assert all(loss == loss for loss in losses(out).values())  # finite: padded tag positions are left out
    assert json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))["use_crf"] is True


def test_qa_distils_start_and_end_over_the_positions(tmp_path):
    teacher = _teacher("question-answering", tmp_path / "qa", num_labels=2)
    files = cmrc_files(tmp_path)
    result = finetune(_recipe("qa-cmrc2018", tmp_path / "run", teacher, *[f"data.files.{k}={v}" for k, v in files.items()],
                              "data.max_length=128", "task.doc_stride=32", steps=4))
    assert result.status == "finished" and all(v == v for v in losses(tmp_path / "run").values())


def test_distillation_problems_are_refused_before_training(clf_teacher, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        _recipe("sentiment-reviews", out, clf_teacher, "distill.teacher=/nonexistent", "distill.soft_weight=0",
                "distill.hard_weight=0", "distill.temperature=0", "train.data.batching=packed")
    text = str(err.value)
    for part in ("distill.teacher '/nonexistent' is not a directory",
                 "distill.soft_weight, hard_weight, hidden_weight, relation_weight and ranking_weight are all 0",
                 "distill.temperature must be > 0", "batching=packed"):
        assert part in text, text
    with pytest.raises(ConfigError, match="layer_map .* names layers \\[5\\], but the model has 2"):
        finetune(_recipe("sentiment-reviews", out, clf_teacher, "model.layer_map=[0,5]"))
    with pytest.raises(ConfigError, match="layer_map or model.config.num_hidden_layers, not both"):
        _recipe("sentiment-reviews", out, clf_teacher, "model.config.num_hidden_layers=1")
    ner = _teacher("token-classification", tmp_path / "ner", id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    with pytest.raises(ConfigError, match="holds a token-classification model; this recipe fine-tunes text-classification"):
        finetune(_recipe("sentiment-reviews", out, clf_teacher, f"distill.teacher={ner}"))
    other = _teacher("text-classification", tmp_path / "other", id2label={0: "bad", 1: "good"})
    with pytest.raises(ConfigError, match="was trained with labels \\['bad', 'good'\\]"):
        finetune(_recipe("sentiment-reviews", out, clf_teacher, f"distill.teacher={other}"))
    assert not (out / "checkpoints").exists()


def test_embeddings_distil_by_mse_at_the_teacher_width_and_refuse_another(tmp_path):
    teacher = _teacher("embedding", tmp_path / "emb")
    common = ["data.max_train_samples=32", "data.max_length=32"]
    result = finetune(_recipe("embedding-idioms", tmp_path / "run", teacher, *common, "train.eval.metric=loss", steps=3))
    assert result.status == "finished" and all(v == v for v in losses(tmp_path / "run").values())
    narrow = ["model.name=null", "model.layer_map=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
              "model.config.num_hidden_layers=1", "model.config.hidden_size=32", "model.config.num_attention_heads=2",
              "model.config.intermediate_size=64", "model.config.vocab_size=7000"]
    with pytest.raises(ConfigError, match="student's sentence_embedding has shape \\(.*32\\) per example"):
        finetune(_recipe("embedding-idioms", tmp_path / "narrow", teacher, *common, *narrow, steps=3))
    # what the error suggests: the narrower student learns the teacher's hidden states instead
    hidden = finetune(_recipe("embedding-idioms", tmp_path / "hidden", teacher, *common, *narrow, "distill.soft_weight=0",
                              "distill.hidden_weight=1", "train.eval.metric=loss", steps=3))
    assert hidden.status == "finished"


def test_an_embedding_teacher_is_cached_on_its_prompted_texts_by_role(tmp_path, monkeypatch):
    """A teacher that declares prompts gets them in the caching pass as the pipelines give them
    (query: the "query" prompt, the other texts of a record: "passage"; a scored pair and a plain
    text: the default one), so a cached vector is the pipeline's vector of that text in that
    role; the student's own features keep no prompt; `distill.teacher_prompts=false` caches the
    plain texts."""
    import nlp.train.distill as distill
    from nlp.tasks.embedding.prompts import prompt_ids

    prompts = {"query": "查询：", "passage": "段落："}
    teacher = _teacher("embedding", tmp_path / "emb", prompts=prompts, default_prompt_name="query")
    spec, tok = get_task("embedding"), load_tokenizer(teacher)
    texts = ("北京的天气", "今天北京下雨", "上海很大")
    record = {"input_ids": [tok(t)["input_ids"] for t in texts]}
    pair = {"input_ids": [tok(t)["input_ids"] for t in ("北京", "首都")], "labels": 0.8}
    seen = spec.teacher_features([record, pair], nlp.AutoConfig.from_pretrained(teacher), tok)
    assert seen[0]["input_ids"] == [tok("查询：北京的天气")["input_ids"], tok("段落：今天北京下雨")["input_ids"],
                                    tok("段落：上海很大")["input_ids"]]
    assert seen[1]["input_ids"] == [tok("查询：北京")["input_ids"], tok("查询：首都")["input_ids"]]
    assert seen[1]["labels"] == 0.8 and record["input_ids"][0] == tok("北京的天气")["input_ids"]  # not changed
    assert spec.teacher_features([record], nlp.AutoConfig.from_pretrained(ASSET), tok)[0] is record  # no prompts
    plain_texts = [{"input_ids": [tok("天气")["input_ids"]]}, {"input_ids": tok("天气")["input_ids"]}]
    assert [f["input_ids"] for f in spec.teacher_features(plain_texts, nlp.AutoConfig.from_pretrained(teacher), tok)] \
        == [[tok("查询：天气")["input_ids"]], tok("查询：天气")["input_ids"]]  # a plain text: the default prompt

    model = spec.head.from_pretrained(teacher).eval()
    cached = distill.teacher_outputs(model, seen[:1], spec.collator(tok), ["sentence_embedding"], batch_size=4)
    emb = nlp.pipeline("feature-extraction", model=teacher)
    want = [emb.encode([t], prompt_name=role, normalize=False)[0][0]
            for t, role in zip(texts, ("query", "passage", "passage"))]
    np.testing.assert_allclose(cached[0]["sentence_embedding"], np.stack(want), atol=1e-5)

    caught = []
    cache = distill.teacher_outputs
    monkeypatch.setattr(distill, "teacher_outputs", lambda m, features, *a, **k: caught.append(features) or
                        cache(m, features, *a, **k))
    common = ["data.max_train_samples=8", "data.max_length=32", "train.eval.metric=loss"]
    for flag in ("true", "false"):
        result = finetune(_recipe("embedding-idioms", tmp_path / flag, teacher, *common,
                                  f"distill.teacher_prompts={flag}", steps=1))
        assert result.status == "finished"
    prompted, plain = caught
    query, passage = prompt_ids(tok, "查询："), prompt_ids(tok, "段落：")
    assert len(prompted) == len(plain) == 8
    for with_prompts, without in zip(prompted, plain):
        q, *passages = without["input_ids"]
        assert with_prompts["input_ids"] == [q[:1] + query + q[1:], *(p[:1] + passage + p[1:] for p in passages)]


def test_the_ranking_loss_is_the_kl_of_each_querys_distribution_over_the_batch():
    from nlp.train.distill_losses import in_batch_ranking_kl

    torch.manual_seed(0)
    teacher = torch.randn(4, 3, 8)  # 4 records: a query, its positive, a negative
    assert in_batch_ranking_kl(teacher.clone(), teacher, 0.05, 0.05) == pytest.approx(0.0, abs=1e-6)
    student = torch.randn(4, 3, 8, requires_grad=True)
    got = in_batch_ranking_kl(student, teacher, 0.05, 0.02)
    unit = [torch.nn.functional.normalize(v, dim=-1) for v in (student, teacher)]
    s, t = (u[:, 0] @ u[:, 1:].reshape(8, 8).T / tau for u, tau in zip(unit, (0.05, 0.02)))  # 4 queries x 8 candidates
    want = torch.nn.functional.kl_div(s.log_softmax(-1), t.log_softmax(-1), log_target=True, reduction="batchmean")
    assert got.item() == pytest.approx(want.item(), rel=1e-5) and got.item() > 0
    got.backward()
    assert student.grad.abs().sum() > 0
    assert float(in_batch_ranking_kl(torch.randn(4, 1, 8), torch.randn(4, 1, 8), 0.05, 0.05)) == 0  # one text a record
    narrow = torch.randn(4, 3, 4)  # another width: cosines compare all the same
    assert in_batch_ranking_kl(narrow, teacher, 0.05, 0.05).item() > 0
    with pytest.raises(ValueError, match="same batch and texts"):
        in_batch_ranking_kl(torch.randn(4, 8), torch.randn(4, 8), 0.05, 0.05)


def test_an_embedding_student_learns_its_teachers_ranking(tmp_path, monkeypatch, clf_teacher):
    """distill.ranking_weight alone (soft_weight 0): the teacher's vectors are cached all the same
    and the loss is the task's plus the ranking term, at any student width; a task without a
    ranked output is refused."""
    import nlp.train.distill as distill

    teacher = _teacher("embedding", tmp_path / "emb")
    seen = []
    loss = distill.in_batch_ranking_kl
    monkeypatch.setattr(distill, "in_batch_ranking_kl", lambda *a: seen.append(a[2:]) or loss(*a))
    common = ["data.max_train_samples=16", "data.max_length=32", "train.eval.metric=loss", "distill.soft_weight=0",
              "distill.ranking_weight=2", "distill.ranking_temperature=0.02"]
    result = finetune(_recipe("embedding-idioms", tmp_path / "run", teacher, *common, steps=2))
    assert result.status == "finished" and seen and set(seen) == {(0.05, 0.02)}
    # cosines compare across widths: a narrower student learns the ranking (its vectors could not be regressed)
    narrow = ["model.name=null", "model.layer_map=null", "model.preset=ernie-3.0-tiny-pico-v2-zh", "model.init=random",
              "model.config.num_hidden_layers=1", "model.config.hidden_size=32", "model.config.num_attention_heads=2",
              "model.config.intermediate_size=64", "model.config.vocab_size=7000"]
    assert finetune(_recipe("embedding-idioms", tmp_path / "narrow", teacher, *common, *narrow, steps=1)).status \
        == "finished"
    with pytest.raises(ConfigError, match="text-classification task has no output whose ranking is learned"):
        finetune(_recipe("sentiment-reviews", tmp_path / "clf", clf_teacher, "distill.ranking_weight=1", steps=1))
    with pytest.raises(ConfigError, match="ranking_temperature must be > 0"):
        _recipe("embedding-idioms", tmp_path / "bad", teacher, "distill.ranking_temperature=0")


def test_a_shipped_model_teaches_by_its_hub_name_through_nlp_finetune(tmp_path, capsys):
    """`distill.teacher` takes a registered name where the CLI loads the recipe, as model.name does;
    a misspelt one gets the hub's did-you-mean before any work, and the library's local loaders,
    which resolve no names, say that a hub name needs the CLI."""
    from nlp.cli import main

    name = "ernie-tiny-zh-sentiment-small"  # shipped: 2 layers, negative/positive as reviews-zh
    out = tmp_path / "run"
    overrides = [f"model.name={name}", "tokenizer.name=null", "model.layer_map=[1]", f"train.output_dir={out}",
                 "train.max_steps=2", "train.data.batch_size=8", "train.eval.every_steps=null",
                 "data.max_train_samples=16", "data.max_eval_samples=8", *QUIET]
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *overrides, f"distill.teacher={name}"]) == 0
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["status"] == "finished"
    capsys.readouterr()
    assert main(["finetune", "recipes/sentiment-reviews.yaml", *overrides, f"distill.teacher={name[:-1]}"]) == 2
    assert f"distill.teacher: Unknown model {name[:-1]!r}. Did you mean {name!r}?" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="is not a directory.*a hub name needs the nlp CLI"):
        load_recipe(recipe_path("sentiment-reviews"), [*overrides, f"distill.teacher={name}"])
