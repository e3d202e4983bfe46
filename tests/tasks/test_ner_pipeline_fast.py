"""The NER pipeline's vectorised decoding gives what the per-token reference gave, exactly.

The reference here is the pipeline's decoding before it was vectorised (each row's logits laid
out by token, a per-token mask, Viterbi with a per-token backtrace, a dict of the best window per
word), run on the same forward outputs; the shipped NER model on real People's Daily sentences,
long documents cut into overlapping windows, spaces and zero-width characters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlp.tasks.ner.crf import CRF_KEYS
from nlp.tasks.base_pipeline import MODEL_INPUTS
from nlp.tasks.ner.crf import compact, viterbi
from nlp.tasks.ner.heads import _transition_rules
from nlp.tasks.ner.postprocess import tags_to_entities


def reference_viterbi(emissions, mask, transitions, start, end):
    """Viterbi with the backtrace one token at a time (the code before the batched backtrace)."""
    em, _, m = compact(emissions.float(), mask.bool())
    B, T, _ = em.shape
    lengths = m.sum(1).tolist()
    if T == 0:
        return [[] for _ in range(B)]
    score = start + em[:, 0]
    history = []
    for t in range(1, T):
        best, idx = (score[:, :, None] + transitions[None]).max(dim=1)
        history.append(idx)
        score = torch.where(m[:, t, None], best + em[:, t], score)
    score = score + end
    out = []
    for b in range(B):
        if lengths[b] == 0:
            out.append([])
            continue
        tag = int(score[b].argmax())
        path = [tag]
        for t in range(lengths[b] - 1, 0, -1):
            tag = int(history[t - 1][b, tag])
            path.append(tag)
        out.append(path[::-1])
    return out


def reference_entities(pipe, texts, stride=None):
    """The pipeline's answer computed the pre-vectorisation way."""
    room = pipe.max_length - 2
    stride = max(1, room // 4) if stride is None else stride
    words = [[(i, c) for i, c in enumerate(t) if not c.isspace()] for t in texts]
    best = [{} for _ in texts]
    todo = [i for i, ws in enumerate(words) if ws]
    if todo:
        enc = pipe.tokenizer([[c for _, c in words[i]] for i in todo], is_split_into_words=True, truncation=True,
                             max_length=pipe.max_length, stride=stride, return_overflowing_tokens=True)
        word_ids = [enc.word_ids(r) for r in range(len(enc["input_ids"]))]
        rows = [r for r in range(len(word_ids)) if any(w is not None for w in word_ids[r])]
        logits_rows = pipe._forward([{k: enc[k][r] for k in MODEL_INPUTS if k in enc} for r in rows]) if rows else []
        if rows:
            T = max(len(lg) for lg in logits_rows)
            padded = torch.zeros((len(rows), T, logits_rows[0].shape[-1]))
            mask = torch.zeros(len(rows), T, dtype=torch.bool)
            for j, (r, lg) in enumerate(zip(rows, logits_rows)):
                padded[j, : len(lg)] = torch.from_numpy(np.ascontiguousarray(lg, dtype=np.float32))
                prev = None
                for t, w in enumerate(word_ids[r]):
                    mask[j, t] = w is not None and w != prev
                    prev = w
            crf = pipe.backend.decoding or None
            if crf is not None:
                decoded = reference_viterbi(padded, mask, *(torch.from_numpy(np.asarray(crf[k])) for k in CRF_KEYS))
            else:
                rules = _transition_rules(pipe.config.id2label, padded.shape[-1], padded.device)
                decoded = reference_viterbi(torch.log_softmax(padded, -1), mask, *rules)
            probs = torch.softmax(padded, -1)
            for j, r in enumerate(rows):
                positions = mask[j].nonzero().flatten().tolist()
                content = [t for t, w in enumerate(word_ids[r]) if w is not None]
                lo, hi = content[0], content[-1]
                seen = best[todo[enc["overflow_to_sample_mapping"][r]]]
                for t, tag in zip(positions, decoded[j]):
                    w = word_ids[r][t]
                    centrality = min(t - lo, hi - t)
                    if w not in seen or centrality > seen[w][0]:
                        seen[w] = (centrality, int(tag), float(probs[j, t, tag]))
    out = []
    for text, ws, seen in zip(texts, words, best):
        tags = [pipe.config.id2label[seen[w][1]] if w in seen else "O" for w in range(len(ws))]
        scores = [seen[w][2] if w in seen else 1.0 for w in range(len(ws))]
        out.append(tags_to_entities(text, tags, [(i, i + 1) for i, _ in ws], scores))
    return out


@pytest.mark.parametrize("shape", [(1, 1, 3), (5, 9, 7), (64, 50, 7), (3, 0, 4), (7, 12, 5)])
def test_batched_backtrace_equals_the_per_token_one(shape):
    torch.manual_seed(sum(shape))
    B, T, L = shape
    em = torch.randn(B, T, L)
    mask = torch.rand(B, T) > 0.3
    if B > 1 and T > 0:
        mask[0] = False  # a row with nothing selected
    transitions = torch.randn(L, L)
    transitions[0, 1] = -1e4  # a forbidden transition
    start, end = torch.randn(L), torch.randn(L)
    assert viterbi(em, mask, transitions, start, end) == reference_viterbi(em, mask, transitions, start, end)


@pytest.fixture(scope="module")
def ner():
    import nlp

    return nlp.pipeline("ner", batch_size=16)


@pytest.fixture(scope="module")
def sentences():
    from nlp.tasks import load

    test = load("peoples-daily-1998-ner")["test"]
    return ["".join(test[i]["tokens"]) for i in range(0, len(test), 21)]  # ~200 spread over the split


def test_optimised_ner_equals_the_reference_on_real_sentences(ner, sentences):
    long_doc = "".join(sentences[:40])  # ~1,600 characters: many overlapping windows
    odd = ["张三 在\u200b北京\t工作", "", " ", "\u200b\u200b", sentences[3].replace("，", " ， ")]
    texts = sentences + [long_doc] + odd
    with torch.inference_mode():
        got = ner(texts)
        want = reference_entities(ner, texts)
    assert got == want
    assert sum(map(len, got)) > 100  # the sentences do have entities


def test_optimised_ner_equals_the_reference_with_a_small_window(ner, sentences):
    ner_small = type(ner)(ner.backend, ner.tokenizer, batch_size=8, max_length=24)
    texts = sentences[:30]
    with torch.inference_mode():
        assert ner_small(texts, stride=5) == reference_entities(ner_small, texts, stride=5)
