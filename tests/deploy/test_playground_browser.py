"""The playground (/) and the API docs (/docs) of `nlp serve` in a real browser: headless Chromium,
driven by Selenium through the system's chromedriver, against `nlp serve` on 127.0.0.1 with the
shipped models. Chinese text is typed into the page and the result is read back from the DOM,
then compared with what the JSON API answers for the same text.

With $NLP_PLAYGROUND_SCREENSHOTS set to a folder, the tests also write the screenshots that
docs/playground.md shows (docs/img/playground-*.png):

    NLP_PLAYGROUND_SCREENSHOTS=docs/img pytest -q tests/deploy/test_playground_browser.py

Where Chromium or chromedriver is absent the module skips, saying what to install (.ci/run
installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib import resources
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_server import cli_server, nlp_env  # noqa: E402

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(f"Chromium is absent (chromium: {CHROMIUM or 'not found'}, chromedriver: {CHROMEDRIVER or 'not found'}); "
                "install it with `apt-get install chromium chromium-driver fonts-noto-cjk`, as .ci/run does",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.timeout(600)

ASSETS = Path(str(resources.files("nlp").joinpath("assets")))
SHOTS = os.environ.get("NLP_PLAYGROUND_SCREENSHOTS")  # a folder: write the docs' screenshots there
TOKEN = "口令-s3cret"  # non-ASCII on purpose: the page must send the token's UTF-8 bytes
# fp32 and a small batch budget: a short warm-up (fewer batch shapes) before /health says ready
SERVE_ARGS = ("--precision", "fp32", "--max-batch-tokens", "512")
HOSTILE = '<img src=x onerror="window.__pwned=1">张三<script>window.__pwned=2</script>在北京'


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}", "--window-size=1100,900",
                 "--lang=zh-CN"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _serve(model: Path, *args: str):
    # served by its folder's name from beside it: the page (and the screenshots) show that name,
    # not a path of the machine that ran the tests
    return cli_server(model.name, (*SERVE_ARGS, *args), env=nlp_env(), cwd=model.parent)


@pytest.fixture(scope="module")
def sentiment_url():
    """The sentiment model behind a bearer token: the classification and the token tests share it."""
    with _serve(ASSETS / "ernie-tiny-zh-sentiment-small", "--token", TOKEN) as url:
        yield url


@pytest.fixture(scope="module")
def ner_url():
    with _serve(ASSETS / "ernie-tiny-zh-ner") as url:
        yield url


@pytest.fixture(scope="module")
def lexical_url():
    with _serve(ASSETS / "ernie-tiny-zh-lexical") as url:
        yield url


def _open(browser, url: str, path: str = "/") -> None:
    browser.get(url + path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    browser.get_log("browser")  # start each page's checks with an empty console


def _described(browser) -> int:
    return int(browser.execute_script("return document.body.dataset.described || 0"))


def _use_token(browser, token: str) -> None:
    """Enter `token` and wait until the page has asked /info with it."""
    before = _described(browser)
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    browser.find_element(By.ID, "token-save").click()
    WebDriverWait(browser, 20).until(lambda d: _described(d) > before)


def _run(browser, text: str | dict[str, str], **options: str) -> str:
    """Type `text` (or each input field's text, by name) and the options, press Run, wait for
    the answer; the status line."""
    before = int(browser.execute_script("return document.body.dataset.runs || 0"))
    for name, value in (text if isinstance(text, dict) else {"text": text}).items():
        box = browser.find_element(By.ID, f"in-{name}")
        box.clear()
        box.send_keys(value)
    for name, value in options.items():
        field = browser.find_element(By.ID, f"opt-{name}")
        field.clear()
        field.send_keys(value)
    browser.find_element(By.ID, "run").click()
    WebDriverWait(browser, 60).until(
        lambda d: int(d.execute_script("return document.body.dataset.runs || 0")) > before)
    return browser.find_element(By.ID, "status").text


def _renderer(browser) -> str:
    return browser.find_element(By.CSS_SELECTOR, "#result > .rendered").get_attribute("data-renderer")


def _console_errors(browser) -> list[dict]:
    """SEVERE console entries: failed loads, script errors, Content-Security-Policy refusals."""
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _shot(browser, name: str) -> None:
    """The whole page (at most 1,600 px tall) as docs/img/playground-NAME.png, when asked for."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        size = {"width": 1000, "height": 600, "deviceScaleFactor": 1, "mobile": False}
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", size)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**size, "height": min(height, 1600)})
        try:
            assert browser.save_screenshot(str(Path(SHOTS) / f"playground-{name}.png"))
        finally:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def _api(url: str, text, parameters: dict | None = None, token: str | None = None, route: str = "/predict"):
    headers = {"Authorization": f"Bearer {token}".encode()} if token else {}
    body = {"inputs": text, **({"parameters": parameters} if parameters else {})}
    r = httpx.post(url + route, json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _marks(browser) -> list[tuple[int, int, str, str]]:
    return [(int(m.get_attribute("data-start")), int(m.get_attribute("data-end")), m.get_attribute("data-label"),
             m.find_element(By.CLASS_NAME, "span-text").text)
            for m in browser.find_elements(By.CSS_SELECTOR, "#result mark.span")]


def _injected(browser) -> list[str]:
    """Elements or script effects that hostile text could have made: none may exist."""
    found = [e.tag_name for e in browser.find_elements(By.CSS_SELECTOR, "#result img, #result script, #result b")]
    if browser.execute_script("return window.__pwned !== undefined"):
        found.append(f"window.__pwned = {browser.execute_script('return window.__pwned')}")
    return found


# --------------------------------------------------------------------------- the tasks


def test_classification_draws_labelled_bars_with_the_api_scores(browser, sentiment_url):
    text = "这家餐厅的服务非常好，菜也好吃"
    _open(browser, sentiment_url)
    _use_token(browser, TOKEN)
    assert browser.find_element(By.ID, "task").text == "text-classification"
    # top_k is a nullable integer >= 1 (the task's call option): "0" is refused by the page, "null" is every label
    assert _run(browser, text, top_k="0") == "top_k must be >= 1, got 0"
    assert _run(browser, text, top_k="null").startswith("200"), browser.find_element(By.ID, "status").text
    assert _renderer(browser) == "labels"
    want = _api(sentiment_url, text, {"top_k": None}, token=TOKEN)
    rows = browser.find_elements(By.CSS_SELECTOR, "#result .bar-row")
    got = [(r.find_element(By.CLASS_NAME, "bar-label").text, float(r.get_attribute("data-score")),
            r.find_element(By.CLASS_NAME, "bar-value").text) for r in rows]
    assert [g[0] for g in got] == [w["label"] for w in want] and len(got) == 2
    for (_, score, shown), w in zip(got, want):
        assert score == pytest.approx(w["score"], abs=1e-6)
        assert shown == f"{w['score']:.3f}"
    # the bar's length is the score's share of the track
    fill, track = (browser.find_element(By.CSS_SELECTOR, f"#result .bar-row .{c}").size["width"]
                   for c in ("bar-fill", "bar-track"))
    assert fill / track == pytest.approx(want[0]["score"], abs=0.02)
    assert _console_errors(browser) == []
    _shot(browser, "classification")


def test_ner_marks_entities_in_the_text_by_their_offsets(browser, ner_url):
    text = "张三在北京大学工作，李四在上海。"
    _open(browser, ner_url)
    assert _run(browser, text).startswith("200")
    assert _renderer(browser) == "spans"
    want = _api(ner_url, text)
    assert want, "the shipped NER model found no entity in its example text"
    assert _marks(browser) == [(e["start"], e["end"], e["entity_group"], text[e["start"]:e["end"]]) for e in want]
    # the marked paragraph reads as the text itself, label tags aside
    paragraph = browser.find_element(By.CSS_SELECTOR, "#result .marked-text")
    shown = browser.execute_script(
        "const p = arguments[0].cloneNode(true); p.querySelectorAll('.span-label').forEach((n) => n.remove());"
        "return p.textContent;", paragraph)
    assert shown == text
    assert _console_errors(browser) == []
    _shot(browser, "ner")


def test_lexical_analysis_shows_words_with_pos_and_entities(browser, lexical_url):
    text = "李明昨天在北京大学参加了人工智能会议。"
    _open(browser, lexical_url)
    assert _run(browser, text).startswith("200")
    assert _renderer(browser) == "lexical"
    want = _api(lexical_url, text)
    words = browser.find_elements(By.CSS_SELECTOR, "#result .word")
    got = [(w.find_element(By.CLASS_NAME, "word-text").text, w.find_element(By.CLASS_NAME, "word-tag").text,
            int(w.get_attribute("data-start")), int(w.get_attribute("data-end"))) for w in words]
    assert got == [(w["word"], w["pos"], w["start"], w["end"]) for w in want["words"]]
    assert "".join(g[0] for g in got) == text  # the segmentation covers the text
    assert len({g[0] for g in got}) < len(text), "every character came back as its own word"
    # the POS tag is drawn under its word, not beside it
    first = words[0]
    assert (first.find_element(By.CLASS_NAME, "word-tag").location["y"]
            > first.find_element(By.CLASS_NAME, "word-text").location["y"])
    assert _marks(browser) == [(e["start"], e["end"], e["type"], text[e["start"]:e["end"]]) for e in want["entities"]]
    assert _console_errors(browser) == []
    _shot(browser, "lexical")


def test_word_segmentation_shades_the_words(browser):
    text = "我们在北京大学学习自然语言处理"
    with _serve(ASSETS / "ernie-tiny-zh-lexical", "--task", "word-segmentation") as url:
        _open(browser, url)
        assert _run(browser, text).startswith("200")
        assert _renderer(browser) == "words"
        want = _api(url, text)
    words = browser.find_elements(By.CSS_SELECTOR, "#result .word")
    assert [(w.text, int(w.get_attribute("data-start")), int(w.get_attribute("data-end"))) for w in words] == \
        [(w["word"], w["start"], w["end"]) for w in want]
    assert browser.find_elements(By.CSS_SELECTOR, "#result .word-tag") == []  # no tags to draw
    classes = [w.get_attribute("class") for w in words]
    assert all(a != b for a, b in zip(classes, classes[1:])), "neighbouring words look alike"
    assert _console_errors(browser) == []
    _shot(browser, "segmentation")


def test_similarity_draws_one_bar_per_sentence_and_vectors_their_size(browser, embedding_model):
    source, sentences = "今天天气很好", ["今天天气不错", "股市大跌", "明天会下雨吗"]
    with _serve(embedding_model) as url:
        _open(browser, url, "/?route=/similarity")
        assert browser.find_element(By.ID, "route").get_attribute("value") == "/similarity"
        assert _run(browser, {"source_sentence": source, "sentences": "\n".join(sentences)}).startswith("200")
        assert _renderer(browser) == "similarity"
        want = _api(url, {"source_sentence": source, "sentences": sentences}, route="/similarity")
        rows = browser.find_elements(By.CSS_SELECTOR, "#result .bar-row")
        assert [r.get_attribute("data-label") for r in rows] == sentences
        assert [float(r.get_attribute("data-score")) for r in rows] == pytest.approx(want, abs=1e-6)
        _shot(browser, "similarity")
        # the same page on /predict: the vector's size and its first values
        Select(browser.find_element(By.ID, "route")).select_by_value("/predict")
        assert _run(browser, source).startswith("200")
        assert _renderer(browser) == "vectors"
        vector = _api(url, source)
        assert int(browser.find_element(By.CSS_SELECTOR, "#result .vector").get_attribute("data-dims")) == len(vector)
        assert browser.find_element(By.CSS_SELECTOR, "#result .vector code").text.startswith(f"[{vector[0]:.4f}, ")
        assert _console_errors(browser) == []


def test_question_answering_marks_the_answer_in_the_context(browser, tmp_path):
    """Inputs that are objects (question and context): one field each; the answer marked in the
    context by its offsets (a fresh, seeded head: the answer is whatever span it picks)."""
    import torch

    from nlp.tasks import ErnieForQuestionAnswering
    from nlp.tokenizer import load_tokenizer

    torch.manual_seed(0)
    model = tmp_path / "ernie-tiny-zh-qa"
    ErnieForQuestionAnswering.from_pretrained(ASSETS / "ernie-tiny-zh").save_pretrained(model)
    load_tokenizer(ASSETS / "ernie-tiny-zh").save_pretrained(model)
    question, context = "张三在哪里工作？", "张三在北京大学工作，李四在上海的一家公司工作。"
    with _serve(model) as url:
        _open(browser, url)
        assert _run(browser, {"question": question, "context": context}).startswith("200")
        assert _renderer(browser) == "answer"
        want = _api(url, {"question": question, "context": context})
        assert browser.find_element(By.CSS_SELECTOR, "#result .answer-text").text == want["answer"]
        assert _marks(browser) == [(want["start"], want["end"], "answer", context[want["start"]:want["end"]])]
        assert context[want["start"]:want["end"]] == want["answer"]
        # the task's options, typed: top_k (an integer, at most 20) gives a list of answers
        top_k = browser.find_element(By.ID, "opt-top_k")
        assert (top_k.get_attribute("type"), top_k.get_attribute("max")) == ("number", "20")
        assert browser.find_element(By.ID, "opt-handle_impossible_answer").get_attribute("type") == "checkbox"
        assert _run(browser, {"question": question, "context": context}, top_k="2").startswith("200")
        want = _api(url, {"question": question, "context": context}, {"top_k": 2})
    assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#result .answer-text")] == [a["answer"] for a in want]
    assert len(want) == 2 and _renderer(browser) == "answer"
    assert _console_errors(browser) == []


def test_information_extraction_marks_the_spans_of_the_schema_typed_in(browser, tmp_path):
    """The served information-extraction task answers {type: [spans]} and the page draws it with
    its extraction renderer: the spans marked in the text by type (a fresh, seeded model whose
    heads pass a few pointers: the spans are whatever it picks). The schema is typed as names
    separated by a full-width comma, as a person types it."""
    import torch

    from nlp.tasks.extraction import ErnieForInformationExtraction
    from nlp.tokenizer import load_tokenizer

    torch.manual_seed(0)
    model = tmp_path / "ernie-tiny-zh-uie"
    uie = ErnieForInformationExtraction.from_pretrained(ASSETS / "ernie-tiny-zh")
    for head in (uie.linear_start, uie.linear_end):
        torch.nn.init.normal_(head.weight, std=0.5)
    uie.save_pretrained(model)
    load_tokenizer(ASSETS / "ernie-tiny-zh").save_pretrained(model)
    text = "2月8日上午北京冬奥会自由式滑雪女子大跳台决赛中中国选手谷爱凌以188.25分获得金牌！"
    with _serve(model) as url:
        _open(browser, url)
        assert _run(browser, text, schema="人物", position_prob="0.3").startswith("200")
        want = _api(url, text, {"schema": ["人物"], "position_prob": 0.3})
        assert want.get("人物"), "the seeded model found no span; draw its heads wider"
        assert _renderer(browser) == "extraction"
        assert _marks(browser) == [(s["start"], s["end"], "人物", s["text"]) for s in want["人物"]]
        assert _run(browser, text, schema="人物，地点", position_prob="0.3").startswith("200")
        want = _api(url, text, {"schema": ["人物", "地点"], "position_prob": 0.3})
        assert {m[2] for m in _marks(browser)} <= {"人物", "地点"} and _renderer(browser) == "extraction"
        assert _console_errors(browser) == []
        assert _run(browser, text, schema='[{"a": [{"b": [{"c": ["d"]}]}]}]').startswith("422")
        assert "MAX_SCHEMA_DEPTH" in browser.find_element(By.ID, "status").text + \
            browser.find_element(By.ID, "result").text
    # the one error logged is the 422 asked for
    assert [e["message"].rsplit(" ", 3)[-3:] for e in _console_errors(browser)] == [["422", "(Unprocessable", "Entity)"]]


def test_typed_options_become_widgets_and_typed_values(browser):
    """A task from outside the package (tests/deploy/label_choice_task.py) whose options declare
    their types and bounds: the form has a number field with those bounds, a checkbox, a list
    field; the page checks the bounds before sending; the values arrive typed (the server
    refuses strings); the answer's shape (zero-shot's) picks its renderer."""
    env = nlp_env({"NLP_TASK_PLUGINS": "label_choice_task"}, paths=[Path(__file__).parent])
    model = ASSETS / "ernie-tiny-zh-sentiment-small"
    text = "这家餐厅的服务非常好"
    with cli_server(model.name, (*SERVE_ARGS, "--task", "label-choice-test"), env=env, cwd=model.parent) as url:
        _open(browser, url)
        top_k = browser.find_element(By.ID, "opt-top_k")
        assert (top_k.get_attribute("type"), top_k.get_attribute("min"), top_k.get_attribute("max"),
                top_k.get_attribute("placeholder")) == ("number", "1", "5", "5")
        normalize = browser.find_element(By.ID, "opt-normalize")
        assert normalize.get_attribute("type") == "checkbox" and normalize.is_selected()
        helps = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#options .help")]
        assert any("1 to 5" in h and "default 5" in h for h in helps) and any("comma-separated" in h for h in helps)
        # out of bounds: the page says so and sends nothing
        requests_before = _requests(url)
        status = _run(browser, text, top_k="9")
        assert status == "top_k must be between 1 and 5, got 9"
        assert _requests(url) == requests_before
        # a list (full-width comma too), an integer and an unticked box, sent as their JSON types
        normalize.click()
        assert _run(browser, text, top_k="1", candidate_labels="negative，positive").startswith("200")
        assert _requests(url) == requests_before + 1  # the count above can tell
        assert _renderer(browser) == "zero-shot"
        want = _api(url, text, {"candidate_labels": ["negative", "positive"], "top_k": 1, "normalize": False})
        rows = browser.find_elements(By.CSS_SELECTOR, "#result .bar-row")
        assert [(r.get_attribute("data-label"), float(r.get_attribute("data-score"))) for r in rows] == \
            [(label, pytest.approx(score, abs=1e-6)) for label, score in zip(want["labels"], want["scores"])]
        assert want["scores"][0] < 1  # not normalised: the page sent false, not the default
        assert _console_errors(browser) == []


def _requests(url: str) -> int:
    """POST /predict requests the server has answered (its /metrics)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith('nlp_serve_requests_total{endpoint="/predict"'))


# --------------------------------------------------------------------------- the token


def test_token_is_asked_for_kept_for_the_tab_and_sent(browser, sentiment_url):
    browser.get(sentiment_url + "/")
    browser.execute_script("sessionStorage.clear()")
    _open(browser, sentiment_url)
    # without the token: the page says so and shows nothing of the model
    assert browser.execute_script("return document.body.dataset.auth") == "needed"
    assert "token" in browser.find_element(By.ID, "model-line").text
    assert "ernie-tiny-zh-sentiment-small" not in browser.find_element(By.TAG_NAME, "body").text
    status = _run(browser, "很好")
    assert status.startswith("401") and "bearer token" in status
    assert browser.find_elements(By.CSS_SELECTOR, "#result > *") == []
    # a wrong token is refused
    _use_token(browser, "wrong")
    assert browser.execute_script("return document.body.dataset.auth") == "needed"
    assert "refused" in browser.find_element(By.ID, "token-state").text
    assert _run(browser, "很好").startswith("401")
    # the right one: kept in sessionStorage, sent, and still there after a reload
    _use_token(browser, TOKEN)
    assert browser.execute_script("return document.body.dataset.auth") == "ok"
    assert browser.execute_script("return sessionStorage.getItem('nlp-serve-token')") == TOKEN
    assert browser.execute_script("return localStorage.length") == 0  # only this tab keeps it
    assert browser.find_element(By.ID, "model").text == "ernie-tiny-zh-sentiment-small"
    assert _run(browser, "很好").startswith("200")
    _open(browser, sentiment_url)
    assert browser.execute_script("return document.body.dataset.auth") == "ok"
    assert _run(browser, "太难吃了").startswith("200") and _renderer(browser) == "labels"
    # forgetting it locks the page again
    before = _described(browser)
    browser.find_element(By.ID, "token-clear").click()
    WebDriverWait(browser, 20).until(lambda d: _described(d) > before)
    assert browser.execute_script("return document.body.dataset.auth") == "needed"
    assert browser.execute_script("return sessionStorage.getItem('nlp-serve-token')") is None


# --------------------------------------------------------------------------- hostile text


def test_markup_in_the_input_and_the_words_stays_text(browser, lexical_url):
    _open(browser, lexical_url)
    assert _run(browser, HOSTILE).startswith("200")
    want = _api(lexical_url, HOSTILE)
    assert any("<" in w["word"] for w in want["words"]), "the model's words carry no markup to test with"
    assert _injected(browser) == []
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .word-text")]
    assert texts == [w["word"] for w in want["words"]]
    raw = json.loads(browser.find_element(By.ID, "raw").get_attribute("textContent"))
    assert raw == want
    assert _console_errors(browser) == []  # nothing was even blocked by the page's CSP: nothing tried to run


def test_markup_in_the_model_labels_stays_text(browser, tmp_path):
    """A model whose label names are markup (its config.json is the model author's text)."""
    model = tmp_path / "hostile-labels"
    shutil.copytree(ASSETS / "ernie-tiny-zh-sentiment-small", model)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    labels = ['<img src=x onerror="window.__pwned=3">差评', "<b>好评</b><script>window.__pwned=4</script>"]
    config["id2label"] = {"0": labels[0], "1": labels[1]}
    config["label2id"] = {labels[0]: 0, labels[1]: 1}
    (model / "config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    with _serve(model) as url:
        _open(browser, url)
        assert _run(browser, "这家餐厅的服务非常好", top_k="2").startswith("200")
        shown = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .bar-label")]
        assert sorted(shown) == sorted(labels)
        assert _injected(browser) == []
        assert _console_errors(browser) == []


def test_every_renderer_draws_hostile_strings_as_text(browser, lexical_url):
    """The renderer table, shape by shape, fed answers whose every string is markup: the shapes
    of tasks that are not served here yet (zero-shot, extraction, correction) included."""
    _open(browser, lexical_url)
    evil = '<img src=x onerror="window.__pwned=5">'
    text = f"😀{evil}张三在北京"  # an astral character first: offsets count code points, not UTF-16 units
    n = len(evil)
    cases = {
        "labels": ([{"label": evil, "score": 0.75}], {}),
        "zero-shot": ({"sequence": evil, "labels": [evil, "体育"], "scores": [0.6, 0.4]}, {}),
        "spans": ([{"entity_group": evil, "word": evil, "start": 1 + n, "end": 3 + n, "score": 0.9}], {}),
        "extraction": ([{evil: [{"text": "张三", "start": 1 + n, "end": 3 + n, "probability": 0.9}]}], {}),
        "answer": ({"answer": evil, "score": 0.5, "start": 1, "end": 1 + n}, {"inputs": {"context": text}}),
        "corrections": ({"source": f"{evil}天气很好", "target": f"{evil}天气很好",
                         "errors": [{"position": 0, "correction": {"<": evil}}]}, {}),
        "similarity": ([0.9, 0.1], {"inputs": {"source_sentence": evil, "sentences": [evil, "你好"]}}),
        "vectors": ([[0.6, 0.8]], {}),
        "words": ([{"word": evil, "start": 1, "end": 1 + n}], {}),
        "tagged-words": ([{"word": evil, "start": 1, "end": 1 + n, "pos": evil}], {}),
        "json": ({"unknown": evil}, {}),
    }
    for name, (answer, ctx) in cases.items():
        drawn = browser.execute_script(
            "const node = NlpRender.render(arguments[0], Object.assign({text: arguments[2]}, arguments[1]));"
            "const result = document.getElementById('result'); result.replaceChildren(node);"
            "return [node.dataset.renderer, node.textContent];", answer, ctx, text)
        assert drawn[0] == name, f"{name}: drawn by {drawn[0]}"
        assert _injected(browser) == [], name
        if name not in ("vectors", "json"):
            assert evil in drawn[1], f"{name}: the markup is not shown as text: {drawn[1]!r}"
    # the span after the astral character covers 张三, as Python's offsets say
    browser.execute_script("document.getElementById('result').replaceChildren(NlpRender.render(arguments[0], "
                           "{text: arguments[1]}))", cases["spans"][0], text)
    assert [m[3] for m in _marks(browser)] == ["张三"]
    assert _console_errors(browser) == []


# --------------------------------------------------------------------------- the API docs


def test_docs_page_lists_every_operation_of_the_openapi_document(browser, sentiment_url):
    doc = httpx.get(sentiment_url + "/openapi.json", timeout=30).json()
    _open(browser, sentiment_url, "/docs")
    sections = browser.find_elements(By.CSS_SELECTOR, "#operations > .operation")
    got = [(s.get_attribute("data-method"), s.get_attribute("data-path")) for s in sections]
    assert got == [(m, p) for p, ops in doc["paths"].items() for m in ops]
    predict = browser.find_element(By.ID, "post-/predict")
    assert "bearer token" in predict.find_element(By.CLASS_NAME, "lock").text
    assert predict.find_elements(By.CSS_SELECTOR, "[data-property='top_k']")
    # every status, in ascending order (JavaScript orders an object's integer keys so)
    assert [r.get_attribute("data-status") for r in predict.find_elements(By.CSS_SELECTOR, "tr")] == \
        sorted(doc["paths"]["/predict"]["post"]["responses"], key=int)
    health = browser.find_element(By.ID, "get-/health")
    assert health.find_elements(By.CLASS_NAME, "lock") == []
    assert browser.find_element(By.ID, "doc-title").text.startswith(doc["info"]["title"])
    assert _console_errors(browser) == []
    _shot(browser, "docs")
