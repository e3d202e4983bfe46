"""Task heads: same numbers as transformers both ways, transformers' loss rules, CRF, packing."""

from __future__ import annotations

import itertools
import json
import logging

import pytest
import torch
import transformers

from nlp._common import DataError
from nlp.models import ErnieConfig
from nlp.tasks.classification.heads import ErnieForSequenceClassification
from nlp.tasks.ner.crf import LinearChainCRF
from nlp.tasks.ner.heads import ErnieForTokenClassification
from nlp.tasks.qa.heads import ErnieForQuestionAnswering

ATOL = 1e-5
TINY = {
    "ernie": dict(model_type="ernie", vocab_size=97, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=48, max_position_embeddings=40,
                  type_vocab_size=4, use_task_id=True, task_type_vocab_size=16),
    "bert": dict(model_type="bert", vocab_size=83, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=40),
    "xlm-roberta": dict(model_type="xlm-roberta", vocab_size=71, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=42,
                        type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5),
}
_PREFIX = {"ernie": "Ernie", "bert": "Bert", "xlm-roberta": "XLMRoberta"}
HEADS = {
    "SequenceClassification": ErnieForSequenceClassification,
    "TokenClassification": ErnieForTokenClassification,
    "QuestionAnswering": ErnieForQuestionAnswering,
}


def _hf_class(model_type, head):
    return getattr(transformers, _PREFIX[model_type] + "For" + head)


def _hf_config(kw, **extra):
    kw = {**kw, **extra}
    return getattr(transformers, _PREFIX[kw.pop("model_type")] + "Config")(**kw)


def _inputs(kw, B=3, T=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    pad = kw.get("pad_token_id", 0)
    ids = torch.randint(pad + 1, kw["vocab_size"], (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0
    ids[mask == 0] = pad
    tt = torch.randint(0, kw.get("type_vocab_size", 2), (B, T), generator=g)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}


def _logits(out):
    if hasattr(out, "start_logits"):
        return torch.stack([out.start_logits, out.end_logits])
    return out.logits


def _close(a, b):
    diff = (a - b).abs().max().item()
    assert diff <= ATOL, f"max abs diff {diff}"


@pytest.mark.parametrize("mt,head", list(itertools.product(TINY, HEADS)))
def test_saved_here_loads_in_transformers(tmp_path, mt, head, caplog):
    torch.manual_seed(0)
    n = 2 if head == "QuestionAnswering" else 5
    ours = HEADS[head](ErnieConfig(**TINY[mt], num_labels=n)).eval()
    ours.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == [_PREFIX[mt] + "For" + head]
    hf, info = _hf_class(mt, head).from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    batch = _inputs(TINY[mt])
    with torch.no_grad():
        _close(_logits(ours(**batch)), _logits(hf.eval()(**batch)))


@pytest.mark.parametrize("mt,head", list(itertools.product(TINY, HEADS)))
def test_saved_by_transformers_loads_here(tmp_path, mt, head, caplog):
    torch.manual_seed(1)
    n = 2 if head == "QuestionAnswering" else 4
    hf = _hf_class(mt, head)(_hf_config(TINY[mt], num_labels=n)).eval()
    hf.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        ours = HEADS[head].from_pretrained(tmp_path)
    assert "newly initialised" not in caplog.text
    batch = _inputs(TINY[mt], seed=3)
    with torch.no_grad():
        _close(_logits(ours(**batch)), _logits(hf(**batch)))




def _to_hf(ours, tmp_path):
    ours.save_pretrained(tmp_path)
    return type_of_hf(ours).from_pretrained(tmp_path).eval()


def type_of_hf(ours):
    head = type(ours).__name__.replace("ErnieFor", "")
    return _hf_class(ours.config.model_type, head)


@pytest.mark.parametrize("num_labels,labels,problem", [
    (3, torch.tensor([0, 2, 1]), "single_label_classification"),
    (1, torch.tensor([0.5, -1.0, 2.0]), "regression"),
    (2, torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]), "multi_label_classification"),
    (3, torch.tensor([[1.0, 0.0, 0.3], [0.0, 1.0, 1.0], [0.0, 0.5, 0.0]]), "regression"),
])
def test_classification_loss_follows_transformers_problem_types(tmp_path, num_labels, labels, problem):
    kw = TINY["ernie"]
    torch.manual_seed(2)
    preset = problem if (problem == "regression" and num_labels > 1) else None
    ours = ErnieForSequenceClassification(ErnieConfig(**kw, num_labels=num_labels, problem_type=preset)).eval()
    hf = _to_hf(ours, tmp_path)
    batch = _inputs(kw)
    a = ours(**batch, labels=labels)
    b = hf(**batch, labels=labels)
    assert hf.config.problem_type == problem  # transformers writes its inference into the config
    # ours decides when the head is built (one label: regression) or from the data (the task
    # spec sets it); a head built without a type infers it per batch and keeps its config as built
    assert ours.config.problem_type == (preset or ("regression" if num_labels == 1 else None))
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)


