"""The HTTP seam: bodies read within ``max_response_bytes`` (decompressed), and the real
transport's exact timeouts, no redirects and lazy session.

``read_body`` is fed in-memory chunks; ``AiohttpTransport`` talks to a server on loopback.
End-to-end reads through the client are in tests/test_transport.py.
"""

from __future__ import annotations

import asyncio
import gzip
import math
import zlib
from collections.abc import AsyncIterator, Mapping

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import magisterium_async as m
from magisterium_async._http import (
    ACCEPT_ENCODING,
    AiohttpTransport,
    HTTPRequest,
    read_body,
)


def answer(
    *chunks: bytes, headers: Mapping[str, str] | None = None, consumed: list[int] | None = None
) -> tuple[int, Mapping[str, str], AsyncIterator[bytes]]:
    """A raw answer whose body arrives as ``chunks``; ``consumed`` counts those read."""

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            if consumed is not None:
                consumed.append(len(chunk))
            yield chunk

    return 200, dict(headers or {}), stream()


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def test_a_plain_body_is_joined_from_its_chunks() -> None:
    body = await read_body(*answer(b"ab", b"", b"cd"), limit=4, what="search")
    assert body == b"abcd"


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),  # zlib-wrapped, as RFC 9110 says
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw, as some servers send
    ],
)
async def test_compressed_bodies_are_inflated(encoding: str, compress: object) -> None:
    plain = b'{"jsonrpc": "2.0"}' * 1000
    wire = compress(plain)  # type: ignore[operator]
    headers = {"Content-Encoding": f" {encoding.upper()} "}
    body = await read_body(*answer(*split(wire, 7), headers=headers), limit=len(plain), what="x")
    assert body == plain


async def test_concatenated_gzip_members_are_one_body() -> None:
    wire = gzip.compress(b"first ") + gzip.compress(b"second")
    headers = {"Content-Encoding": "gzip"}
    assert await read_body(*answer(wire, headers=headers), limit=100, what="x") == b"first second"


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    consumed: list[int] = []
    response = answer(b"x" * 10, headers={"Content-Length": "11"}, consumed=consumed)
    with pytest.raises(m.ResponseTooLargeError, match=r"fetch: .*max_response_bytes \(10 bytes\)"):
        await read_body(*response, limit=10, what="fetch")
    assert consumed == []


async def test_a_plain_body_over_the_limit_stops_at_the_limit() -> None:
    consumed: list[int] = []
    response = answer(*[b"x" * 4] * 100, consumed=consumed)
    with pytest.raises(m.ResponseTooLargeError) as caught:
        await read_body(*response, limit=10, what="search")
    assert sum(consumed) == 12  # the chunk that crossed the limit, and nothing after it
    error = caught.value
    assert isinstance(error, m.MagisteriumError)
    assert (error.limit, error.status_code) == (10, 200)


async def test_a_compression_bomb_is_stopped_at_the_decompressed_limit() -> None:
    bomb = gzip.compress(b"\0" * (16 * 1024 * 1024), compresslevel=9)  # ~16 KiB on the wire
    consumed: list[int] = []
    response = answer(*split(bomb, 1024), headers={"Content-Encoding": "gzip"}, consumed=consumed)
    with pytest.raises(m.ResponseTooLargeError, match="1048576 bytes"):
        await read_body(*response, limit=1024 * 1024, what="fetch")
    assert sum(consumed) < len(bomb)  # it stopped reading, not inflating all of it


async def test_an_encoding_not_asked_for_is_malformed() -> None:
    response = answer(b"...", headers={"Content-Encoding": "br"})
    with pytest.raises(m.MalformedResponseError, match="Content-Encoding 'br'") as caught:
        await read_body(*response, limit=100, what="search")
    assert ACCEPT_ENCODING in str(caught.value)


