"""The transport: what goes on the wire, and how every answer is mapped."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._transport import check_base_url, decode_response
from tests.conftest import TOKEN, Reply, ScriptedServer, task_json


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
        assert info.value.status == status
        assert info.value.body == body[:500].decode()


def test_error_objects_map_with_their_status() -> None:
    body = envelope(id=7, error={"code": -32003, "message": "slow down", "data": {"retryAfter": 9}})
    with pytest.raises(m.RateLimitError) as info:
        decode_response("message/send", 7, 429, body)
    assert (info.value.retry_after, info.value.status, info.value.message) == (
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
    assert info.value.status == 307
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
    assert client._transport._session is None
    async with client:
        await client.get_task("t")
        session = client._transport._session
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
    assert info.value.status == 200 and info.value.body == body.decode()


def test_error_object_wins_over_a_malformed_result() -> None:
    body = envelope(id=7, result={"id": 1}, error={"code": -32603, "message": "boom"})
    with pytest.raises(m.InternalServerError, match="boom") as info:
        decode_response("tasks/get", 7, 500, body)
    assert info.value.status == 500


def test_result_with_a_mismatched_id_is_refused_even_when_it_decodes() -> None:
    body = envelope(id=True, result=task_json())
    with pytest.raises(m.MalformedResponseError, match="does not match"):
        decode_response("tasks/get", 1, 200, body)


def test_client_timeouts_are_built_once_per_value() -> None:
    transport = m.AsyncMagisterium(token=TOKEN, base_url="http://127.0.0.1:1/a2a")._transport
    assert transport._timeout(30.0) is transport._timeout(30.0)
    assert transport._timeout(30.0) is not transport._timeout(120.0)
    assert transport._timeout(1.0).sock_connect == 1.0
