"""The official a2a-sdk clients against our emulator: does each take every answer it gives?

The emulator runs in this process on 127.0.0.1; ``a2a03_client.py`` runs under the a2a-sdk
0.3 virtualenv, resolves the agent card, then makes each call through
``ClientFactory``/``JsonRpcTransport`` over an httpx client that sends our bearer token, and
reports how every answer was taken (see its docstring). ``a2a13_client.py`` does the same
with a2a-sdk 1.3, whose client speaks A2A 1.0 to a 1.0 card and 0.3 to a 0.3 one, and
refuses any older card -- the service's own (0.2.6) among them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from magisterium_async.testing import (
    BundledCorpus,
    Emulator,
    EmulatorConfig,
    Fault,
    RateLimitConfig,
)

from .conftest import HERE
from .plans import every_skill_and_task_method, plan_of, run_plan, text

pytestmark = pytest.mark.interop


def _message(skill: str | None, parts: tuple[dict[str, Any], ...], role: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "kind": "message", "parts": list(parts)}
    if skill is not None:
        message["metadata"] = {"skillId": skill}
    return message


def send(
    label: str, skill: str | None, *parts: dict[str, Any], role: str = "user"
) -> dict[str, Any]:
    return {"label": label, "call": "send", "message": _message(skill, parts, role)}


def raw(label: str, body: str) -> dict[str, Any]:
    return {"label": label, "call": "raw", "body": body}


async def run_a2a_client(
    python: Path,
    emulator: Emulator,
    steps: list[dict[str, Any]],
    token: str | None = None,
    *,
    script: str = "a2a03_client.py",
) -> dict[str, Any]:
    """Run the steps through an a2a-sdk client (0.3's unless ``script`` names 1.3's)."""
    plan = plan_of(emulator, steps, token)
    client = [str(python), str(HERE / script)]
    report: dict[str, Any] = await run_plan(client, HERE, plan)
    return report


def task_of(outcome: dict[str, Any]) -> dict[str, Any]:
    """The task the a2a client parsed, or a failure showing what it did instead."""
    assert outcome["kind"] == "task", outcome
    task: dict[str, Any] = outcome["task"]
    return task


def artifact_of(outcome: dict[str, Any], name: str) -> dict[str, Any]:
    task = task_of(outcome)
    assert task["status"]["state"] == "completed", task["status"]
    artifacts: list[dict[str, Any]] = task["artifacts"]
    (artifact,) = artifacts
    assert artifact["name"] == name
    return artifact


def jsonrpc_error_of(outcome: dict[str, Any]) -> dict[str, Any]:
    """The error the a2a client parsed from a JSON-RPC error response."""
    assert outcome["kind"] == "jsonrpc_error", outcome
    return outcome


async def test_every_skill_and_task_method(a2a03_python: Path) -> None:
    document = next(iter(BundledCorpus()))
    steps = [
        *every_skill_and_task_method(send, document),
        send("agent_role", "document_search", text("x"), role="agent"),
        raw("not_json", "{not json"),
        raw("no_version", '{"id": 1, "method": "tasks/get", "params": {"id": "x"}}'),
        raw("no_method", '{"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": {}}'),
    ]
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        report = await run_a2a_client(a2a03_python, emulator, steps)
    outcomes = report["steps"]

    card = report["card"]
    assert card["kind"] == "card", card
    assert {s["id"] for s in card["card"]["skills"]} >= {"catholic_qa", "document_search"}

    for label in ("qa", "qa_named"):
        artifact = artifact_of(outcomes[label], "catholic_qa_response")
        assert artifact["parts"][0]["kind"] == "text"
    results = artifact_of(outcomes["search"], "search_results")["parts"][0]["data"]["results"]
    assert results and {"id", "url", "title"} <= set(results[0])
    for label in ("fetch", "fetch_text"):
        parts = artifact_of(outcomes[label], "document")["parts"]
        assert [p["kind"] for p in parts] == ["text", "data"]
        assert parts[1]["data"]["id"] == document.id
    assert artifact_of(outcomes["fetch_missing"], "document")["parts"] == [
        {"kind": "text", "text": "Document not found."}
    ]
    assert artifact_of(outcomes["readings"], "mass_readings")["parts"][0]["kind"] == "text"
    assert artifact_of(outcomes["saints"], "martyrology")["parts"][0]["kind"] == "text"
    failed = task_of(outcomes["failed"])
    assert failed["status"]["state"] == "failed"
    assert failed["status"]["message"]["parts"][0]["text"] == "the skill raised"

    got = task_of(outcomes["get_search"])
    assert got["id"] == task_of(outcomes["search"])["id"]
    assert got["artifacts"] == task_of(outcomes["search"])["artifacts"]
    assert task_of(outcomes["get_failed"])["status"]["state"] == "failed"

    # The errors: parsed as JSON-RPC error responses, not refused by validation.
    cancel_error = jsonrpc_error_of(outcomes["cancel_search"])
    assert (cancel_error["code"], cancel_error["message"]) == (-32602, "Invalid state transition")
    for label in ("get_unknown", "cancel_unknown"):
        error = jsonrpc_error_of(outcomes[label])
        assert error["code"] == -32001
    skill_error = jsonrpc_error_of(outcomes["unknown_skill"])
    assert skill_error["code"] == -32002
    assert skill_error["data"] == {"skillId": "no_such_skill"}
    role_error = jsonrpc_error_of(outcomes["agent_role"])
    assert role_error["code"] == -32602
    for label, code, request_id in (
        ("not_json", -32700, None),
        ("no_version", -32600, 1),
        ("no_method", -32601, 2),
    ):
        error = jsonrpc_error_of(outcomes[label])
        assert (error["code"], error["id"], error["status"]) == (code, request_id, 200)


async def test_http_status_errors(a2a03_python: Path) -> None:
    # -32003, -32004 and -32005 come with HTTP 429, 401 and 403. a2a-sdk 0.3 raises
    # A2AClientHTTPError on the status without reading the body; the body itself still
    # parses as a JSON-RPC error response with the service's code.
    config = EmulatorConfig(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=1, period=3600),
    )
    async with Emulator(config) as emulator:
        emulator.script(Fault.internal_error(), skill="catholic_qa")
        report = await run_a2a_client(
            a2a03_python,
            emulator,
            [
                send("first", "document_search", text("human work")),
                send("limited", "document_search", text("human work")),
                send("internal", "catholic_qa", text("What is grace?")),
            ],
        )
        bad = await run_a2a_client(
            a2a03_python, emulator, [send("bad", "document_search", text("x"))], "wrong-token"
        )
        free = await run_a2a_client(
            a2a03_python, emulator, [send("free", "document_search", text("x"))], "free-token"
        )

    artifact_of(report["steps"]["first"], "search_results")
    assert jsonrpc_error_of(report["steps"]["internal"])["code"] == -32603  # with HTTP 200
    for outcome, status, code in (
        (report["steps"]["limited"], 429, -32003),
        (bad["steps"]["bad"], 401, -32004),
        (free["steps"]["free"], 403, -32005),
    ):
        assert outcome["kind"] == "http_error", outcome
        assert outcome["status"] == outcome["raw_status"] == status
        body = jsonrpc_error_of(outcome["body"])
        assert body["code"] == code
    retry_after = jsonrpc_error_of(report["steps"]["limited"]["body"])["data"]["retryAfter"]
    assert isinstance(retry_after, int) and retry_after > 0


# a2a-sdk 1.3's client ------------------------------------------------------------------


async def test_a2a13_client_refuses_the_services_own_card(a2a13_python: Path) -> None:
    # The emulator's default card is the service's (protocolVersion 0.2.6): the 1.3 client
    # reads it, then finds no transport for it, as it would against the service.
    steps = [send("search", "document_search", text("grace"))]
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        report = await run_a2a_client(a2a13_python, emulator, steps, script="a2a13_client.py")
        served = emulator.stats.total

    assert report["card"]["kind"] == "card", report["card"]
    (interface,) = report["card"]["card"]["supportedInterfaces"]
    assert interface["protocolVersion"] == "0.2.6"
    assert report["client"] == {
        "kind": "exception",
        "type": "ValueError",
        "detail": "no compatible transports found.",
    }
    assert served == 0


def _task_v1(outcome: dict[str, Any]) -> dict[str, Any]:
    assert outcome["kind"] == "task", outcome
    task: dict[str, Any] = outcome["task"]
    return task


def _artifact_v1(outcome: dict[str, Any], name: str) -> list[dict[str, Any]]:
    task = _task_v1(outcome)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    (artifact,) = task["artifacts"]
    assert artifact["name"] == name
    parts: list[dict[str, Any]] = artifact["parts"]
    return parts


def _error_v1(outcome: dict[str, Any], code: int, error_type: str) -> dict[str, Any]:
    assert outcome["kind"] == "jsonrpc_error", outcome
    assert (outcome["code"], outcome["error_type"]) == (code, error_type), outcome
    return outcome


@pytest.mark.parametrize(
    ("protocol", "transport"),
    [("1.0", "JsonRpcTransport"), ("0.3", "CompatJsonRpcTransport")],
)
async def test_a2a13_client_every_skill_and_task_method(
    a2a13_python: Path, protocol: Literal["1.0", "0.3"], transport: str
) -> None:
    document = next(iter(BundledCorpus()))
    steps = every_skill_and_task_method(send, document)
    async with Emulator(EmulatorConfig(rate_limits=None, protocol=protocol)) as emulator:
        report = await run_a2a_client(a2a13_python, emulator, steps, script="a2a13_client.py")
        methods = [arrival.method for arrival in emulator.arrivals]
    out = report["steps"]

    assert report["client"] == {"kind": "client", "transport": transport}
    card = report["card"]["card"]
    assert {s["id"] for s in card["skills"]} >= {"catholic_qa", "document_search"}
    (interface,) = card["supportedInterfaces"]
    assert interface["protocolVersion"] == ("1.0" if protocol == "1.0" else "0.3.0")
    assert len(methods) == len(steps)  # one request per call (the card is a GET)

    for label in ("qa", "qa_named"):
        assert "text" in _artifact_v1(out[label], "catholic_qa_response")[0]
    results = _artifact_v1(out["search"], "search_results")[0]["data"]["results"]
    assert results and {"id", "url", "title"} <= set(results[0])
    for label in ("fetch", "fetch_text"):
        parts = _artifact_v1(out[label], "document")
        assert parts[0]["text"] and parts[1]["data"]["id"] == document.id
    assert _artifact_v1(out["fetch_missing"], "document") == [{"text": "Document not found."}]
    assert "text" in _artifact_v1(out["readings"], "mass_readings")[0]
    assert "text" in _artifact_v1(out["saints"], "martyrology")[0]
    failed = _task_v1(out["failed"])
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert failed["status"]["message"]["parts"] == [{"text": "the skill raised"}]
    assert failed["status"]["message"]["role"] == "ROLE_AGENT"
    assert _task_v1(out["get_search"]) == _task_v1(out["search"])
    assert _task_v1(out["get_failed"])["status"]["state"] == "TASK_STATE_FAILED"

    for label in ("get_unknown", "cancel_unknown"):
        _error_v1(out[label], -32001, "TaskNotFoundError")
    invalid = _error_v1(out["cancel_search"], -32602, "InvalidParamsError")
    assert invalid["message"] == "Invalid state transition"
    # The service's -32002 is "skill not found"; the SDK can only name it by A2A's class.
    skill = _error_v1(out["unknown_skill"], -32002, "TaskNotCancelableError")
    assert skill["message"] == "Skill not found"
    if protocol == "1.0":  # the ErrorInfo's metadata, kept by the client
        assert invalid["data"] == {"state": "TASK_STATE_COMPLETED"}
        assert skill["data"] == {"skillId": "no_such_skill"}
        assert methods[0] == "message/send"  # SendMessage, counted by the service's name


async def test_a2a13_client_http_status_errors(a2a13_python: Path) -> None:
    # -32003, -32004 and -32005 come with HTTP 429, 401 and 403: a2a-sdk 1.3 raises on the
    # status without reading the body.
    config = EmulatorConfig(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=1, period=3600),
        protocol="1.0",
    )
    async with Emulator(config) as emulator:
        report = await run_a2a_client(
            a2a13_python,
            emulator,
            [
                send("first", "document_search", text("human work")),
                send("limited", "document_search", text("human work")),
            ],
            script="a2a13_client.py",
        )
        free = await run_a2a_client(
            a2a13_python,
            emulator,
            [send("free", "document_search", text("x"))],
            "free-token",
            script="a2a13_client.py",
        )
    _artifact_v1(report["steps"]["first"], "search_results")
    for outcome, status in ((report["steps"]["limited"], 429), (free["steps"]["free"], 403)):
        assert outcome["kind"] == "client_error", outcome
        assert outcome["detail"].startswith(f"HTTP Error {status}")
