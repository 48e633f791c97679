"""``MockTransport``: the network swapped for a function, at the client's HTTP seam.

Everything above the seam runs as in production (the JSON-RPC envelope, size limits,
decompression, error mapping, retries, rate-limit pools), so unit tests of decoding and
errors need no socket::

    def handler(request: MockRequest) -> MockResponse:
        return MockResponse.result(request, {"kind": "task", ...})

    client = AsyncMagisterium(token="t", transport=MockTransport(handler))
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from multidict import CIMultiDict, CIMultiDictProxy

from magisterium_async._http._base import HTTPRequest, read_body

__all__ = ["MockRequest", "MockResponse", "MockTransport"]

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class MockRequest:
    """One request the client sent: ``method`` (``"POST"`` or ``"GET"``), ``url``,
    ``headers`` and the raw ``content``; :attr:`json` is the decoded body."""

    method: str
    url: str
    headers: Mapping[str, str]
    content: bytes

    @property
    def json(self) -> Any:
        """The body as JSON (a JSON-RPC request for ``POST``), or ``None`` without one."""
        return json.loads(self.content) if self.content else None

    def __repr__(self) -> str:  # the headers hold the bearer token: never shown
        return f"MockRequest({self.method} {self.url}, {len(self.content)} bytes)"


@dataclass(frozen=True)
class MockResponse:
    """The answer a handler gives: a status, headers and a body.

    ``json`` is encoded as the body when it is not ``None``; otherwise ``content`` (bytes,
    or text as UTF-8; ``content="null"`` for a JSON null) is sent as is.
    ``Content-Encoding`` in ``headers`` is honoured, so a gzip body is inflated (and
    bounded) as it would be from a socket.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes | str = b""
    json: Any = None

    @classmethod
    def result(cls, request: MockRequest, result: Any, **kwargs: Any) -> MockResponse:
        """A JSON-RPC success answering ``request`` (its id echoed) with ``result``."""
        return cls(json={"jsonrpc": "2.0", "id": _id(request), "result": result}, **kwargs)

    @classmethod
    def error(
        cls,
        request: MockRequest,
        code: int,
        message: str,
        data: Any = None,
        *,
        status: int = 200,
        **kwargs: Any,
    ) -> MockResponse:
        """A JSON-RPC error answering ``request``, with the HTTP ``status`` given."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        body = {"jsonrpc": "2.0", "id": _id(request), "error": error}
        return cls(status=status, json=body, **kwargs)

    def body(self) -> bytes:
        """The body's bytes."""
        if self.json is not None:
            return msgspec.json.encode(self.json)
        return self.content.encode() if isinstance(self.content, str) else self.content


def _id(request: MockRequest) -> Any:
    body = request.json
    return body.get("id") if isinstance(body, dict) else None


Handler = Callable[[MockRequest], MockResponse | Awaitable[MockResponse]]


class MockTransport:
    """An HTTP transport answering every request with ``handler(request)``.

    ``handler`` may be sync or async. An async one that waits (``await clock.sleep(60)``)
    is cut off at the call's timeout on the client's clock, as a slow server would be,
    and raises :class:`APITimeoutError`; one that raises ``OSError`` (``ConnectionError``)
    is a network failure (:class:`APIConnectionError`). Any other exception it raises
    reaches the test as is. :attr:`requests` records every request, in order.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[MockRequest] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"MockTransport({len(self.requests)} requests)"

    async def send(self, request: HTTPRequest) -> tuple[int, Mapping[str, str], bytes]:
        """Record the request and answer it from the handler; the body is read as the
        network's would be (size limit, decompression). The client cuts the exchange off
        at the request's timeout, on its own clock."""
        recorded = MockRequest(
            request.method, request.url, dict(request.headers), request.body or b""
        )
        self.requests.append(recorded)
        response = await self._answer(recorded)
        raw_headers = CIMultiDictProxy(CIMultiDict(response.headers))
        status, chunks = response.status, _chunks(response.body())
        body = await read_body(status, raw_headers, chunks, limit=request.limit, what=request.what)
        return status, raw_headers, body

    async def _answer(self, request: MockRequest) -> MockResponse:
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, MockResponse):
            raise TypeError(f"the handler must return a MockResponse, not {type(answer).__name__}")
        return answer

    async def aclose(self) -> None:
        """Mark the transport closed (nothing to release)."""
        self.closed = True


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), _CHUNK):
        yield body[start : start + _CHUNK]
