"""The pages `nlp serve` shows a person: the playground at `/` and the API docs at `/docs`.

Both are static files shipped in the package (nlp/deploy/playground/: HTML, CSS, JavaScript; no
CDN, so they work offline) that talk to the server only through its public API: the playground
builds its form from `/openapi.json` (the request schema of each POST route: the input fields and
the task's parameters) and posts to the routes as any client would; the docs page draws the same
document. Nothing about the served model is in the files themselves, so serving them without a
token leaks nothing: what the model is comes from `/info`, which asks for the token as before.

The answers carry a Content-Security-Policy that allows only these files' own scripts and styles
and requests to this server, so markup in a text or in a model's output cannot run even if a
renderer were to mistake it for HTML (the renderers build the DOM with textContent; the browser
tests check that none does).
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["ASSETS", "PAGE_ROUTES", "page_routes"]

# file name -> media type: only these are served (a fixed table: no path from the URL reaches the disk)
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "docs.html": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
    "docs.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
PAGE_ROUTES = ("/", "/docs")  # and /playground/<asset>

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # the files change with the package: a browser asks again (cheap: they are a few KB, read once)
    "Cache-Control": "no-cache",
}


def _read_assets() -> dict[str, bytes]:
    folder = resources.files("nlp.deploy").joinpath("playground")
    return {name: folder.joinpath(name).read_bytes() for name in ASSETS}


def page_routes() -> list[Route]:
    """GET routes for the pages and their assets (read once, when the app is made)."""
    files = _read_assets()

    def serve(name: str) -> Response:
        return Response(files[name], media_type=ASSETS[name], headers=_HEADERS)

    async def index(request: Request) -> Response:
        return serve("index.html")

    async def docs(request: Request) -> Response:
        return serve("docs.html")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files or name.endswith(".html"):
            return JSONResponse({"error": "Not Found", "message": f"no playground file {name!r}; the page at / "
                                 f"loads {', '.join(n for n in ASSETS if not n.endswith('.html'))}"}, status_code=404)
        return serve(name)

    return [Route("/", index, methods=["GET"]), Route("/docs", docs, methods=["GET"]),
            Route("/playground/{name}", asset, methods=["GET"])]
