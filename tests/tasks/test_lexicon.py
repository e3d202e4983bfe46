"""The word lexicon of a lexical model (nlp/tasks/lexical/lexicon.py) and the decoding that uses it
(lexicon_decode.py): wordhood by hand, the file format and its errors, the decoder against a
brute-force search over every segmentation, and the pipelines with and without it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from tasks._task_fixtures import tiny_config, wordpiece_tokenizer

import nlp
from nlp._common import ConfigError, DataError
from nlp.tasks.lexical import ErnieForLexicalAnalysis, LexicalAnalysisPipeline, lexical_labels
from nlp.tasks.lexical.lexicon import LEXICON_FILE, WordLexicon
from nlp.tasks.lexical.lexicon_decode import LexicalTagIndex, decode_with_lexicon
from nlp.tasks.ner.heads import decode_constrained_rows


# ---------------------------------------------------------------------------------------- lexicon


def test_wordhood_is_the_share_of_a_strings_occurrences_that_are_the_word():
    sentences = [["中非", "合作"], ["中", "非洲"], ["中非", "论坛", "中非"], ["长江"]]
    lex = WordLexicon.from_sentences(sentences, weight=2.0)
    # 中非: a word 3 times; as a string 4 times (中非合作, 中非洲, twice in 中非论坛中非)
    assert lex.wordhood == {"中非": 0.75, "合作": 1.0, "非洲": 1.0, "论坛": 1.0, "长江": 1.0}
    assert "中" not in lex and len(lex) == 5  # single characters are not lexicon words
    assert WordLexicon.from_sentences(sentences, weight=1.0, min_count=2).wordhood == {"中非": 0.75}


def test_find_returns_every_word_in_the_text_with_its_bonus():
    lex = WordLexicon({"长江": 1.0, "长江大桥": 0.5, "大桥": 0.25}, weight=4.0)
    starts, ends, bonus = lex.find("在长江大桥上")
    assert list(zip(starts.tolist(), ends.tolist(), bonus.tolist())) == [(1, 3, 4.0), (1, 5, 2.0), (3, 5, 1.0)]
    assert lex.find(list("长江")) [0].tolist() == [0]
    assert len(lex.find("")[0]) == 0 and len(lex.find("长")[0]) == 0


def test_a_lexicon_file_round_trips_and_bad_files_name_their_line(tmp_path):
    lex = WordLexicon({"长江": 1.0, "中非": 0.75}, weight=12)
    path = lex.save(tmp_path)
    assert path == tmp_path / LEXICON_FILE
    assert path.read_text(encoding="utf-8").splitlines()[:3] == ["# nlp word lexicon 1", "# weight\t12", "中非\t0.7500"]
    again = WordLexicon.load(tmp_path)
    assert again.wordhood == lex.wordhood and again.weight == 12.0
    bad = tmp_path / "bad.tsv"
    for text, message in [
        ("# weight\t3\n长江 1.0\n", "bad.tsv:2: expected `word<TAB>wordhood`"),
        ("# weight\t3\n长江\tx\n", "bad.tsv:2: the wordhood 'x' is not a number"),
        ("# weight\t3\n长江\t1.5\n", "bad.tsv:2: the wordhood of '长江' must be in (0, 1]"),
        ("# weight\t3\n长\t1\n", "bad.tsv:2: lexicon words have two or more characters"),
        ("# weight\t3\n长江\t1\n长江\t1\n", "bad.tsv:3: '长江' is listed twice"),
        ("长江\t1\n", "has no `# weight<TAB>NUMBER` line"),
        ("# weight\t-1\n长江\t1\n", "weight must be a finite number >= 0"),
    ]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
            WordLexicon.load(bad)
    bad.write_bytes("# weight\t3\n长江\t1\n".encode("gbk"))
    with pytest.raises(DataError, match="not UTF-8"):
        WordLexicon.load(bad)
    with pytest.raises(ConfigError, match="no lexicon file"):
        WordLexicon.load(tmp_path / "missing.tsv")


# ---------------------------------------------------------------------------------------- decoding

POS = ["n", "v", "w"]
NAMES = [f"{p}-{t}" for t in POS for p in "BIES"]
TAGS = LexicalTagIndex.of(NAMES)


def decode(rows: list[np.ndarray], matches: list[tuple]) -> list[list[int]]:
    flat = np.concatenate(rows) if rows else np.zeros((0, len(NAMES)), dtype=np.float32)
    return decode_with_lexicon(flat, [len(r) for r in rows], matches, TAGS)


def brute_force(logp: np.ndarray, spans: dict[tuple[int, int], float]) -> float:
    """The best score over every segmentation, each word with its best POS, lexicon words with their bonus."""
    n, best = len(logp), -np.inf
    ids = {name: i for i, name in enumerate(NAMES)}
    for cuts in itertools.product((0, 1), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        total = 0.0
        for i, j in zip(bounds, bounds[1:]):
            prefixes = ["S"] if j - i == 1 else ["B"] + ["I"] * (j - i - 2) + ["E"]
            total += max(sum(logp[i + k, ids[f"{pre}-{p}"]] for k, pre in enumerate(prefixes)) for p in POS)
            total += spans.get((i, j), 0.0)
        best = max(best, total)
    return best


def path_score(logp: np.ndarray, path: list[int], spans: dict[tuple[int, int], float]) -> float:
    words, start = [], 0
    for k, tag in enumerate(path):
        if NAMES[tag][0] in "ES":
            words.append((start, k + 1))
            start = k + 1
    return float(sum(logp[k, t] for k, t in enumerate(path)) + sum(spans.get(w, 0.0) for w in words))


def well_formed(path: list[int]) -> bool:
    state = None  # the POS of the open word
    for tag in path:
        pre, pos = NAMES[tag][0], NAMES[tag][2:]
        if pre in "BS" and state is not None or pre in "IE" and state != pos:
            return False
        state = pos if pre in "BI" else None
    return state is None


def test_the_decoder_finds_the_best_segmentation_of_brute_force():
    rng = np.random.default_rng(0)
    rows, matches, all_spans = [], [], []
    for _ in range(60):
        n = int(rng.integers(1, 8))
        logp = torch.log_softmax(torch.from_numpy(rng.normal(size=(n, len(NAMES))).astype(np.float32) * 2), -1).numpy()
        spans = {}
        for _ in range(int(rng.integers(0, 5))):
            i = int(rng.integers(0, n))
            j = int(rng.integers(i + 2, i + 5))
            if j <= n:
                spans[(i, j)] = float(rng.uniform(0, 4))
        rows.append(logp)
        keys = sorted(spans)
        matches.append((np.array([k[0] for k in keys], dtype=np.int64), np.array([k[1] for k in keys], dtype=np.int64),
                        np.array([spans[k] for k in keys], dtype=np.float32)))
        all_spans.append(spans)
    paths = decode(rows, matches)
    for logp, spans, path in zip(rows, all_spans, paths):
        assert len(path) == len(logp) and well_formed(path)
        assert path_score(logp, path, spans) == pytest.approx(brute_force(logp, spans), abs=1e-4)
    assert sum(1 for s in all_spans if s) >= 25
    empty = (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros(0, dtype=np.float32),)
    plain = decode(rows, [empty] * len(rows))
    assert sum(a != b for a, b in zip(paths, plain)) >= 5  # the bonuses changed paths


def test_without_lexicon_words_the_paths_are_the_constrained_decoders():
    rng = np.random.default_rng(1)
    logits = [rng.normal(size=(n, len(NAMES))).astype(np.float32) * 3 for n in (1, 2, 5, 17, 40, 3)]
    empty = (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros(0, dtype=np.float32),)
    logp = [torch.log_softmax(torch.from_numpy(x), -1).numpy() for x in logits]
    assert decode(logp, [empty] * len(logp)) == decode_constrained_rows(logits, dict(enumerate(NAMES)))
    assert decode([], []) == [] and decode([logp[0][:0], logp[1]], [empty] * 2)[0] == []
    with pytest.raises(ValueError, match="one list of matches per row"):
        decode(logp, [empty])


def test_labels_in_another_order_decode_to_the_same_tags():
    """The lexical labels come B, I, E, S per POS (read in place); any other order is gathered first."""
    rng = np.random.default_rng(2)
    rows = [torch.log_softmax(torch.from_numpy(rng.normal(size=(n, len(NAMES))).astype(np.float32)), -1).numpy()
            for n in (6, 3, 9)]
    matches = [(np.array([0, 2]), np.array([3, 5]), np.array([1.0, 2.0], dtype=np.float32)),
               (np.array([1]), np.array([3]), np.array([0.5], dtype=np.float32)),
               (np.array([4]), np.array([8]), np.array([3.0], dtype=np.float32))]
    shuffled = rng.permutation(len(NAMES))  # new id -> old id
    names = [NAMES[i] for i in shuffled]
    flat = np.concatenate(rows)[:, shuffled]
    got = decode_with_lexicon(flat, [len(r) for r in rows], matches, LexicalTagIndex.of(names))
    assert [[int(shuffled[t]) for t in path] for path in got] == decode(rows, matches)


def test_a_lexicon_word_is_kept_whole_when_its_bonus_outweighs_the_cut():
    ids = {name: i for i, name in enumerate(NAMES)}
    logp = np.full((2, len(NAMES)), np.log(0.01), dtype=np.float32)
    logp[0, ids["S-n"]] = logp[1, ids["S-n"]] = np.log(0.6)  # the tagger says two words ...
    logp[0, ids["B-n"]] = logp[1, ids["E-n"]] = np.log(0.3)  # ... and half believes one
    one = (np.array([0]), np.array([2]), np.array([1.0], dtype=np.float32))
    weak = (np.array([0]), np.array([2]), np.array([1.5], dtype=np.float32))
    assert decode([logp], [one]) == [[ids["S-n"], ids["S-n"]]]  # log 0.36 > log 0.09 + 1.0
    assert decode([logp], [weak]) == [[ids["B-n"], ids["E-n"]]]  # log 0.09 + 1.5 > log 0.36


# ---------------------------------------------------------------------------------------- pipelines


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    tok = wordpiece_tokenizer(["长江大桥在武汉长江上中非合作"])
    torch.manual_seed(0)
    model = ErnieForLexicalAnalysis(tiny_config(tok.vocab_size, id2label=dict(enumerate(lexical_labels())))).eval()
    directory = tmp_path_factory.mktemp("lexical")
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def test_a_model_directorys_lexicon_is_used_by_default_and_can_be_turned_off(tiny_model_dir):
    text = "长江大桥在武汉长江上"
    plain = nlp.pipeline("word-segmentation", model=tiny_model_dir)
    assert plain.lexicon is None
    WordLexicon({"长江": 1.0, "大桥": 1.0, "武汉": 1.0}, weight=50).save(tiny_model_dir)
    try:
        seg = nlp.pipeline("word-segmentation", model=tiny_model_dir)
        assert seg.lexicon is not None and len(seg.lexicon) == 3
        words = [w["word"] for w in seg(text)]
        assert words == ["长江", "大桥", "在", "武汉", "长江", "上"]  # an untrained tagger, a heavy lexicon
        assert [w["word"] for w in nlp.pipeline("word-segmentation", model=tiny_model_dir, lexicon=False)(text)] \
            == [w["word"] for w in plain(text)]
        # a word never spans white space, the offsets still index the text as given
        spaced = seg("长 江大桥")
        assert [(w["word"], w["start"]) for w in spaced][:2] == [("长", 0), ("江", 2)]
        assert all("长 江"[0:3] != w["word"] for w in spaced)
        other = WordLexicon({"上中": 1.0}, weight=50)
        assert [w["word"] for w in nlp.pipeline("word-segmentation", model=tiny_model_dir, lexicon=other)("江上中非")][1] == "上中"
    finally:
        (tiny_model_dir / LEXICON_FILE).unlink()


def test_a_lexicon_with_a_crf_model_or_a_wrong_argument_is_refused(tiny_model_dir):
    tok = wordpiece_tokenizer(["长江大桥"])
    config = tiny_config(tok.vocab_size, id2label=dict(enumerate(lexical_labels())))
    config.extra["use_crf"] = True
    lex = WordLexicon({"长江": 1.0}, weight=3)
    with pytest.raises(ConfigError, match="decodes with its CRF"):
        LexicalAnalysisPipeline(ErnieForLexicalAnalysis(config).eval(), tok, lexicon=lex)
    with pytest.raises(ConfigError, match="lexicon must be a path"):
        nlp.pipeline("word-segmentation", model=tiny_model_dir, lexicon=3)
    with pytest.raises(ConfigError, match="no lexicon file"):
        nlp.pipeline("word-segmentation", model=tiny_model_dir, lexicon=tiny_model_dir / "none.tsv")