def test_token_and_qa_losses_equal_transformers(tmp_path):
    kw = TINY["bert"]
    batch = _inputs(kw)
    torch.manual_seed(4)
    tok = ErnieForTokenClassification(ErnieConfig(**kw, num_labels=5)).eval()
    labels = torch.randint(0, 5, batch["input_ids"].shape)
    labels[:, 0] = -100
    labels[1, 7:] = -100
    torch.testing.assert_close(tok(**batch, labels=labels).loss,
                               _to_hf(tok, tmp_path / "t")(**batch, labels=labels).loss)
    qa = ErnieForQuestionAnswering(ErnieConfig(**kw)).eval()
    pos = dict(start_positions=torch.tensor([1, 3, 50]), end_positions=torch.tensor([2, 5, 50]))
    torch.testing.assert_close(qa(**batch, **pos).loss, _to_hf(qa, tmp_path / "q")(**batch, **pos).loss)


def test_bad_labels_are_clear_errors():
    kw = TINY["ernie"]
    clf = ErnieForSequenceClassification(ErnieConfig(**kw, num_labels=3)).eval()
    batch = _inputs(kw)
    with pytest.raises(DataError, match="outside the 3 classes"):
        clf(**batch, labels=torch.tensor([0, 1, 7]))
    tok = ErnieForTokenClassification(ErnieConfig(**kw, num_labels=3)).eval()
    with pytest.raises(DataError, match="one label per token"):
        tok(**batch, labels=torch.zeros(3, 4, dtype=torch.long))


def test_packed_classification_pools_each_sequence():
    """Two sequences packed in one row give the logits they give alone, labels row-major."""
    kw = TINY["ernie"]
    torch.manual_seed(5)
    model = ErnieForSequenceClassification(ErnieConfig(**kw, num_labels=3)).eval()
    a, b, c = [2, 10, 11, 3], [2, 20, 21, 22, 3], [2, 30, 3]
    alone = [model(input_ids=torch.tensor([s])).logits[0] for s in (a, b, c)]
    ids = torch.tensor([a + b, c + [0] * 6])
    pack = torch.tensor([[1] * 4 + [2] * 5, [1] * 3 + [0] * 6])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=(pack > 0).long(), pack_ids=pack,
                    labels=torch.tensor([0, 1, 2]))
    assert out.logits.shape == (3, 3)
    _close(out.logits, torch.stack(alone))
    assert out.loss is not None


# ------------------------------------------------------------------------------- CRF
def _brute_force(crf, em):
    """log Z and the best path by enumerating every tag sequence."""
    L, T = crf.num_tags, em.shape[0]
    scores = {}
    for path in itertools.product(range(L), repeat=T):
        s = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
        s = s + sum(em[t, path[t]] for t in range(T))
        s = s + sum(crf.transitions[path[t], path[t + 1]] for t in range(T - 1))
        scores[path] = s
    logz = torch.logsumexp(torch.stack(list(scores.values())), 0)
    return logz, scores, max(scores, key=lambda p: scores[p].item())


