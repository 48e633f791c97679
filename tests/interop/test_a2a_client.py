"""The a2a-sdk 0.3 client against our emulator: does it take every answer the emulator gives?

The emulator runs in this process on 127.0.0.1; ``a2a03_client.py`` runs under the a2a-sdk
0.3 virtualenv, resolves the agent card, then makes each call through
``ClientFactory``/``JsonRpcTransport`` over an httpx client that sends our bearer token, and
reports how every answer was taken (see its docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from magisterium_async.testing import (
    BundledCorpus,
    Emulator,
    EmulatorConfig,
    Fault,
    RateLimitConfig,
)

from .conftest import HERE
from .plans import every_skill_and_task_method, run_plan, text

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
    python: Path, emulator: Emulator, steps: list[dict[str, Any]], token: str | None = None
) -> dict[str, Any]:
    """Run the steps through the a2a-sdk 0.3 client; its report."""
    plan = {"origin": emulator.origin, "token": token or emulator.token, "steps": steps}
    client = [str(python), str(HERE / "a2a03_client.py")]
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