async def test_a_cut_or_corrupt_compressed_body_is_malformed() -> None:
    wire = gzip.compress(b"hello world" * 100)
    headers = {"Content-Encoding": "gzip"}
    with pytest.raises(m.MalformedResponseError, match="ends before the compressed stream"):
        await read_body(*answer(wire[: len(wire) // 2], headers=headers), limit=10_000, what="x")
    with pytest.raises(m.MalformedResponseError, match="gzip body cannot be decoded") as caught:
        await read_body(*answer(b"not gzip at all", headers=headers), limit=10_000, what="x")
    assert caught.value.__context__ is None  # no zlib traceback hanging off it


# -- the real transport ---------------------------------------------------------------------


def test_aiohttp_bounds_the_exchange_and_connecting_exactly() -> None:
    http = AiohttpTransport(max_concurrency=4, connect_timeout=10.0)
    timeout = http.timeout(5.5)
    assert (timeout.total, timeout.sock_connect, timeout.ceil_threshold) == (5.5, 5.5, math.inf)
    assert (http.timeout(30.0).total, http.timeout(30.0).sock_connect) == (30.0, 10.0)
    assert http.timeout(math.inf).total is None


async def test_a_request_past_its_timeout_is_cut_and_the_next_goes_through() -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(body=b"late")

    async def quick(request: web.Request) -> web.Response:
        return web.Response(body=b"ok")

    app = web.Application()
    app.router.add_get("/slow", slow)
    app.router.add_get("/quick", quick)
    async with TestServer(app, host="127.0.0.1") as server:
        http = AiohttpTransport(max_concurrency=4, connect_timeout=5.0)

        def get(path: str, timeout: float) -> HTTPRequest:
            return HTTPRequest("GET", str(server.make_url(path)), {}, None, timeout, 100, "x")

        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(asyncio.TimeoutError):
            await http.send(get("/slow", 0.1))
        assert loop.time() - started >= 0.1
        assert (await http.send(get("/quick", 5.0)))[2] == b"ok"
        release.set()
        await http.aclose()


async def test_the_session_opens_on_first_use_and_closes_once() -> None:
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b"hello"), headers={"Content-Encoding": "gzip"})

    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/hello"})

    app.router.add_get("/hello", hello)
    app.router.add_get("/moved", moved)
    async with TestServer(app, host="127.0.0.1") as server:
        http = AiohttpTransport(max_concurrency=4, connect_timeout=5.0)
        assert http._session is None

        def get(path: str) -> HTTPRequest:
            return HTTPRequest("GET", str(server.make_url(path)), {}, None, 5.0, 100, "x")

        status, _, body = await http.send(get("/hello"))
        assert (status, body) == (200, b"hello")
        assert http._session is not None
        status, headers, _ = await http.send(get("/moved"))
        assert (status, headers["Location"]) == (302, "/hello")  # not followed
        await http.aclose()
        await http.aclose()
        assert http._session is None


async def test_each_request_carries_its_own_headers_once() -> None:
    seen: list[dict[str, str]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(body=b"ok")

    app = web.Application()
    app.router.add_get("/", echo)
    common = {"Accept": "application/json", "User-Agent": "ours/1"}
    async with TestServer(app, host="127.0.0.1") as server:
        http = AiohttpTransport(max_concurrency=4, connect_timeout=5.0)

        def get(headers: Mapping[str, str]) -> HTTPRequest:
            return HTTPRequest("GET", str(server.make_url("/")), headers, None, 5.0, 100, "x")

        plain = dict(common)
        other = {**common, "Accept": "text/plain", "X-Extra": "1"}
        for headers in (plain, other, plain, other):  # each mapping twice, interleaved
            await http.send(get(headers))
        await http.aclose()
    picked = [(h["Accept"], h["User-Agent"], h.get("X-Extra")) for h in seen]
    assert picked == [
        ("application/json", "ours/1", None),
        ("text/plain", "ours/1", "1"),
        ("application/json", "ours/1", None),
        ("text/plain", "ours/1", "1"),
    ]
    assert all(list(h).count("Accept") == 1 for h in seen)