def test_crf_nll_and_viterbi_equal_brute_force_over_gapped_masks():
    torch.manual_seed(6)
    crf = LinearChainCRF(3)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    em = torch.randn(2, 6, 3)
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 1, 0, 0, 1, 1]], dtype=torch.bool)
    tags = torch.tensor([[0, 2, 1, 0, 0, 0], [0, 1, 0, 0, 2, 2]])
    nll = crf.neg_log_likelihood(em, tags, mask)
    expected, paths = [], []
    for b in range(2):
        sel = em[b][mask[b]]
        logz, scores, best = _brute_force(crf, sel)
        expected.append(logz - scores[tuple(tags[b][mask[b]].tolist())])
        paths.append(list(best))
    torch.testing.assert_close(nll, torch.stack(expected).mean())
    assert crf.viterbi_decode(em, mask) == paths


def test_crf_head_trains_saves_and_loads_in_transformers(tmp_path):
    kw = TINY["bert"]
    torch.manual_seed(7)
    model = ErnieForTokenClassification(ErnieConfig.from_dict(kw, num_labels=3, use_crf=True))
    batch = _inputs(kw)
    labels = batch["input_ids"] % 3
    labels[:, 0] = -100
    labels[1, 7:] = -100
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss = model(**batch, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.5
    assert model.crf.transitions.grad is not None
    model.eval().save_pretrained(tmp_path)
    back = ErnieForTokenClassification.from_pretrained(tmp_path)
    assert back.use_crf
    torch.testing.assert_close(back.crf.transitions, model.crf.transitions)
    mask = labels != -100
    with torch.no_grad():
        logits = model(**batch).logits
    assert back.decode(back(**batch).logits, mask) == model.decode(logits, mask)
    # transformers: same emissions; the three crf.* keys are the documented extras
    hf, info = transformers.BertForTokenClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert sorted(info["unexpected_keys"]) == ["crf.end_transitions", "crf.start_transitions", "crf.transitions"]
    assert not info["missing_keys"]
    _close(logits, hf.eval()(**batch).logits)


def test_packing_collator_batches_give_the_unpacked_losses():
    """Through nlp.tokenizer's PackingCollator: same logits per sequence, same losses."""
    from nlp.tokenizer import DataCollatorWithPadding, PackingCollator

    kw = TINY["ernie"]
    g = torch.Generator().manual_seed(8)
    seqs = [[2, *torch.randint(5, 90, (n,), generator=g).tolist(), 3] for n in (5, 9, 3, 7, 4)]
    torch.manual_seed(9)
    clf = ErnieForSequenceClassification(ErnieConfig(**kw, num_labels=3)).eval()
    feats = [{"input_ids": s, "token_type_ids": [0] * len(s), "attention_mask": [1] * len(s), "labels": i % 3}
             for i, s in enumerate(seqs)]
    packed = PackingCollator(max_length=20)(feats)
    assert packed["input_ids"].shape[0] < len(seqs)
    padded = DataCollatorWithPadding()(feats)
    with torch.no_grad():
        a, b = clf(**packed), clf(**padded)
    _close(a.logits, b.logits)
    torch.testing.assert_close(a.loss, b.loss)

    tok = ErnieForTokenClassification(ErnieConfig(**kw, num_labels=3)).eval()
    tfeats = [{"input_ids": s, "attention_mask": [1] * len(s),
               "labels": [-100] + [j % 3 for j in range(len(s) - 2)] + [-100]} for s in seqs]
    with torch.no_grad():
        la = tok(**PackingCollator(max_length=20)(tfeats)).loss
        lb = tok(**DataCollatorWithPadding()(tfeats)).loss
    torch.testing.assert_close(la, lb)
    crf = ErnieForTokenClassification(ErnieConfig.from_dict(kw, num_labels=3, use_crf=True))
    with pytest.raises(DataError, match="packed rows"):
        crf(**PackingCollator(max_length=20)(tfeats))


def test_backbone_checkpoint_loads_into_heads_with_new_weights_named(tmp_path, caplog):
    from nlp.models import ErnieModel

    ErnieModel(ErnieConfig(**TINY["ernie"])).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        model = ErnieForTokenClassification.from_pretrained(tmp_path, num_labels=4, use_crf=True)
    assert model.use_crf
    for key in ("classifier.weight", "crf.transitions", "crf.start_transitions", "crf.end_transitions"):
        assert key in caplog.text


# ------------------------------------------------------------------------------- constrained decoding
def test_allowed_transitions_of_bio_and_bioes():
    from nlp.tasks.ner.tags import allowed_transitions

    names = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    follows, start, end = allowed_transitions(names)
    ok = {(names[i], names[j]) for i in range(5) for j in range(5) if follows[i][j]}
    assert ("O", "I-LOC") not in ok and ("B-PER", "I-LOC") not in ok and ("I-PER", "I-LOC") not in ok
    assert {("B-LOC", "I-LOC"), ("I-LOC", "I-LOC"), ("O", "B-PER"), ("I-LOC", "O"), ("B-LOC", "B-LOC")} <= ok
    assert start == [True, True, False, True, False] and all(end)

    names = ["O", "B-X", "I-X", "E-X", "S-X"]
    follows, start, end = allowed_transitions(names)
    ok = {(names[i], names[j]) for i in range(5) for j in range(5) if follows[i][j]}
    assert ok == {("O", "O"), ("O", "B-X"), ("O", "S-X"), ("E-X", "O"), ("E-X", "B-X"), ("E-X", "S-X"),
                  ("S-X", "O"), ("S-X", "B-X"), ("S-X", "S-X"), ("B-X", "I-X"), ("B-X", "E-X"),
                  ("I-X", "I-X"), ("I-X", "E-X")}
    assert start == [True, True, False, False, True] and end == [True, False, False, True, True]
    # not a tag scheme: no constraints (plain argmax)
    assert allowed_transitions(["NOUN", "VERB"]) is None and allowed_transitions(["O", "B"]) is None


def _valid_bio(tags):
    return all(not t.startswith("I-") or (p in ("B-" + t[2:], t)) for p, t in zip(["O", *tags], tags))


def test_constrained_decoding_is_the_best_well_formed_path():
    """Without a CRF, decode() gives the most probable BIO-valid path (brute force over all
    paths), which plain argmax is not; constrained=False and non-scheme labels give argmax."""
    names = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    config = ErnieConfig.from_dict(TINY["bert"], num_labels=5, id2label=dict(enumerate(names)))
    model = ErnieForTokenClassification(config).eval()
    torch.manual_seed(8)
    logits = torch.randn(6, 5, 5) * 2
    logits[0, 1] = torch.tensor([0.0, 0, 5, 0, 0])  # argmax: I-LOC right after a gap
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[1, 3:] = False
    mask[2, 0] = False
    logp = torch.log_softmax(logits, -1)
    decoded = model.decode(logits, mask)
    argmax = model.decode(logits, mask, constrained=False)
    assert argmax == [row[m].tolist() for row, m in zip(logits.argmax(-1), mask)]
    assert decoded != argmax
    for b in range(6):
        sel = logp[b][mask[b]]
        valid = [p for p in itertools.product(range(5), repeat=len(sel)) if _valid_bio([names[i] for i in p])]
        best = max(valid, key=lambda p: sum(sel[t, p[t]].item() for t in range(len(p))))
        assert decoded[b] == list(best)
    plain = ErnieForTokenClassification(ErnieConfig.from_dict(TINY["bert"], num_labels=5)).eval()  # LABEL_0..
    assert plain.decode(logits, mask) == argmax
