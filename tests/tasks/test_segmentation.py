"""The jieba word segmenter (`nlp.pipeline("word-segmentation", model="jieba")`): offsets, user
dictionaries, both backends, input checks. The neural default: tests/tasks/test_lexical.py."""

import pytest

import nlp
from nlp._common import ConfigError, DataError
from nlp.tasks.segmentation import WordSegmentationPipeline
from nlp.tokenizer.segmenter import has_rjieba

BACKENDS = ["jieba"] + (["rjieba"] if has_rjieba() else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_words_with_offsets_cover_the_text(backend):
    seg = WordSegmentationPipeline(backend=backend)
    text = "我爱北京天安门， Hello world 2024年！"
    words = seg(text)
    assert all(text[w["start"] : w["end"]] == w["word"] for w in words)
    assert "".join(w["word"] for w in words) == text.replace(" ", "")  # every non-space char once
    assert [w["word"] for w in words][:3] == ["我", "爱", "北京"]
    assert "天安门" in [w["word"] for w in words]
    assert not [w for w in words if not w["word"].strip()]


def test_backends_agree():
    if len(BACKENDS) < 2:
        pytest.skip("rjieba not installed")
    text = "南京市长江大桥于1968年建成通车，是中国自行设计建造的第一座双层铁路公路两用桥。"
    assert WordSegmentationPipeline(backend="jieba")(text) == WordSegmentationPipeline(backend="rjieba")(text)


def test_user_dict_as_words_and_as_a_file(tmp_path):
    text = "飞桨深度学习平台"
    plain = [w["word"] for w in WordSegmentationPipeline()(text)]
    assert "飞桨" not in plain
    assert WordSegmentationPipeline(user_dict=["飞桨"])(text)[0] == {"word": "飞桨", "start": 0, "end": 2}
    f = tmp_path / "user.txt"
    f.write_text("# my words\n飞桨 10 nz\n\n深度学习平台\n", encoding="utf-8")
    assert [w["word"] for w in WordSegmentationPipeline(user_dict=f)(text)] == ["飞桨", "深度学习平台"]
    f.write_text("a b c d\n", encoding="utf-8")
    with pytest.raises(DataError, match="user.txt:1"):
        WordSegmentationPipeline(user_dict=f)
    with pytest.raises(ConfigError, match="not a file"):
        WordSegmentationPipeline(user_dict=str(tmp_path / "missing.txt"))


def test_inputs_lists_empty_and_type_errors():
    seg = nlp.pipeline("word-segmentation", model="jieba")
    assert isinstance(seg, WordSegmentationPipeline)
    assert seg([]) == [] and seg("") == [] and seg("   ") == []
    assert [[w["word"] for w in r] for r in seg(["你好", "谢谢"])] == [["你好"], ["谢谢"]]
    with pytest.raises(TypeError, match="input 1 is a int"):
        seg(["你好", 3])
    with pytest.raises(TypeError, match="string or a list of strings"):
        seg(None)
    with pytest.raises(TypeError, match="user_dict words must be strings"):
        WordSegmentationPipeline(user_dict=["好", 1])
    with pytest.raises(ConfigError, match="needs no tokenizer"):
        nlp.pipeline("word-segmentation", model="jieba", tokenizer="ernie-tiny-zh")
    with pytest.raises(ConfigError, match=r"no default model.*model-free: word-segmentation \(model='jieba'\)"):
        nlp.pipeline("question-answering")
    # jieba options pass through; the jieba segmenter is one argument away from the neural default
    assert nlp.pipeline("cws", model="jieba", user_dict=["飞桨"])("飞桨") == [{"word": "飞桨", "start": 0, "end": 2}]
