"""The O(T*K) constrained Viterbi (nlp/tasks/ner/constrained.py) gives the general decoder's paths
exactly: BIO, BIOES with O and the lexical B/I/E/S x POS tags, on random emissions of every scale,
on emissions full of ties, on masked rows; where its check fails (a range of ~1e4) `decode_tags`
falls back to the general decoder, and rules of another shape are not taken."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nlp.tasks.lexical.tags import lexical_labels
from nlp.tasks.ner.constrained import SparseRules, structured_viterbi
from nlp.tasks.ner.crf import viterbi
from nlp.tasks.ner.heads import _transition_rules, decode_constrained_rows, decode_tags
from nlp.tasks.ner.tags import label_list

LABEL_SETS = {
    "lexical": lexical_labels(),  # 168 tags, no O
    "bioes": label_list(["PER", "LOC", "ORG"], "BIOES"),
    "bio": label_list(["PER", "LOC", "ORG"], "BIO"),
    "bioes-shuffled": [label_list(["PER", "LOC"], "BIOES")[i] for i in (4, 0, 7, 2, 8, 1, 3, 6, 5)],
}


def general(logits: torch.Tensor, mask: torch.Tensor, labels: list[str]) -> list[list[int]]:
    """The O(T*K^2) decoder decode_tags ran before the fast path."""
    rules = _transition_rules(dict(enumerate(labels)), len(labels), logits.device)
    return viterbi(F.log_softmax(logits.float(), dim=-1), mask, *rules)


def emissions(kind: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    if kind == "tiny":
        return x * 0.01
    if kind == "wide":
        return x * 30
    if kind == "rounded":  # many exact ties between tags and between paths
        return x.round()
    if kind == "binary":
        return (x > 0).float()
    if kind == "bf16":  # logits of a bf16 model: 8 bits of mantissa, ties likely
        return (x * 4).bfloat16().float()
    return x * 3


@pytest.mark.parametrize("name", list(LABEL_SETS))
@pytest.mark.parametrize("kind", ["tiny", "normal", "wide", "rounded", "binary", "bf16"])
def test_equals_the_general_decoder_on_random_masked_batches(name, kind):
    labels = LABEL_SETS[name]
    id2label = dict(enumerate(labels))
    for seed in range(6):
        T = [1, 2, 7, 33, 60, 0][seed]
        x = emissions(kind, (9, T, len(labels)), seed)
        mask = torch.rand(9, T, generator=torch.Generator().manual_seed(seed)) > 0.3
        if T:
            mask[0] = False  # a row with nothing to decode
            mask[1] = True
        assert decode_tags(x, mask, id2label) == general(x, mask, labels), (name, kind, seed)


@pytest.mark.parametrize("name", ["lexical", "bio"])
def test_ragged_rows_equal_the_padded_decoding(name):
    labels = LABEL_SETS[name]
    rng = np.random.default_rng(3)
    rows = [rng.normal(0, 3, (n, len(labels))).astype(np.float32) for n in (5, 0, 1, 40, 17, 17, 2, 90)]
    T = max(map(len, rows))
    padded = torch.zeros(len(rows), T, len(labels))
    mask = torch.zeros(len(rows), T, dtype=torch.bool)
    for j, r in enumerate(rows):
        padded[j, :len(r)], mask[j, :len(r)] = torch.from_numpy(r), True
    assert decode_constrained_rows(rows, dict(enumerate(labels))) == general(padded, mask, labels)


def test_rows_decoded_in_several_groups_equal_one_group(monkeypatch):
    from nlp.tasks.ner import heads

    labels = LABEL_SETS["lexical"]
    rng = np.random.default_rng(4)
    rows = [rng.normal(0, 3, (int(n), len(labels))).astype(np.float32) for n in rng.integers(1, 30, 50)]
    whole = decode_constrained_rows(rows, dict(enumerate(labels)))
    monkeypatch.setattr(heads, "_DECODE_POSITIONS", 40)  # many groups, a row longer than a group alone
    assert decode_constrained_rows(rows, dict(enumerate(labels))) == whole


def test_a_failed_check_returns_none_and_decode_tags_falls_back():
    """Emissions whose log-probabilities span more than the 1e4 penalty: the general decoder then
    takes a forbidden transition; the fast path must notice and leave the row to it."""
    labels = LABEL_SETS["bio"]  # O B-LOC I-LOC B-ORG I-ORG B-PER I-PER
    logits = torch.full((1, 2, len(labels)), -30000.0)
    logits[0, 0, 0] = 0.0  # O first
    logits[0, 1, 2] = 0.0  # then I-LOC, forbidden after O, but 3e4 more probable than anything else
    mask = torch.ones(1, 2, dtype=torch.bool)
    rules = SparseRules.from_scores(*(t.numpy() for t in _transition_rules(dict(enumerate(labels)), len(labels), "cpu")))
    logp = F.log_softmax(logits, -1)[0].numpy()
    assert structured_viterbi(logp, [2], rules) is None
    assert decode_tags(logits, mask, dict(enumerate(labels))) == general(logits, mask, labels) == [[0, 2]]


def test_rules_of_another_shape_are_not_taken():
    forbid = np.float32(-1e4)
    transitions = np.zeros((5, 5), np.float32)
    transitions[0, 1] = transitions[2, 1] = transitions[3, 1] = forbid  # tag 1: 2 predecessors (fine)
    transitions[4, 2] = forbid  # tag 2: 4 predecessors, tag 0: 5, two different shared sets
    zeros = np.zeros(5, np.float32)
    assert SparseRules.from_scores(transitions, zeros, zeros) is None
    assert SparseRules.from_scores(np.full((3, 3), 0.5, np.float32), zeros[:3], zeros[:3]) is None  # a CRF's scores
    lexical = SparseRules.from_scores(*(t.numpy() for t in _transition_rules(
        dict(enumerate(LABEL_SETS["lexical"])), 168, "cpu")))
    assert (lexical.n_open, lexical.c1 - lexical.c0) == (84, 84)  # B, S open; E, S close
