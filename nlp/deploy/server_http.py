"""The HTTP/1.1 protocol of `nlp serve`: uvicorn's httptools protocol with limits, and JSON errors.

uvicorn reads a request head of any size (a 100 MB header was read to its end while other
clients waited), keeps a connection that never sends a request open forever, and answers a
request it cannot parse with a plain-text 400. This protocol, given to uvicorn as `http=`:

- answers 431 once a request head (request line + headers) passes `max_header_bytes`, or it
  has more than `max_headers` fields, and 414 for a URL over `MAX_URL_BYTES`, before reading on;
- closes a connection whose request head is not complete `header_timeout` seconds after it
  connected or after its last answer (408 when part of a head came; silence gets no answer);
- answers what the parser refuses (a garbage request line, a NUL in a header, `Content-Length:
  -1`, a non-ASCII path, TLS bytes) with a JSON 400, `{"error", "message"}`, as the application does.

What still answers without JSON: nothing the client can send (every refusal above is JSON); a
connection closed after `header_timeout` with no bytes received gets no answer at all, as there
was no request to answer. The body's read time is bounded by the application
(`ServeConfig.body_timeout`, 408), which knows how far the body got.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from nlp._extras import MissingExtraError

try:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError as err:  # the serve extra
    raise MissingExtraError(err.name or "uvicorn", "the model server (`nlp serve`)", extra="serve") from err

__all__ = ["MAX_URL_BYTES", "LimitedHttpProtocol", "configure_default", "json_error_bytes", "protocol_for"]

MAX_URL_BYTES = 8192  # the request target; every route here is a short path


class _Refused(Exception):
    """Raised in a parser callback: answer `status` with `message` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_error_bytes(status: int, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response (JSON error body, `connection: close`) as bytes."""
    body = json.dumps({"error": HTTPStatus(status).phrase, "message": message}).encode()
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "content-type: application/json",
             f"content-length: {len(body)}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of the module docstring (set by protocol_for)."""

    max_header_bytes = 32768
    max_headers = 100
    header_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True      # between requests or inside a request head
        self._head_bytes = 0      # bytes received since the head began (coarse: may include a body)
        self._head_exact = 0      # the head's URL and header bytes, counted by the parser
        self._header_count = 0
        self._head_timer: Any = None

    # ---------------------------------------------------------------- the head's deadline

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self._head_bytes:
            self._refuse(408, f"the request head was not complete within {self.header_timeout:g} s; send the "
                              "request line and headers at once")
        else:  # an idle connection: nothing was asked, so nothing to answer
            self.transport.close()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_head_timer()  # uvicorn's keep-alive timeout (shorter) usually closes it first

    # ---------------------------------------------------------------- counting the head

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # as uvicorn does (the server runs with ws="none")
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as err:
            refused = err.__context__ if isinstance(err.__context__, _Refused) else None
            if refused is not None:
                self._refuse(refused.status, refused.message)
            else:
                self.logger.info("refused an HTTP request the parser could not read: %s", err)
                self._refuse(400, "the request is not valid HTTP/1.1 (the request line, a header, or "
                                  "Content-Length could not be parsed); send a well-formed request")
            return
        if self._in_head and self._head_bytes > self.max_header_bytes and not self.transport.is_closing():
            self._refuse(431, self._too_large())  # a head still incomplete past the limit: read no more

    def _too_large(self) -> str:
        return (f"the request head (request line and headers) is over {self.max_header_bytes} bytes "
                "(--max-header-bytes); send fewer or shorter headers")

    def send_400_response(self, msg: str) -> None:  # uvicorn's plain-text 400, as JSON
        self._refuse(400, f"the request is not valid HTTP/1.1 ({msg}); send a well-formed request")

    def _refuse(self, status: int, message: str) -> None:
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self.transport.write(json_error_bytes(status, message))
            self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_exact = self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._head_exact += len(url)
        if self._head_exact > MAX_URL_BYTES:
            raise _Refused(414, f"the URL is over {MAX_URL_BYTES} bytes; the routes are /predict, /health, "
                                "/info, /metrics and /openapi.json")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._head_exact += len(name) + len(value) + 4
        if self._header_count > self.max_headers:
            raise _Refused(431, f"the request has more than {self.max_headers} header fields; send fewer")
        if self._head_exact > self.max_header_bytes:
            raise _Refused(431, self._too_large())
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0


def protocol_for(max_header_bytes: int, max_headers: int, header_timeout: float) -> type[LimitedHttpProtocol]:
    """A LimitedHttpProtocol class with these limits (uvicorn instantiates it per connection)."""
    return type("LimitedHttpProtocol", (LimitedHttpProtocol,), {
        "max_header_bytes": max_header_bytes, "max_headers": max_headers, "header_timeout": header_timeout})


def configure_default(max_header_bytes: int, max_headers: int, header_timeout: float) -> None:
    """Set LimitedHttpProtocol's own limits: a `--workers N` process gets the protocol by its
    import path (a class made by protocol_for cannot be sent to a spawned process)."""
    LimitedHttpProtocol.max_header_bytes = max_header_bytes
    LimitedHttpProtocol.max_headers = max_headers
    LimitedHttpProtocol.header_timeout = header_timeout
