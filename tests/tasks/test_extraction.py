"""Information extraction (UIE): the head's checkpoint format, schema parsing and its bounds,
rows and offsets on hard text (emoji, full-width, long texts cut into windows), UIE's span
decoding, batched == one by one, the readers of annotation exports and their bad records,
features, labels and scoring."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nlp
from nlp._common import ConfigError, DataError
from nlp.tasks import get_task
from nlp.tasks.extraction import ErnieForInformationExtraction, SchemaError, parse_schema
from nlp.tasks.extraction.data import read_extraction, type_of_prompt
from nlp.tasks.extraction.decode import merge_spans, pair_pointers, row_spans
from nlp.tasks.extraction.preprocess import build_rows, encode_prompts, encode_texts, span_labels
from nlp.tasks.extraction.schema import MAX_PROMPT_CHARS, MAX_SCHEMA_PROMPTS, schema_from_text, schema_key
from nlp.tokenizer import load_tokenizer

from tasks._task_fixtures import tiny_config

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
FIXTURES = Path(__file__).parent / "fixtures_extraction"
HARD = "😀张三在ＡＢＣ公司（北京）工作，Ｈｅｌｌｏ　world！👨‍👩‍👧 李四🇨🇳在上海。"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(ASSET)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tok):
    """A tiny random UIE model with ernie-tiny-zh's tokenizer; heads drawn so that about one
    token in ten passes 0.5 (spans to compare, a few relation prompts)."""
    torch.manual_seed(0)
    model = ErnieForInformationExtraction(tiny_config(tok.vocab_size, max_position_embeddings=64))
    for head in (model.linear_start, model.linear_end):
        torch.nn.init.normal_(head.weight, std=0.3)
        torch.nn.init.constant_(head.bias, -2.0)
    out = tmp_path_factory.mktemp("uie") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# ----------------------------------------------------------------------------- the checkpoint format


def test_the_heads_are_paddles_names_at_the_top_of_the_state_dict(model_dir):
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert tuple(f.get_tensor("linear_start.weight").shape) == (1, 32)
    assert {"linear_start.weight", "linear_start.bias", "linear_end.weight", "linear_end.bias"} <= keys
    assert "ernie.embeddings.word_embeddings.weight" in keys and not any(k.startswith("ernie.pooler") for k in keys)
    assert all(k.startswith(("ernie.", "linear_")) for k in keys)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["ErnieForInformationExtraction"] and config["model_type"] == "ernie"
    from nlp.tasks.model_dirs import locate_model

    assert locate_model(model_dir).spec.name == "information-extraction"
    spec = get_task("uie")
    assert spec is get_task("ie") and spec.name == "information-extraction"
    again = ErnieForInformationExtraction.from_pretrained(model_dir)
    batch = {"input_ids": torch.tensor([[2, 10, 11, 3, 40, 41, 3]])}
    with torch.no_grad():
        out = again(**batch)
    assert out.start_prob.shape == (1, 7) and 0 <= float(out.start_prob.min()) and float(out.end_prob.max()) <= 1


def test_the_loss_is_bce_over_real_tokens(tok):
    torch.manual_seed(0)
    model = ErnieForInformationExtraction(tiny_config(tok.vocab_size))
    ids = torch.tensor([[2, 10, 3, 40, 41, 3, 0, 0]])
    mask = (ids != 0).long()
    labels = torch.zeros(1, 8)
    labels[0, 3] = 1
    out = model(ids, mask, start_labels=labels, end_labels=labels)
    real = slice(0, 6)
    want = torch.nn.functional.binary_cross_entropy(out.start_prob[0, real], labels[0, real])
    want = (want + torch.nn.functional.binary_cross_entropy(out.end_prob[0, real], labels[0, real])) / 2
    assert float(out.loss) == pytest.approx(float(want), rel=1e-5)
    heavier = ErnieForInformationExtraction(tiny_config(tok.vocab_size, uie_positive_weight=5.0))
    heavier.load_state_dict(model.state_dict())
    assert float(heavier(ids, mask, start_labels=labels, end_labels=labels).loss) > float(out.loss)
    spec = get_task("ie")
    assert spec.head_config(None, None, spec.settings(positive_weight=5.0)) == {"uie_positive_weight": 5.0}
    assert spec.head_config(None) == {}
    with pytest.raises(DataError, match="labels have shapes"):
        model(ids, mask, start_labels=labels[:, :5], end_labels=labels[:, :5])


def test_the_loss_needs_no_op_that_gpu_autocast_refuses(tok, monkeypatch):
    """CUDA autocast (bf16 / fp16 training on a GPU) raises on F.binary_cross_entropy; the loss
    must not call it. Simulated here: the op raises as it does there, and the loss still runs."""
    def refused(*args, **kwargs):
        raise RuntimeError("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.")

    torch.manual_seed(0)
    model = ErnieForInformationExtraction(tiny_config(tok.vocab_size))
    ids = torch.tensor([[2, 10, 3, 40, 41, 3]])
    labels = torch.zeros(1, 6)
    labels[0, 3] = 1
    want = float(model(ids, start_labels=labels, end_labels=labels).loss)
    monkeypatch.setattr(torch.nn.functional, "binary_cross_entropy", refused)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(ids, start_labels=labels, end_labels=labels).loss
    assert got.dtype == torch.float32 and float(got) == pytest.approx(want, rel=2e-2)
    got.backward()


# ----------------------------------------------------------------------------- schemas


def test_schemas_as_taskflow_takes_them():
    nodes = parse_schema(["时间", "选手", {"竞赛名称": ["主办方", "承办方"]}])
    assert [n.name for n in nodes] == ["时间", "选手", "竞赛名称"]
    assert [c.name for c in nodes[2].children] == ["主办方", "承办方"]
    assert parse_schema("人物")[0].name == "人物"
    assert [c.name for c in parse_schema({"地震触发词": "地震强度"})[0].children] == ["地震强度"]
    deep = parse_schema([{"公司": [{"创始人": ["出生地"]}]}])
    assert deep[0].children[0].children[0].name == "出生地"
    assert schema_key(parse_schema(["a", {"b": ["c"]}])) == '["a",{"b":["c"]}]'
    assert [n.name for n in schema_from_text("时间,选手，地点")] == ["时间", "选手", "地点"]
    assert schema_from_text('["时间", {"竞赛名称": ["主办方"]}]')[1].children[0].name == "主办方"


@pytest.mark.parametrize("schema, match", [
    ([{"a": [{"b": [{"c": ["d"]}]}]}], r"nests 4 levels deep; a schema has at most 3 levels \(MAX_SCHEMA_DEPTH\)"),
    ([f"t{i}" for i in range(MAX_SCHEMA_PROMPTS + 1)], rf"has 65 type names in all; a schema has at most {MAX_SCHEMA_PROMPTS}"),
    (["长" * (MAX_PROMPT_CHARS + 1)], rf"has 33 characters; a type name has at most {MAX_PROMPT_CHARS} \(MAX_PROMPT_CHARS\)"),
    ([], "empty list"), (["时间", " "], r"schema\[1\] is an empty type name"), (["a", "a"], "names 'a' twice"),
    ([3], r"schema\[0\] must be a type name"), ({"评价维度": ["情感倾向[正向，负向]"]}, "classification prompt"),
    (None, "no schema"), ([{}], "empty object"),
])
def test_bad_schemas_are_refused_naming_the_place_and_the_bound(schema, match):
    with pytest.raises(SchemaError, match=match):
        parse_schema(schema)


def test_a_bad_command_line_schema_says_how_to_write_one():
    with pytest.raises(SchemaError, match="not valid JSON"):
        schema_from_text('["时间",')


# ----------------------------------------------------------------------------- rows and offsets


def _gold(text: str, words: list[str]) -> list[tuple[int, int]]:
    return [(text.index(w), text.index(w) + len(w)) for w in words]


def _roundtrip(tok, text: str, spans: list[tuple[int, int]], max_length: int, stride: int):
    """Gold spans -> labels of every window -> decoded as if the model gave the labels."""
    rows = build_rows(tok, encode_prompts(tok, ["人物"], max_length), encode_texts(tok, [text]), [(0, 0)], max_length, stride)
    found = []
    for row in rows:
        start, end, _ = span_labels(row, spans)
        assert len(start) == len(row.input_ids) and row.input_ids[0] == tok.cls_token_id
        assert len(row.input_ids) <= max_length
        found += row_spans(np.array(start, float), np.array(end, float), row.offsets, 0.5)
    return rows, merge_spans(found)


def test_offsets_on_hard_text_are_offsets_into_the_text_given(tok):
    spans = _gold(HARD, ["张三", "ＡＢＣ公司", "北京", "Ｈｅｌｌｏ", "world", "李四", "上海"])
    rows, found = _roundtrip(tok, HARD, spans, 128, 16)
    assert len(rows) == 1
    assert [(s, e) for s, e, _ in found] == sorted(spans)
    assert [HARD[s:e] for s, e, _ in found] == ["张三", "ＡＢＣ公司", "北京", "Ｈｅｌｌｏ", "world", "李四", "上海"]
    # the emoji is one character of the text (and one [UNK] token): every offset counts it once
    assert found[0][0] == 1


def test_long_texts_are_windowed_and_a_span_cut_by_a_window_is_found_whole_in_the_next(tok):
    text = "".join(f"第{i}段：张{i % 10}在城市{i}工作。" for i in range(60))
    words = [f"张{i % 10}在城市{i}" for i in range(0, 60, 3)]
    spans = [(text.index(f"第{i}段：") + len(f"第{i}段："), text.index(f"第{i}段：") + len(f"第{i}段：") + len(w))
             for i, w in zip(range(0, 60, 3), words)]
    rows, found = _roundtrip(tok, text, spans, 48, 16)
    assert len(rows) > 10  # many windows of 48 tokens
    assert [(s, e) for s, e, _ in found] == sorted(spans)
    assert all(text[s:e] == w for (s, e, _), w in zip(found, words))
    # without overlap, spans cut by a boundary are lost: the overlap is what finds them
    _, without = _roundtrip(tok, text, spans, 48, 0)
    assert len(without) < len(spans)


def test_pointers_pair_as_uie_does():
    # each start takes the first end at or after it; of two starts before one end the later wins
    assert pair_pointers([(1, .9), (3, .8)], [(4, .7)]) == [((3, .8), (4, .7))]
    assert pair_pointers([(1, .9), (5, .8)], [(2, .7), (6, .6)]) == [((1, .9), (2, .7)), ((5, .8), (6, .6))]
    assert pair_pointers([(2, .9)], [(2, .8)]) == [((2, .9), (2, .8))]
    assert pair_pointers([(4, .9)], [(2, .8)]) == []
    offsets = [None, None, (0, 1), (1, 2), (2, 3), None]
    start = np.array([.9, .9, .9, .1, .1, .9])  # [CLS] and [SEP] never count
    end = np.array([.9, .1, .1, .1, .8, .9])
    assert row_spans(start, end, offsets, 0.5) == [(0, 3, pytest.approx(.72))]


# ----------------------------------------------------------------------------- the pipeline


SCHEMA = ["时间", "人物", {"组织机构": ["总部", "创始人"]}]
TEXTS = ["2月8日上午北京冬奥会自由式滑雪女子大跳台决赛中中国选手谷爱凌以188.25分获得金牌！", HARD,
         "华为技术有限公司成立于1987年，总部位于广东省深圳市，创始人是任正非。" * 6, "好"]


def _check_spans(result: dict, text: str) -> int:
    n = 0
    for spans in result.values():
        for s in spans:
            assert text[s["start"]:s["end"]] == s["text"] and 0 < s["probability"] <= 1
            n += 1 + sum(_check_spans({k: v}, text) for k, v in s.get("relations", {}).items())
    return n


def test_pipeline_output_is_taskflows_shape_with_offsets_into_the_text(model_dir):
    ie = nlp.pipeline("information-extraction", model=str(model_dir), schema=SCHEMA, max_length=64)
    out = ie(TEXTS)
    assert isinstance(out, list) and len(out) == len(TEXTS)
    assert sum(_check_spans(r, t) for r, t in zip(out, TEXTS)) > 0
    assert any("relations" in s for r in out for s in r.get("组织机构", []))
    for r in out:
        assert list(r) == [k for k in ["时间", "人物", "组织机构"] if k in r]  # schema order, empty types left out
    one = ie(TEXTS[0])
    assert isinstance(one, list) and len(one) == 1
    # a span's start and end each pass position_prob: its probability passes its square
    strict = ie(TEXTS[:2], position_prob=0.9)
    assert all(s["probability"] > 0.81 for r in strict for spans in r.values() for s in spans)
    with pytest.raises(ConfigError, match="position_prob must be a number in"):
        ie(TEXTS, position_prob=1.5)
    with pytest.raises(ConfigError, match="no schema"):
        nlp.pipeline("ie", model=str(model_dir))(TEXTS[0])
    assert ie([]) == []


def test_batched_equals_one_by_one(model_dir):
    pooled = nlp.pipeline("ie", model=str(model_dir), schema=SCHEMA, max_length=64, batch_size=64, position_prob=0.2)
    alone = nlp.pipeline("ie", model=str(model_dir), schema=SCHEMA, max_length=64, batch_size=1,
                         pad_to_multiple_of=None, position_prob=0.2)
    texts = [TEXTS[0], HARD * 3, TEXTS[3]]
    together = pooled(texts)
    assert sum(_check_spans(r, t) for r, t in zip(together, texts)) > 0
    for text, got in zip(texts, together):
        want = alone(text)[0]
        assert json.dumps(_positions(got)) == json.dumps(_positions(want))
        for k in want:
            assert [s["probability"] for s in got[k]] == pytest.approx([s["probability"] for s in want[k]], abs=1e-5)


def _positions(result: dict) -> dict:
    return {k: [(s["start"], s["end"], _positions(s.get("relations", {}))) for s in v] for k, v in result.items()}


# ----------------------------------------------------------------------------- readers


def test_doccano_relation_export_becomes_uie_records():
    ds = read_extraction(FIXTURES / "doccano_relations.jsonl", negative_ratio=5)
    rows = ds.to_list()
    by_prompt = {(r["text"][:6], r["prompt"]): r for r in rows}
    first = rows[0]["text"]
    pos = by_prompt[(first[:6], "人物")]
    assert [x["text"] for x in pos["result_list"]] == ["谷爱凌"]
    rel = by_prompt[(first[:6], "北京冬奥会的主办方")]
    assert rel["type"] == "主办方" and [x["text"] for x in rel["result_list"]] == ["国际奥委会"]
    for r in rows:
        for x in r["result_list"]:
            assert r["text"][x["start"]:x["end"]] == x["text"]
    negatives = [r for r in rows if not r["result_list"]]
    assert negatives and all(r["type"] in {"人物", "时间", "赛事", "组织", "主办方", "承办方"} for r in negatives)
    # a negative prompt never asks for a type the text has
    for r in negatives:
        assert not any(o["prompt"] == r["prompt"] and o["text"] == r["text"] and o["result_list"] for o in rows)
    none = read_extraction(FIXTURES / "doccano_relations.jsonl", negative_ratio=0)
    assert all(r["result_list"] for r in none.to_list())


def test_doccano_sequence_labeling_and_label_studio_exports():
    seq = read_extraction(FIXTURES / "doccano_ner.jsonl").to_list()
    assert {r["prompt"] for r in seq if r["result_list"]} == {"人物", "地点"}
    ls = read_extraction(FIXTURES / "label_studio.json").to_list()
    rel = [r for r in ls if r["prompt"] == "张三的就职于"]
    assert len(rel) == 1 and [x["text"] for x in rel[0]["result_list"]] == ["华为"]
    assert {r["type"] for r in ls} >= {"人物", "组织机构", "就职于"}
    uie = read_extraction(FIXTURES / "uie.jsonl").to_list()
    assert [r["type"] for r in uie] == ["时间", "主办方", "选手"] and uie[2]["result_list"] == []
    assert type_of_prompt("北京冬奥会的主办方", "北京冬奥会由国际奥委会主办") == "主办方"
    assert type_of_prompt("目的地", "去目的地") == "目的地"


@pytest.mark.parametrize("content, fmt, match", [
    ('{"text": "张三在北京", "entities": [{"id": 1, "label": "人物", "start_offset": 0, "end_offset": 9}]}\n', "doccano",
     r"bad.jsonl:1: entities\[0\]: start_offset=0, end_offset=9 is not a span of the text's 5 characters"),
    ('{"text": "张三在北京", "entities": [{"id": 1, "label": "人物", "start_offset": 0, "end_offset": 2}], '
     '"relations": [{"id": 0, "from_id": 1, "to_id": 7, "type": "在"}]}\n', "doccano",
     r"bad.jsonl:1: relations\[0\].to_id 7 names no entity of this record"),
    ('{"text": "张三", "label": [[0, 2, 5]]}\n', "doccano", r"bad.jsonl:1: label\[0\] label is 5"),
    ('{"text": "张三", "label": [[0, "2", "人物"]]}\n', "doccano", r"bad.jsonl:1: label\[0\]: end is '2'"),
    ('{"content": "张三在北京", "prompt": "人物", "result_list": [{"text": "李四", "start": 0, "end": 2}]}\n', "uie",
     r"bad.jsonl:1: result_list\[0\]: text '李四' is not the text at start=0, end=2 \('张三'\)"),
    ('{"content": "张三", "prompt": "", "result_list": []}\n', "uie", r"bad.jsonl:1: field 'prompt' is ''"),
    ('[{"data": {"text": "张三"}, "annotations": [{"result": [{"id": "a", "type": "labels", "value": '
     '{"start": 0, "end": 2, "labels": ["人物"]}}, {"type": "relation", "from_id": "a", "to_id": "b", '
     '"labels": ["r"]}]}]}]', "label-studio", r"bad.jsonl record 0: annotations\[0\].result\[1\].to_id 'b' names no labelled span"),
    ('[{"data": {"txt": "张三"}, "annotations": []}]', "label-studio", r"bad.jsonl record 0: field data.text is None"),
    ('{"words": ["张三"]}\n', "auto", "cannot tell the format of this record"),
])
def test_bad_records_are_refused_naming_file_record_and_field(tmp_path, content, fmt, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=match):
        read_extraction(path, format=fmt)


# ----------------------------------------------------------------------------- features and scores


def test_features_labels_and_a_perfect_score(tok):
    spec = get_task("ie")
    ds = read_extraction(FIXTURES / "doccano_relations.jsonl")
    data = type("Data", (), {"max_length": 40, "reader": {}})()
    feats = spec.featurize(ds[:], tok, data, None)
    n = len(feats["input_ids"])
    assert n >= len(ds) and all(len(x) <= 40 for x in feats["input_ids"])
    batch = spec.collator(tok)([{k: feats[k][i] for k in feats} for i in range(n)])
    assert batch["start_labels"].shape == batch["input_ids"].shape and batch["start_labels"].dtype == torch.float32
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "start_labels", "end_labels"}
    torch.manual_seed(0)
    loss = ErnieForInformationExtraction(tiny_config(tok.vocab_size))(**batch).loss
    assert torch.isfinite(loss)
    features = [{k: feats[k][i] for k in feats} for i in range(n)]
    perfect = [(np.array(f["start_labels"], float), np.array(f["end_labels"], float)) for f in features]
    scores = spec.score(perfect, None, label_names=None, examples=ds, features=features, data=data)
    assert scores["f1"] == 1.0 and scores["f1/人物"] == 1.0 and scores["f1/主办方"] == 1.0
    silent = [(np.zeros_like(s), np.zeros_like(e)) for s, e in perfect]
    assert spec.score(silent, None, label_names=None, examples=ds, features=features, data=data)["recall"] == 0.0


# ----------------------------------------------------------------------------- built-in data


def test_peoples_daily_time_spans_types_and_synonyms():
    from nlp.tasks.datasets import BUILTIN
    from nlp.tasks.datasets.builtin import entity_spans, peoples_daily_sentences
    from nlp.tasks.extraction.builtin import SYNONYMS, records_of_sentence, time_spans

    line = ("19980101-01-001-002/m 1997年/t 12月/t 31日/t ，/w 江/nr 泽民/nr 在/p [中共/nt 中央/n]nt 讲话/v ，/w "
            "今天/t 北京/ns 晴/a 。/w")
    _, sentences = peoples_daily_sentences(line)
    units = sentences[0]
    chars, ents = entity_spans(units)
    text = "".join(chars)
    assert [text[s:e] for s, e in time_spans(units)] == ["1997年12月31日", "今天"]
    spans = {"人物": [(s, e + 1) for t, s, e in ents if t == "PER"], "时间": time_spans(units)}
    types = ["人物", "地点", "组织机构", "时间"]
    test_rows = records_of_sentence("s1", text, spans, types, "test")
    assert [r["prompt"] for r in test_rows] == types  # scored under the names Taskflow's examples use
    assert [x["text"] for x in test_rows[0]["result_list"]] == ["江泽民"] and test_rows[1]["result_list"] == []
    train_prompts = {r["prompt"] for i in range(40) for r in records_of_sentence(f"s{i}", text, spans, types, "train")}
    assert {"人名", "地名", "机构"} <= train_prompts and train_prompts <= {n for names in SYNONYMS.values() for n in names}
    assert {"peoples-daily-1998-uie", "msra-uie", "zh-ner-uie"} <= set(BUILTIN)
    assert BUILTIN["zh-ner-uie"].task == "information-extraction" and "时间" not in BUILTIN["zh-ner-uie"].label_names


def test_predict_takes_the_schema_as_nlp_predict_passes_it(model_dir):
    spec = get_task("information-extraction")
    pipe = nlp.pipeline("ie", model=str(model_dir), max_length=64)
    records = [{"text": TEXTS[0]}, {"text": HARD}]
    got = spec.predict(pipe, records, schema='["时间", {"人物": ["国籍"]}]', position_prob=0.2)
    want = pipe([r["text"] for r in records], schema=["时间", {"人物": ["国籍"]}], position_prob=0.2)
    assert [g["extraction"] for g in got] == want
    assert spec.predict(pipe, records[:1], schema="时间，人物")[0]["extraction"] == pipe(TEXTS[0], schema=["时间", "人物"])[0]
    with pytest.raises(DataError, match="no schema: give --schema"):
        spec.predict(pipe, records)
    assert spec.empty_prediction() == {"extraction": {}}
    assert [o.name for o in spec.options_for("predict")] == ["schema", "position_prob"]
    assert [o.name for o in spec.options_for("serve")] == ["position_prob"]  # the schema is the route's own parameter
