"""The lexical pipelines' vectorised path gives what the per-token reference gave, exactly.

The reference is the pipeline before it was vectorised (each window's logits laid out token by
token, a dict of the best window per character, texts padded into groups and decoded by the
general O(T*K^2) Viterbi, tag strings per character, the user dictionary applied per word), run
on the same forward outputs: the shipped model on real People's Daily sentences, long documents
in overlapping windows, small windows, spaces and zero-width characters, user dictionaries; and a
tiny random model with a CRF (the general decoder's path)."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import torch
from tasks._task_fixtures import tiny_config, wordpiece_tokenizer

import nlp
from nlp.tasks.ner.crf import CRF_KEYS
from nlp.tasks.base_pipeline import MODEL_INPUTS
from nlp.tasks.lexical import (
    ErnieForLexicalAnalysis,
    LexicalAnalysisPipeline,
    lexical_labels,
    words_from_tags,
)
from nlp.tasks.lexical.tags import SYMBOL_POS
from nlp.tasks.ner.crf import viterbi
from nlp.tasks.ner.heads import _transition_rules


def reference_emissions(pipe, texts, stride):
    """Per text (scores (n_chars, L), tagged): the per-token loop of the pipeline before."""
    L = pipe.config.num_labels
    out = [(np.zeros((len(t), L), np.float32), np.zeros(len(t), bool)) for t in texts]
    todo = [k for k, t in enumerate(texts) if t]
    if not todo:
        return out
    enc = pipe.tokenizer([texts[k] for k in todo], is_split_into_words=True, truncation=True,
                         max_length=pipe.max_length, stride=stride, return_overflowing_tokens=True)
    word_ids = [enc.word_ids(r) for r in range(len(enc["input_ids"]))]
    rows = [r for r in range(len(word_ids)) if any(w is not None for w in word_ids[r])]
    if not rows:
        return out
    logits = pipe._forward([{k: enc[k][r] for k in MODEL_INPUTS if k in enc} for r in rows])
    best = [{} for _ in todo]
    for lg, r in zip(logits, rows):
        wids = word_ids[r]
        content = [t for t, w in enumerate(wids) if w is not None]
        lo, hi = content[0], content[-1]
        k = enc["overflow_to_sample_mapping"][r]
        scores, tagged = out[todo[k]]
        prev = None
        for t, w in enumerate(wids):
            if w is None or w == prev:
                prev = w
                continue
            prev = w
            centrality = min(t - lo, hi - t)
            if w not in best[k] or centrality > best[k][w]:
                best[k][w] = centrality
                scores[w] = lg[t]
                tagged[w] = True
    return out


def reference_decode(pipe, emissions):
    """Texts padded into groups of 64 and decoded by the general Viterbi (or the CRF's)."""
    crf = pipe.backend.decoding or None
    out = [[] for _ in emissions]
    order = sorted((k for k, (_, m) in enumerate(emissions) if m.any()), key=lambda k: len(emissions[k][0]))
    for i in range(0, len(order), 64):
        group = order[i:i + 64]
        T = max(len(emissions[k][0]) for k in group)
        scores = torch.zeros((len(group), T, pipe.config.num_labels))
        mask = torch.zeros((len(group), T), dtype=torch.bool)
        for j, k in enumerate(group):
            scores[j, :len(emissions[k][0])] = torch.from_numpy(emissions[k][0])
            mask[j, :len(emissions[k][0])] = torch.from_numpy(emissions[k][1])
        if crf is not None:
            paths = viterbi(scores, mask, *(torch.from_numpy(np.asarray(crf[key], np.float32)) for key in CRF_KEYS))
        else:
            rules = _transition_rules(pipe.config.id2label, pipe.config.num_labels, "cpu")
            paths = viterbi(torch.log_softmax(scores, -1), mask, *rules)
        for k, path in zip(group, paths):
            out[k] = path
    return out


def reference_best_pos(pipe, start, end, index, emissions):
    scores, tagged = emissions
    rows = [index[c] for c in range(start, end) if c in index and tagged[index[c]]]
    if not rows:
        return SYMBOL_POS
    logp = torch.log_softmax(torch.from_numpy(scores[rows]), dim=-1).numpy()
    want = ["S"] if len(rows) == 1 else ["B", *["I"] * (len(rows) - 2), "E"]
    best, best_pos = -np.inf, SYMBOL_POS
    for pos in dict.fromkeys(pipe._pos_of):
        total = sum(logp[j, pipe._label_ids[(prefix, pos)]] for j, prefix in enumerate(want))
        if total > best:
            best, best_pos = total, pos
    return best_pos


def reference_outside(words, matches):
    """The model's words cut by the user words, every match tried against every word."""
    out = []
    for s, e, p in words:
        pieces = [(s, e)]
        for ms, me, _ in matches:
            pieces = [q for a, b in pieces for q in ((a, min(b, ms)), (max(a, me), b)) if q[0] < q[1]]
        out += [(a, b, p) for a, b in pieces]
    return out


def reference_user_words(pipe, text, words, positions, emissions):
    matches = pipe.user_dict.find(text)
    if not matches:
        return words
    index = {c: j for j, c in enumerate(positions)}
    out = reference_outside(words, matches)
    for ms, me, pos in matches:
        out.append((ms, me, pos if pos is not None else reference_best_pos(pipe, ms, me, index, emissions)))
    return sorted(out)


def reference_pin_symbols(pipe, texts, emissions):
    """Each character that is one unknown token and no letter, number or mark: S-w, and only S-w."""
    names = [pipe.config.id2label[i] for i in range(pipe.config.num_labels)]
    unk = pipe.tokenizer.unk_token_id
    for characters, (scores, _) in zip(texts, emissions):
        for j, c in enumerate(characters):
            if unicodedata.category(c)[0] in "LNM":
                continue
            ids = pipe.tokenizer([[c]], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
            if ids and set(ids) == {unk}:
                scores[j] = -1e4
                scores[j, names.index("S-" + SYMBOL_POS)] = 0.0


def reference_analyse(pipe, texts, stride=None):
    """The words (start, end, pos) of each text, computed the pre-vectorisation way."""
    room = pipe.max_length - 2
    stride = max(1, room // 4) if stride is None else stride
    chars = [[i for i, c in enumerate(t) if not c.isspace()] for t in texts]
    visible = [[texts[k][i] for i in chars[k]] for k in range(len(texts))]
    emissions = reference_emissions(pipe, visible, stride)
    reference_pin_symbols(pipe, visible, emissions)
    tags = reference_decode(pipe, emissions)
    names = [pipe.config.id2label[i] for i in range(pipe.config.num_labels)]
    out = []
    for text, positions, em, ids in zip(texts, chars, emissions, tags):
        per_char = [None] * len(text)
        for i, tag in zip((positions[j] for j in range(len(positions)) if em[1][j]), ids):
            per_char[i] = names[tag]
        words = words_from_tags(text, per_char)
        if len(pipe.user_dict):
            words = reference_user_words(pipe, text, words, positions, em)
        if not any(em[1]):  # a text with no tokens has no words, as a blank one
            words = []
        out.append(words)
    return out


@pytest.fixture(scope="module")
def lac():
    return nlp.pipeline("lexical-analysis", batch_size=16, lexicon=False)  # the decoder without the word lexicon


@pytest.fixture(scope="module")
def sentences():
    from nlp.tasks import load

    test = load("peoples-daily-1998-lexical")["test"]
    return ["".join(test[i]["words"]) for i in range(0, len(test), 21)]  # ~200 spread over the split


ODD = ["江泽民 在\u200b北京\t发表讲话", "", " ", "\u200b\u200b", "ＡＢＣ１９９８年 abc 2024😀。", "\ufeff今天"]


def test_optimised_lexical_equals_the_reference_on_real_sentences(lac, sentences):
    long_doc = "".join(sentences[:40])  # ~1,800 characters: many overlapping windows
    texts = sentences + [long_doc, sentences[3].replace("，", " ， ")] + ODD
    with torch.inference_mode():
        got = lac.analyse(texts)
        want = reference_analyse(lac, texts)
    assert got == want
    assert sum(map(len, got)) > 5000


def test_optimised_lexical_equals_the_reference_with_small_windows(lac, sentences):
    small = LexicalAnalysisPipeline(lac.backend, lac.tokenizer, batch_size=8, max_length=24)
    texts = sentences[:30] + ["".join(sentences[30:40])]
    with torch.inference_mode():
        for stride in (0, 5, None):
            assert small.analyse(texts, stride=stride) == reference_analyse(small, texts, stride=stride)


def test_optimised_lexical_equals_the_reference_with_a_user_dictionary(lac, sentences):
    user = LexicalAnalysisPipeline(lac.backend, lac.tokenizer, batch_size=16,
                                   user_dict=["人民", ("中国共产党", "nt"), "发展", ("新年讲话", "n"), "经济建设"])
    texts = sentences[:60] + ["".join(sentences[:40])] + ODD
    with torch.inference_mode():
        got = user.analyse(texts)
        want = reference_analyse(user, texts)
    assert got == want
    assert got != lac.analyse(texts)  # the dictionary did change words


def test_a_crf_model_decodes_as_before():
    tok = wordpiece_tokenizer(["我爱北京天安门江泽民在发表讲话，。飞桨百度深度学习平台"])
    torch.manual_seed(0)
    config = tiny_config(tok.vocab_size, id2label=dict(enumerate(lexical_labels())))
    config.extra["use_crf"] = True
    model = ErnieForLexicalAnalysis(config).eval()
    pipe = LexicalAnalysisPipeline(model, tok, max_length=10)
    texts = ["我爱北京天安门", "江泽民在北京发表讲话，飞桨百度深度学习平台", "", "我 爱"]
    with torch.inference_mode():
        assert set(pipe.backend.decoding) == set(CRF_KEYS)
        assert pipe.analyse(texts) == reference_analyse(pipe, texts)


def test_words_cut_by_matches_in_one_pass_equal_every_match_per_word():
    import itertools
    import random

    from nlp.tasks.lexical.pipeline import _outside

    rng = random.Random(0)
    for _ in range(3000):
        n = rng.randint(0, 30)
        bounds = [0, *sorted(rng.sample(range(1, n), rng.randint(0, n - 1))), n] if n > 1 else [0, n]
        words = [(a, b, rng.choice("nv")) for a, b in itertools.pairwise(bounds) if a < b and rng.random() > 0.1]
        matches, i = [], 0
        while i < n:
            if rng.random() < 0.2:
                size = rng.randint(1, 5)
                matches.append((i, min(n, i + size), None))
                i += size + rng.randint(0, 3)
            else:
                i += 1
        assert _outside(words, matches) == reference_outside(words, matches), (words, matches)
