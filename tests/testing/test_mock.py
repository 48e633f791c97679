"""MockTransport: the client's HTTP seam answered from a function, with no socket."""

from __future__ import annotations

import asyncio
import gzip
import math
import zlib
from collections.abc import Callable
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock

TOKEN = "mock-token-0123456789"
TASK = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}}


def client_for(handler: Callable[[MockRequest], Any], **kwargs: Any) -> m.AsyncMagisterium:
    kwargs.setdefault("max_retries", 0)
    return m.AsyncMagisterium(
        token=TOKEN,
        base_url="https://a2a.example/api/v1/a2a",
        rate_limits=m.RateLimits.unlimited(),
        transport=MockTransport(handler),
        **kwargs,
    )


def transport_of(client: m.AsyncMagisterium) -> MockTransport:
    http = client._caller.rpc.http
    assert isinstance(http, MockTransport)
    return http


async def test_requests_are_recorded_and_answered() -> None:
    async with client_for(lambda request: MockResponse.result(request, TASK)) as client:
        task = await client.get_task("t-1")
    assert task.id == "t-1"
    (request,) = transport_of(client).requests
    assert (request.method, request.url) == ("POST", "https://a2a.example/api/v1/a2a")
    assert request.json["method"] == "tasks/get" and request.json["params"] == {"id": "t-1"}
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(request) and TOKEN not in repr(transport_of(client))
    assert transport_of(client).closed


async def test_async_handlers_and_json_rpc_errors() -> None:
    async def handler(request: MockRequest) -> MockResponse:
        await asyncio.sleep(0)
        return MockResponse.error(request, -32001, "Task not found")

    async with client_for(handler) as client:
        with pytest.raises(m.TaskNotFoundError, match="Task not found"):
            await client.get_task("gone")


async def test_agent_card_is_a_get_without_the_token() -> None:
    card = {"name": "Mock agent"}
    async with client_for(lambda request: MockResponse(json=card)) as client:
        assert (await client.agent_card()).name == "Mock agent"
    (request,) = transport_of(client).requests
    assert request.method == "GET" and request.url.endswith("/.well-known/agent.json")
    assert "Authorization" not in request.headers and request.content == b""


@pytest.mark.parametrize(
    ("encode", "encoding"),
    [
        (gzip.compress, "gzip"),
        (zlib.compress, "deflate"),
        (lambda body: zlib.compress(body)[2:-4], "deflate"),  # raw deflate, as some servers send
        (lambda body: gzip.compress(body[:10]) + gzip.compress(body[10:]), "gzip"),  # 2 members
    ],
)
async def test_compressed_bodies_are_inflated(
    encode: Callable[[bytes], bytes], encoding: str
) -> None:
    def handler(request: MockRequest) -> MockResponse:
        body = MockResponse.result(request, TASK).body()
        return MockResponse(content=encode(body), headers={"content-encoding": encoding})

    async with client_for(handler) as client:
        assert (await client.get_task("t-1")).id == "t-1"


@pytest.mark.parametrize(
    ("headers", "content", "error", "words"),
    [
        ({"Content-Encoding": "br"}, b"\x00", m.MalformedResponseError, "'br'"),
        ({"Content-Encoding": "gzip"}, b"not gzip at all", m.MalformedResponseError, "gzip body"),
        (
            {"Content-Encoding": "gzip"},
            gzip.compress(b"{}" * 100)[:20],
            m.MalformedResponseError,
            "ends before",
        ),
        ({"Content-Length": "2000"}, b"", m.ResponseTooLargeError, "1000 bytes"),
        ({}, b" " * 1001, m.ResponseTooLargeError, "max_response_bytes"),
        (
            {"Content-Encoding": "gzip"},
            gzip.compress(b" " * 100_000),
            m.ResponseTooLargeError,
            "1000",
        ),
    ],
)
async def test_bodies_outside_the_bounds(
    headers: dict[str, str], content: bytes, error: type, words: str
) -> None:
    handler = lambda request: MockResponse(content=content, headers=headers)  # noqa: E731
    async with client_for(handler, max_response_bytes=1000) as client:
        with pytest.raises(error, match=words) as info:
            await client.get_task("t")
    assert info.value.status_code == 200


async def test_os_errors_are_connection_errors_and_other_errors_reach_the_test() -> None:
    def refuse(request: MockRequest) -> MockResponse:
        raise ConnectionRefusedError("refused")

    async with client_for(refuse, max_retries=1) as client:
        with pytest.raises(m.APIConnectionError, match="ConnectionRefusedError: refused"):
            await client.get_task("t")
    assert len(transport_of(client).requests) == 2

    def buggy(request: MockRequest) -> MockResponse:
        raise KeyError("a bug in the test")

    async with client_for(buggy) as client:
        with pytest.raises(KeyError):
            await client.get_task("t")
    async with client_for(lambda request: {"not": "a response"}) as client:
        with pytest.raises(TypeError, match="MockResponse"):
            await client.get_task("t")


async def test_a_slow_handler_times_out_on_the_clients_clock() -> None:
    clock = VirtualClock()

    async def slow(request: MockRequest) -> MockResponse:
        await clock.sleep(math.inf)
        raise AssertionError("unreachable")

    async with client_for(slow, clock=clock, timeout=7.5) as client:
        call = asyncio.ensure_future(client.get_task("t"))
        await clock.run_until_idle()
        with pytest.raises(m.APITimeoutError, match=r"7\.5 s"):
            await call
    assert clock.now() == 7.5
