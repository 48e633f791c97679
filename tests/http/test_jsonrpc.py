"""The transport: what goes on the wire, and how every answer is mapped."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import traceback
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._http import AiohttpTransport, check_base_url, decode_response
from magisterium_async._models import MAX_ANSWER_DEPTH, MAX_DEPTH
from tests.conftest import TOKEN, Reply, ScriptedServer, task_json
from tests.helpers.raw_server import RawServer, chain


def envelope(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/api/v1/a2a",
        "http://localhost/api",
        "http://[::1]:80/a2a",
        "https://www.magisterium.com/api/v1/a2a",
    ],
)
def test_safe_base_urls_are_accepted(url: str) -> None:
    assert check_base_url(url) == url


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://www.magisterium.com/api/v1/a2a", "clear"),
        ("http://10.0.0.1/a2a", "clear"),
        ("ftp://host/a2a", "http"),
        ("https:///nohost", "host"),
        ("https://user:pw@host/a2a", "credentials"),
    ],
)
def test_unsafe_base_urls_are_refused(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_base_url(url)


def test_result_decodes_to_a_task() -> None:
    task = decode_response("tasks/get", 7, 200, envelope(id=7, result=task_json()))
    assert task.id == "task-1"


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (200, b"not json", m.MalformedResponseError),
        (200, b"[1, 2]", m.MalformedResponseError),
        (200, envelope(id=8, result=task_json()), m.MalformedResponseError),  # wrong id
        (200, envelope(id="7", result=task_json()), m.MalformedResponseError),
        (200, envelope(id=7), m.MalformedResponseError),  # neither result nor error
        (200, envelope(id=7, result={"id": 1}), m.MalformedResponseError),
        (200, envelope(id=7, result=None), m.MalformedResponseError),
        (200, envelope(id=7, error="boom"), m.MalformedResponseError),
        (502, b"<html>Bad Gateway</html>", m.UnexpectedStatusError),
        (404, b"", m.UnexpectedStatusError),
        (301, b"", m.UnexpectedStatusError),
        (401, b"<html>", m.AuthenticationError),
        (403, b"", m.PlanRequiredError),
        (429, b"", m.RateLimitError),
    ],
)
def test_bad_answers_are_magisterium_errors(status: int, body: bytes, cls: type) -> None:
    with pytest.raises(cls) as info:
        decode_response("tasks/get", 7, status, body)
    if isinstance(info.value, m.APIResponseError):
        assert info.value.status_code == status
        assert info.value.body == body[:500].decode()


def test_error_objects_map_with_their_status() -> None:
    body = envelope(id=7, error={"code": -32003, "message": "slow down", "data": {"retryAfter": 9}})
    with pytest.raises(m.RateLimitError) as info:
        decode_response("message/send", 7, 429, body)
    assert (info.value.retry_after, info.value.status_code, info.value.message) == (
        9.0,
        429,
        "slow down",
    )


@pytest.mark.parametrize(
    ("header", "expected"), [("4", 4.0), ("0.5", 0.5), ("soon", None), ("inf", None), ("-2", None)]
)
def test_retry_after_header_fills_in_for_a_missing_body_value(
    header: str, expected: float | None
) -> None:
    body = envelope(id=7, error={"code": -32003, "message": "slow"})
    with pytest.raises(m.RateLimitError) as info:
        decode_response("message/send", 7, 429, body, {"Retry-After": header})
    assert info.value.retry_after == expected


async def test_request_envelope_and_headers(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.default = server.result(task_json())
    await client.get_task("task-1")
    await client.get_task("task-1")
    first, second = server.requests
    assert first["jsonrpc"] == "2.0" and first["method"] == "tasks/get"
    assert first["params"] == {"id": "task-1"}
    assert first["id"] != second["id"]
    headers = server.headers[0]
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Content-Type"] == "application/json"


async def test_message_send_envelope(client: m.AsyncMagisterium, server: ScriptedServer) -> None:
    server.default = server.result(task_json())
    await client.send_message("hello", skill_id="saint_lookup", context_id="ctx-9")
    await client.send_message("hello")
    sent, default_skill = (r["params"]["message"] for r in server.requests)
    assert sent["role"] == "user" and sent["kind"] == "message"
    assert sent["parts"] == [{"kind": "text", "text": "hello"}]
    assert sent["metadata"] == {"skillId": "saint_lookup"}
    assert sent["contextId"] == "ctx-9"
    assert len(sent["messageId"]) == 36 and sent["messageId"] != default_skill["messageId"]
    assert "metadata" not in default_skill and "contextId" not in default_skill


async def test_redirects_are_not_followed(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.reply(Reply(status=307, headers={"Location": "https://elsewhere.example/steal"}))
    with pytest.raises(m.UnexpectedStatusError) as info:
        await client.get_task("t")
    assert info.value.status_code == 307
    assert len(server.requests) == 1


async def test_connection_refused_is_api_connection_error(unused_tcp_port: int) -> None:
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=f"http://127.0.0.1:{unused_tcp_port}/a2a", max_retries=0
    ) as client:
        with pytest.raises(m.APIConnectionError) as info:
            await client.get_task("t")
    assert TOKEN not in str(info.value)


async def test_dropped_connection_is_api_connection_error(
    server: ScriptedServer, clock: Any
) -> None:
    server.reply(Reply(drop=True))
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, max_retries=0, clock=clock
    ) as client:
        with pytest.raises(m.APIConnectionError):
            await client.get_task("t")


async def test_timeout_is_api_timeout_error(server: ScriptedServer, clock: Any) -> None:
    server.reply(Reply(hang=True))
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, max_retries=0, timeout=0.2, clock=clock
    ) as client:
        with pytest.raises(m.APITimeoutError, match="timed out"):
            await client.get_task("t")


async def test_closed_client_refuses_calls(server: ScriptedServer) -> None:
    client = m.AsyncMagisterium(token=TOKEN, base_url=server.url)
    await client.aclose()
    assert client.is_closed
    with pytest.raises(m.ClientClosedError, match="closed"):
        await client.get_task("t")
    with pytest.raises(m.ClientClosedError, match="closed"):
        async with client:
            pass


async def test_session_is_opened_lazily_and_closed(server: ScriptedServer) -> None:
    server.default = server.result(task_json())
    client = m.AsyncMagisterium(token=TOKEN, base_url=server.url)
    assert client._caller.rpc.http._session is None
    async with client:
        await client.get_task("t")
        session = client._caller.rpc.http._session
        assert session is not None and not session.closed
    assert session.closed


async def test_concurrent_calls_get_their_own_answers(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.default = lambda req: Reply(
        body={"jsonrpc": "2.0", "id": req["id"], "result": task_json(task_id=req["params"]["id"])}
    )
    ids = [f"t{i}" for i in range(20)]
    tasks = await asyncio.gather(*(client.get_task(i) for i in ids))
    assert [t.id for t in tasks] == ids


def test_wrong_result_shapes_name_what_is_wrong() -> None:
    body = envelope(id=7, result={"kind": "task", "id": "t", "contextId": "c", "status": {}})
    with pytest.raises(m.MalformedResponseError, match=r"not a Task: .*state") as info:
        decode_response("tasks/get", 7, 200, body)
    assert info.value.status_code == 200 and info.value.body == body.decode()


def test_an_error_object_is_raised_with_its_status() -> None:
    body = envelope(id=7, error={"code": -32603, "message": "boom"})
    with pytest.raises(m.InternalServerError, match="boom") as info:
        decode_response("tasks/get", 7, 500, body)
    assert info.value.status_code == 500


def test_result_with_a_mismatched_id_is_refused_even_when_it_decodes() -> None:
    body = envelope(id=True, result=task_json())
    with pytest.raises(m.MalformedResponseError, match=r"got `bool` - at `\$.id`"):
        decode_response("tasks/get", 1, 200, body)


def test_the_client_s_connect_timeout_bounds_connecting() -> None:
    http = m.AsyncMagisterium(token=TOKEN, base_url="http://127.0.0.1:1/a2a")._caller.rpc.http
    assert isinstance(http, AiohttpTransport)
    assert http.timeout(120.0).sock_connect == m.DEFAULT_TIMEOUTS.connect
    assert http.timeout(1.0).sock_connect == 1.0


# Strict JSON-RPC 2.0 -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (json.dumps({"id": 7, "result": task_json()}).encode(), "missing required field `jsonrpc`"),
        (json.dumps({"jsonrpc": "1.0", "id": 7, "result": task_json()}).encode(), "'1.0'"),
        (envelope(id=7.0, result=task_json()), r"got `float` - at `\$.id`"),
        (envelope(id=None, result=task_json()), "does not match"),
        (
            envelope(id=7, result=task_json(), error={"code": -32603, "message": "x"}),
            "both result and error",
        ),
        (envelope(id=7, error={"code": "-32603", "message": "x"}), "Expected `int`, got `str`"),
        (envelope(id=7, error={"code": -32603, "message": 5}), "Expected `str`, got `int`"),
        (envelope(id=8, error={"code": -32001, "message": "gone"}), "does not match"),
    ],
)
def test_answers_outside_strict_json_rpc_are_malformed(body: bytes, words: str) -> None:
    with pytest.raises(m.MalformedResponseError, match=words) as info:
        decode_response("tasks/get", 7, 200, body)
    assert info.value.status_code == 200


def test_an_error_may_carry_a_null_id() -> None:
    # JSON-RPC 2.0: the id is null when the server could not read the request's.
    body = envelope(id=None, error={"code": -32600, "message": "Invalid request"})
    with pytest.raises(m.InvalidRequestError):
        decode_response("tasks/get", 7, 200, body)


def test_a_5xx_with_an_invalid_envelope_is_an_unexpected_status() -> None:
    body = envelope(id=7, result=task_json(), error={"code": -32603, "message": "boom"})
    with pytest.raises(m.UnexpectedStatusError) as info:
        decode_response("tasks/get", 7, 503, body)
    assert info.value.status_code == 503


@pytest.mark.parametrize("status", [401, 403, 429])
def test_status_bound_errors_are_raised_whatever_the_envelope(status: int) -> None:
    body = json.dumps({"id": 3.5, "error": {"code": -32003, "message": "x"}}).encode()
    error = {401: m.AuthenticationError, 403: m.PlanRequiredError, 429: m.RateLimitError}
    with pytest.raises(error[status]) as info:
        decode_response("message/send", 7, status, body)
    assert info.value.status_code == status


# Hostile bodies ------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


_RESULT = (
    '{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},'
    '"artifacts":[{"artifactId":"a","name":"n","parts":[{"kind":"data","data":{"v":VALUE}}]}]}'
)
_PLACES = {
    "error.data": '{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x","data":VALUE}}',
    "unknown field": '{"jsonrpc":"2.0","id":7,"extra":VALUE,"result":'
    + _RESULT.replace("VALUE", "1")
    + "}",
    "data part": '{"jsonrpc":"2.0","id":7,"result":' + _RESULT + "}",
    # A result that fails the fast decode (an odd status field) and takes the lenient path.
    "lenient": '{"jsonrpc":"2.0","id":7,"result":'
    + _RESULT.replace('"state":"completed"', '"state":"completed","timestamp":5')
    + "}",
}


def answer_with(where: str, value: str) -> bytes:
    """A success answer with the raw JSON ``value`` placed at ``where``."""
    return _PLACES[where].replace("VALUE", value).encode()


@pytest.mark.parametrize("where", ["error.data", "unknown field", "data part", "lenient"])
@pytest.mark.parametrize("depth", [1000, 20000])
def test_deep_nesting_anywhere_is_malformed_not_a_recursion_error(where: str, depth: int) -> None:
    with pytest.raises(m.MalformedResponseError, match="nested") as info:
        decode_response("tasks/get", 7, 200, answer_with(where, nested(depth)))
    assert len(info.value.body) <= 500


@pytest.mark.parametrize("where", ["error.data", "data part"])
def test_values_kept_for_the_user_nest_at_most_max_depth(where: str) -> None:
    # Deeper values would decode, but later code walking them (repr, re-encoding them into
    # a harvest's state) could hit the recursion limit.
    with pytest.raises(m.MalformedResponseError, match=f"more than {MAX_DEPTH} levels"):
        decode_response("tasks/get", 7, 200, answer_with(where, nested(MAX_DEPTH + 1)))


def test_nesting_within_the_bound_is_kept_and_unknown_fields_ignored() -> None:
    task = decode_response("tasks/get", 7, 200, answer_with("data part", nested(MAX_DEPTH - 1)))
    part = task.artifacts[0].parts[0]
    assert isinstance(part, m.DataPart) and isinstance(part.data["v"], list)
    # The envelope is one level: an unknown field may nest one less than the bound.
    decode_response("tasks/get", 7, 200, answer_with("unknown field", nested(MAX_ANSWER_DEPTH - 1)))


@pytest.mark.parametrize("where", ["unknown field", "error.data", "data part"])
def test_the_answer_depth_bound_is_exact_and_the_same_on_every_interpreter(where: str) -> None:
    # Read from the bytes before decoding: one level past the bound is refused whether or
    # not the decoder (whose recursion limit moved in 3.12) would have followed it.
    with pytest.raises(m.MalformedResponseError, match=f"more than {MAX_ANSWER_DEPTH} levels"):
        decode_response("tasks/get", 7, 200, answer_with(where, nested(MAX_ANSWER_DEPTH)))


def test_brackets_inside_strings_are_text_not_nesting() -> None:
    text = '"' + "[{" * 5000 + '\\" ]] \\\\ [' + '"'  # an escaped quote and backslash
    task = decode_response("tasks/get", 7, 200, answer_with("data part", text))
    part = task.artifacts[0].parts[0]
    assert isinstance(part, m.DataPart) and part.data["v"].startswith("[{[{")


@pytest.mark.parametrize(
    "value", ["1" + "0" * 400, "1" + "0" * 5000, "1e400", '"' + "9" * 5000 + '"']
)
def test_huge_numbers_anywhere_are_magisterium_errors_or_kept(value: str) -> None:
    for where in ("error.data", "unknown field", "data part"):
        try:
            decode_response("tasks/get", 7, 200, answer_with(where, value))
        except m.MagisteriumError as exc:
            str(exc)  # and its message can be built


def test_a_huge_error_code_is_kept_in_a_plain_json_rpc_error() -> None:
    body = envelope(id=7, error={"code": 10**400, "message": "odd"})
    with pytest.raises(m.JSONRPCError) as info:
        decode_response("tasks/get", 7, 200, body)
    assert info.value.code == 10**400 and "odd" in str(info.value)


# Errors never carry the token ----------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 2000 Nope\r\nContent-Length: 0\r\n\r\n",
        b"NOT-HTTP garbage\r\n\r\n",
        b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"jsonrpc"',
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd",
    ],
)
async def test_no_error_in_the_chain_shows_the_token(answer: bytes) -> None:
    async with (
        RawServer(answer) as url,
        m.AsyncMagisterium(token=TOKEN, base_url=url, max_retries=0) as client,
    ):
        with pytest.raises(m.MagisteriumError) as info:
            await client.get_task("t")
    errors = chain(info.value)
    assert all(isinstance(e, m.MagisteriumError) for e in errors)
    text = "".join(traceback.format_exception(info.value))
    assert TOKEN not in text
    assert all(TOKEN not in repr(e) and TOKEN not in str(e) for e in errors)


# Bounded bodies ------------------------------------------------------------------------


@pytest.fixture
async def aiohttp_loopback() -> AsyncIterator[Callable[[Any], Awaitable[str]]]:
    """Serve an aiohttp app on 127.0.0.1; the endpoint URL on it."""
    from aiohttp.test_utils import TestServer

    servers: list[TestServer] = []

    async def serve(app: Any) -> str:
        test_server = TestServer(app, host="127.0.0.1")
        await test_server.start_server()
        servers.append(test_server)
        return str(test_server.make_url("/api/v1/a2a"))

    try:
        yield serve
    finally:
        for test_server in servers:
            await test_server.close()


def gzip_bomb(size: int) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        zeros = bytes(1024 * 1024)
        for _ in range(size // len(zeros)):
            f.write(zeros)
    return out.getvalue()


async def streaming_app(body: bytes, *, repeat: int = 1, encoding: str | None = None) -> Any:
    from aiohttp import web

    async def serve(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse()
        response.content_type = "application/json"
        if encoding:
            response.headers["Content-Encoding"] = encoding
        await response.prepare(request)
        try:
            for _ in range(repeat):
                await response.write(body)
        except ConnectionError:
            pass
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", serve)
    return app


async def peak_of(call: Any) -> tuple[BaseException, int]:
    tracemalloc.start()
    try:
        with pytest.raises(m.MagisteriumError) as info:
            await call()
        return info.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_huge_body_stops_at_max_response_bytes(aiohttp_loopback: Any) -> None:
    limit = 1024 * 1024
    chunk = b"x" * (1024 * 1024)
    url = await aiohttp_loopback(await streaming_app(chunk, repeat=200))  # 200 MiB offered
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=url, max_retries=0, max_response_bytes=limit
    ) as client:
        error, peak = await peak_of(lambda: client.get_task("t"))
    assert isinstance(error, m.ResponseTooLargeError)
    assert error.limit == limit and "max_response_bytes" in str(error)
    assert peak < 8 * limit


async def test_a_gzip_bomb_stops_at_max_response_bytes(aiohttp_loopback: Any) -> None:
    bomb = gzip_bomb(256 * 1024 * 1024)
    assert len(bomb) < 512 * 1024
    url = await aiohttp_loopback(await streaming_app(bomb, encoding="gzip"))
    limit = 1024 * 1024
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=url, max_retries=0, max_response_bytes=limit
    ) as client:
        error, peak = await peak_of(lambda: client.get_task("t"))
        card_error, card_peak = await peak_of(client.agent_card)
    assert isinstance(error, m.ResponseTooLargeError) and error.status_code == 200
    assert isinstance(card_error, m.ResponseTooLargeError)
    assert max(peak, card_peak) < 8 * limit


async def test_the_default_cap_is_64_mib(aiohttp_loopback: Any) -> None:
    url = await aiohttp_loopback(await streaming_app(gzip_bomb(80 * 1024 * 1024), encoding="gzip"))
    async with m.AsyncMagisterium(token=TOKEN, base_url=url, max_retries=0) as client:
        assert client.max_response_bytes == m.DEFAULT_MAX_RESPONSE_BYTES == 64 * 1024 * 1024
        with pytest.raises(m.ResponseTooLargeError, match="67108864 bytes"):
            await client.get_task("t")


async def test_compressed_answers_within_the_cap_are_inflated(aiohttp_loopback: Any) -> None:
    from aiohttp import web

    async def serve(request: web.Request) -> web.StreamResponse:
        req = await request.json()
        body = json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": task_json()}).encode()
        return web.Response(
            body=gzip.compress(body),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )

    app = web.Application()
    app.router.add_post("/{tail:.*}", serve)
    url = await aiohttp_loopback(app)
    async with m.AsyncMagisterium(token=TOKEN, base_url=url, max_retries=0) as client:
        assert (await client.get_task("t")).id == "task-1"


# Exact timeouts --------------------------------------------------------------------


async def test_timeouts_are_not_rounded_up_to_whole_seconds(server: ScriptedServer) -> None:
    # aiohttp rounds deadlines of 5 s or more up to the next second unless told not to.
    loop = asyncio.get_running_loop()
    whens: list[float] = []
    real_call_at = loop.call_at

    def call_at(when: float, *args: Any, **kwargs: Any) -> Any:
        whens.append(when)
        return real_call_at(when, *args, **kwargs)

    start = loop.time()
    timeout = 5.0 + (1.1 - start % 1.0) % 1.0  # start + timeout ends in .1: ceil adds 0.9 s
    arrived = asyncio.Event()
    server.reply(lambda request: (arrived.set(), Reply(hang=True))[1])
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, timeout=timeout, max_retries=0
    ) as client:
        loop.call_at = call_at  # type: ignore[method-assign]
        try:
            call = asyncio.ensure_future(client.get_task("t"))
            await arrived.wait()
        finally:
            loop.call_at = real_call_at  # type: ignore[method-assign]
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    deadlines = [w - start for w in whens if 4.0 < w - start < 60.0]  # not keep-alive timers
    assert deadlines, whens
    assert all(d < timeout + 0.5 for d in deadlines), (timeout, deadlines)
