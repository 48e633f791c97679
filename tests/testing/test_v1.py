"""The emulator speaking A2A 1.0 (``EmulatorConfig(protocol="1.0")``), over loopback HTTP."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest

from magisterium_async.testing import BundledCorpus, EmulatorConfig, RateLimitConfig

from .conftest import StartWire
from .helpers import Answer, Wire

V1 = {"A2A-Version": "1.0"}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_ids = itertools.count(1)


def message(*parts: dict[str, Any], skill: str | None = None, **fields: Any) -> dict[str, Any]:
    """A 1.0 user message (no ``kind``; parts by field; ``ROLE_USER``)."""
    msg: dict[str, Any] = {"messageId": f"v1-{next(_ids)}", "role": "ROLE_USER"}
    msg["parts"] = list(parts)
    if skill is not None:
        msg["metadata"] = {"skillId": skill}
    msg.update(fields)
    return msg


async def send(
    wire: Wire, *parts: dict[str, Any], skill: str | None = None, **params: Any
) -> Answer:
    return await wire.call(
        "SendMessage", {"message": message(*parts, skill=skill), **params}, headers=V1
    )


def info(error: dict[str, Any]) -> dict[str, Any]:
    """The ``ErrorInfo`` of a 1.0 error (``data`` is an array of typed details)."""
    assert isinstance(error["data"], list), error
    (found,) = [d for d in error["data"] if d["@type"] == ERROR_INFO]
    return found


@pytest.fixture
async def v1(start_wire: StartWire) -> Wire:
    return await start_wire(protocol="1.0", tokens={"emu-token": "pro", "other": "pro"})


async def test_send_message_wraps_the_task_in_1_0_shapes(v1: Wire) -> None:
    answer = await send(v1, {"text": "What is grace?"})

    assert answer.status == 200
    (key,) = answer.result
    assert key == "task"
    task = answer.result["task"]
    assert set(task) == {"id", "contextId", "status", "artifacts", "history"}
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    (artifact,) = task["artifacts"]
    assert artifact["name"] == "catholic_qa_response"  # the default skill
    assert "text" in artifact["parts"][0]
    assert [set(p) & {"text", "data", "raw", "url"} for p in artifact["parts"]][1:] == [
        {"data"},
        {"data"},
    ]
    assert "kind" not in str(task)
    user, agent = task["history"]
    assert (user["role"], agent["role"]) == ("ROLE_USER", "ROLE_AGENT")
    assert user["parts"] == [{"text": "What is grace?"}]
    assert v1.emu.stats.count(method="message/send", outcome="ok") == 1


async def test_document_fetch_and_file_parts(v1: Wire) -> None:
    document = next(iter(BundledCorpus()))
    found = await send(v1, {"data": {"id": document.id}}, skill="document_fetch")
    text, data = found.result["task"]["artifacts"][0]["parts"]
    assert set(text) == {"text"} and data["data"]["id"] == document.id

    raw = base64.b64encode(b"%PDF").decode()
    file_parts = [
        {"text": "grace"},
        {"raw": raw, "mediaType": "application/pdf", "filename": "a.pdf"},
        {"url": "https://example.org/b.txt", "mediaType": "text/plain"},
    ]
    answer = await send(v1, *file_parts, skill="document_search")
    assert answer.result["task"]["history"][0]["parts"] == file_parts


async def test_get_task_and_history_length(v1: Wire) -> None:
    task = (await send(v1, {"text": "grace"}, skill="document_search")).result["task"]

    got = await v1.call("GetTask", {"id": task["id"]}, headers=V1)
    assert got.result == task
    short = await v1.call("GetTask", {"id": task["id"], "historyLength": 1}, headers=V1)
    assert short.result["history"] == task["history"][-1:]
    trimmed = await send(
        v1, {"text": "grace"}, skill="document_search", configuration={"historyLength": 0}
    )
    assert trimmed.result["task"]["history"] == []


async def test_errors_keep_the_service_codes_with_error_info(v1: Wire) -> None:
    task = (await send(v1, {"text": "grace"}, skill="document_search")).result["task"]

    cancel = (await v1.call("CancelTask", {"id": task["id"]}, headers=V1)).error
    assert (cancel["code"], cancel["message"]) == (-32602, "Invalid state transition")
    assert info(cancel)["reason"] == "INVALID_PARAMS"
    assert info(cancel)["metadata"] == {"state": "TASK_STATE_COMPLETED"}

    missing = (await v1.call("GetTask", {"id": "nope"}, headers=V1)).error
    assert missing["code"] == -32001
    assert info(missing) == {
        "@type": ERROR_INFO,
        "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org",
        "metadata": {"id": "nope"},
    }
    skill = (await send(v1, {"text": "x"}, skill="no_such_skill")).error
    assert skill["code"] == -32002  # the service's "skill not found", not "not cancelable"
    assert (info(skill)["reason"], info(skill)["domain"]) == ("SKILL_NOT_FOUND", "magisterium.com")
    assert info(skill)["metadata"] == {"skillId": "no_such_skill"}
    card = (await v1.call("GetExtendedAgentCard", {}, headers=V1)).error
    assert card["code"] == -32007


@pytest.mark.parametrize(
    ("headers", "version"),
    [({}, "0.3"), ({"A2A-Version": ""}, "0.3"), ({"A2A-Version": "0.3"}, "0.3")],
)
async def test_a_request_without_version_1_is_refused(
    v1: Wire, headers: dict[str, str], version: str
) -> None:
    sent = {"message": message({"text": "grace"}, skill="document_search")}
    error = (await v1.call("SendMessage", sent, headers=headers)).error
    assert error["code"] == -32009
    assert info(error)["reason"] == "VERSION_NOT_SUPPORTED"
    assert info(error)["metadata"] == {"version": version, "supported": "1.0"}
    assert v1.emu.arrivals[-1].admitted is False  # refused before the quota


async def test_any_1_x_version_is_served(v1: Wire) -> None:
    sent = {"message": message({"text": "grace"}, skill="document_search")}
    for version in ("1.0", "1.0.1", "1", "1.1"):
        answer = await v1.call("SendMessage", sent, headers={"A2A-Version": version})
        assert answer.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_each_dialect_knows_only_its_own_method_names(
    v1: Wire, start_wire: StartWire
) -> None:
    for method in ("message/send", "tasks/get", "tasks/cancel", "SendStreamingMessage"):
        error = (await v1.call(method, {"id": "x"}, headers=V1)).error
        assert error["code"] == -32601, method
        assert info(error)["reason"] == "METHOD_NOT_FOUND"
    service = await start_wire()
    for method in ("SendMessage", "GetTask", "CancelTask", "ListTasks"):
        error = (await service.call(method, {"id": "x"}, headers=V1)).error
        assert (error["code"], error["data"]) == (-32601, {"method": method})


@pytest.mark.parametrize(
    ("part", "detail"),
    [
        ({"text": "a", "data": {}}, "exactly one of text, raw, url or data"),
        ({"kind": "text", "value": "a"}, "exactly one of text, raw, url or data"),
        ({"raw": "not base64!"}, "raw must be base64"),
        ({"data": [1, 2]}, "data must be an object"),
        ({"text": "a", "mediaType": 3}, "mediaType must be a string"),
    ],
)
async def test_invalid_parts(v1: Wire, part: dict[str, Any], detail: str) -> None:
    error = (await send(v1, part, skill="document_search")).error
    assert error["code"] == -32602
    assert detail in info(error)["metadata"]["detail"]


async def test_a_0_3_message_is_invalid_params(v1: Wire) -> None:
    sent = {"role": "user", "kind": "message", "messageId": "m", "parts": [{"text": "a"}]}
    error = (await v1.call("SendMessage", {"message": sent}, headers=V1)).error
    assert error["code"] == -32602
    assert info(error)["metadata"]["detail"] == 'message.role must be "ROLE_USER"'


async def test_http_status_errors_in_1_0_shape(start_wire: StartWire) -> None:
    wire = await start_wire(
        protocol="1.0",
        tokens={"emu-token": "pro", "free": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=1, period=3600),
    )
    await send(wire, {"text": "grace"}, skill="document_search")
    limited = await send(wire, {"text": "grace"}, skill="document_search")
    assert limited.status == 429
    assert limited.error["code"] == -32003
    assert info(limited.error)["reason"] == "RATE_LIMIT_EXCEEDED"
    seconds = int(info(limited.error)["metadata"]["retryAfter"])
    assert seconds > 0
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"} in (
        limited.error["data"]
    )
    sent = {"message": message({"text": "grace"})}
    for token, status, code, reason in (
        ("wrong", 401, -32004, "UNAUTHENTICATED"),
        ("free", 403, -32005, "PAID_PLAN_REQUIRED"),
    ):
        answer = await wire.call("SendMessage", sent, token=token, headers=V1)
        assert (answer.status, answer.error["code"]) == (status, code)
        assert info(answer.error)["reason"] == reason


async def test_list_tasks_pages_newest_first_and_only_the_callers(v1: Wire) -> None:
    ids = []
    for query in ("a", "b", "c"):
        ids.append((await send(v1, {"text": query}, skill="document_search")).result["task"]["id"])
    other = await v1.call(
        "SendMessage",
        {"message": message({"text": "d"}, skill="document_search")},
        token="other",
        headers=V1,
    )
    assert "task" in other.result

    first = (await v1.call("ListTasks", {"pageSize": 2}, headers=V1)).result
    assert [t["id"] for t in first["tasks"]] == [ids[2], ids[1]]
    assert (first["pageSize"], first["totalSize"]) == (2, 3)
    assert all("artifacts" not in t for t in first["tasks"])  # unless includeArtifacts
    token = first["nextPageToken"]
    assert token
    rest = (
        await v1.call(
            "ListTasks",
            {"pageSize": 2, "pageToken": token, "includeArtifacts": True, "historyLength": 1},
            headers=V1,
        )
    ).result
    assert [t["id"] for t in rest["tasks"]] == [ids[0]]
    assert rest["nextPageToken"] == ""
    assert rest["tasks"][0]["artifacts"] and len(rest["tasks"][0]["history"]) == 1


async def test_list_tasks_filters(v1: Wire) -> None:
    done = (await send(v1, {"text": "a"}, skill="document_search")).result["task"]
    failed = (await send(v1, {"text": "__fail__: no"}, skill="document_search")).result["task"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"

    async def listed(**params: Any) -> list[str]:
        result = (await v1.call("ListTasks", params, headers=V1)).result
        return [task["id"] for task in result["tasks"]]

    assert await listed(status="TASK_STATE_FAILED") == [failed["id"]]
    assert await listed(contextId=done["contextId"]) == [done["id"]]
    assert await listed(statusTimestampAfter="2000-01-01T00:00:00Z") == [failed["id"], done["id"]]
    assert await listed(statusTimestampAfter="2999-01-01T00:00:00+00:00") == []
    for params in ({"pageSize": 0}, {"pageSize": 101}, {"pageToken": "x"}, {"status": "done"}):
        error = (await v1.call("ListTasks", params, headers=V1)).error
        assert error["code"] == -32602, params


async def test_the_service_dialect_has_no_list(wire: Wire) -> None:
    assert EmulatorConfig().protocol == "0.2.6"
    error = (await wire.call("tasks/list", {})).error
    assert error["code"] == -32601


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown protocol '2\.0'"):
        EmulatorConfig(protocol="2.0")  # type: ignore[arg-type]


async def test_cors_preflight_allows_the_version_header(v1: Wire) -> None:
    async with v1.session.options(
        v1.emu.base_url,
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
    ) as response:
        assert response.status == 204
        allowed = {h.strip() for h in response.headers["Access-Control-Allow-Headers"].split(",")}
    assert allowed == {"Content-Type", "Authorization", "A2A-Version", "A2A-Extensions"}
