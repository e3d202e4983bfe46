"""The pages of `nlp serve` over HTTP, without a browser: what is served, with which headers,
that it all ships in the package and loads nothing from elsewhere, that the pages need no token
and show nothing of the model, and `--no-playground`. The browser tests are in
test_playground_browser.py."""

from __future__ import annotations

import argparse
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from nlp.commands import serve as serve_command
from nlp.deploy.server import create_app
from nlp.deploy.server_config import ServeConfig
from nlp.deploy.server_pages import ASSETS

MODEL = str(resources.files("nlp").joinpath("assets/ernie-tiny-zh-sentiment-small"))
FOLDER = Path(str(resources.files("nlp.deploy").joinpath("playground")))


def _client(**kw) -> TestClient:
    # no `with`: the lifespan (which loads the model) does not run; the pages need no model
    return TestClient(create_app(ServeConfig(model=MODEL, **kw)))


def test_pages_and_assets_are_served_with_a_strict_policy():
    client = _client()
    for path, media in [("/", "text/html"), ("/docs", "text/html")] + \
            [(f"/playground/{n}", t.split(";")[0]) for n, t in ASSETS.items() if not n.endswith(".html")]:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["content-type"].startswith(media), path
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp, csp
        assert r.headers["x-content-type-options"] == "nosniff"


def test_the_pages_load_only_packaged_files_and_nothing_from_elsewhere():
    shipped = {p.name for p in FOLDER.iterdir()}
    assert shipped == set(ASSETS), "a file in nlp/deploy/playground is not in ASSETS (or the reverse)"
    for name in ("index.html", "docs.html"):
        html = (FOLDER / name).read_text(encoding="utf-8")
        refs = re.findall(r'(?:src|href)="([^"]+)"', html)
        for ref in refs:
            assert ref.startswith("/"), f"{name} loads {ref} from elsewhere"
            if ref.startswith("/playground/"):
                assert ref.removeprefix("/playground/") in ASSETS, f"{name} loads {ref}, which is not shipped"
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), f"{name} has an inline script (the CSP refuses it)"
    for name in ASSETS:
        text = (FOLDER / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), f"{name} names a URL elsewhere (no CDN)"
        assert not re.search(r"(inner|outer)HTML|insertAdjacentHTML", text), f"{name} writes HTML: build DOM nodes"
        assert "eval(" not in text and "document.write" not in text, name


def test_the_assets_are_package_data():
    config = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["nlp.deploy"]
    assert "playground/*" in patterns


def test_the_pages_need_no_token_and_show_nothing_of_the_model():
    client = _client(token="s3cret")
    assert client.get("/info").status_code == 401  # what the model is stays behind the token
    for path in ["/", "/docs", *(f"/playground/{n}" for n in ASSETS if not n.endswith(".html"))]:
        r = client.get(path)
        assert r.status_code == 200, path
        for secret in ("ernie-tiny-zh-sentiment-small", "text-classification", "s3cret", "positive"):
            assert secret not in r.text, f"{path} shows {secret!r}"


def test_unknown_assets_are_json_404s():
    client = _client()
    for path in ("/playground/nope.js", "/playground/index.html"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.json()["error"] == "Not Found" and "playground.js" in r.json()["message"]
    r = client.get("/playground/..%2Fserver.py")  # no path from the URL reaches the disk
    assert r.status_code == 404 and r.json()["error"] == "Not Found"


def test_no_playground_serves_the_api_only():
    client = _client(playground=False)
    routes = "routes: /predict, /, /tokenize, /decode, /health, /info, /metrics, /openapi.json"
    for path in ("/docs", "/playground/playground.js"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.json()["message"].endswith(routes)
    # / is then only the POST that huggingface_hub's InferenceClient sends to an endpoint URL
    r = client.get("/")
    assert r.status_code == 405 and r.headers["Allow"] == "POST" and "text/html" not in r.headers["content-type"]
    assert client.get("/openapi.json").status_code == 200
    assert "/docs" in _client().get("/nope").json()["message"]  # the routes a 404 lists include the pages


@pytest.mark.parametrize("argv, expected", [([], True), (["--no-playground"], False)])
def test_the_flag(argv, expected):
    parser = argparse.ArgumentParser()
    serve_command.register(parser.add_subparsers())
    assert parser.parse_args(["serve", "m", *argv]).playground is expected
