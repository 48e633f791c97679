"""The @a2a-js/sdk clients (0.3 and 1.3) against our emulator: does each take every answer?

``js/a2a_js_client.mjs`` runs under node with the packages ``npm ci`` installs in
``tests/interop/js/`` (both majors, by npm aliases ``a2a-js-03`` and ``a2a-js-13``); 1.3
speaks A2A 1.0, and reaches an A2A 0.3 server through its v0.3 compat layer -- which it
turns on only for a card saying 0.3: against the service's own card (0.2.6) it speaks 1.0
and meets "method not found", so it runs against the emulator's 0.3 card. The tests
skip without node or ``node_modules`` (set ``MAGISTERIUM_INTEROP_BUILD=1`` to run
``npm ci``, which needs the npm registry), and fail instead when ``CI`` is true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

from magisterium_async.testing import (
    BundledCorpus,
    Emulator,
    EmulatorConfig,
    Fault,
    RateLimitConfig,
)
from magisterium_async.testing.emulator._card import agent_card
from magisterium_async.testing.emulator._config import Protocol

from .conftest import _in_ci
from .js_common import JS, SDKS, missing_sdks, send
from .plans import MISSING_TASK, every_skill_and_task_method, plan_of, run_plan, text

pytestmark = pytest.mark.interop

# The emulator's protocol each SDK runs against: 0.3 talks to the service's own (0.2.6);
# 1.3 reaches the service's JSON-RPC only where the card says 0.3.
PROTOCOL: dict[str, Protocol] = {"03": "0.2.6", "13": "0.3"}


def _node() -> str:
    """The node executable, with both SDKs installed; skips or fails the test otherwise."""
    node = shutil.which("node")
    missing = missing_sdks()
    if node and missing and os.environ.get("MAGISTERIUM_INTEROP_BUILD") == "1":
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=600)
        missing = missing_sdks()
    if node and not missing:
        return node
    reason = (
        "no node on PATH"
        if node is None
        else f"@a2a-js/sdk {', '.join(SDKS[k] for k in missing)} not installed: run "
        "`npm ci` in tests/interop/js/ (or set MAGISTERIUM_INTEROP_BUILD=1; needs npm)"
    )
    if _in_ci():
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture(params=sorted(SDKS), ids=[f"a2a-js-{v}" for _, v in sorted(SDKS.items())])
def sdk(request: pytest.FixtureRequest) -> str:
    """Which @a2a-js/sdk: ``"03"`` or ``"13"``."""
    key: str = request.param
    return key


async def run_js_client(sdk: str, emulator: Emulator, steps: list[dict[str, Any]]) -> Any:
    """Run the steps through @a2a-js/sdk ``sdk``; its report."""
    plan = plan_of(emulator, steps)
    report = await run_plan([_node(), str(JS / "a2a_js_client.mjs"), sdk], JS, plan)
    assert report["sdk"] == SDKS[sdk]
    return report


def artifact_of(outcome: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The parts of the only artifact of a completed task the client parsed."""
    assert outcome["kind"] == "task", outcome
    assert outcome["state"] == "completed", outcome
    (artifact,) = outcome["artifacts"]
    assert artifact["name"] == name
    parts: list[dict[str, Any]] = artifact["parts"]
    return parts


def error_of(outcome: dict[str, Any], code: int, name: str) -> dict[str, Any]:
    """The error the client raised, with the service's code kept and the class ``name``."""
    assert outcome["kind"] == "error", outcome
    assert (outcome["code"], outcome["name"]) == (code, name), outcome
    return outcome


async def test_every_skill_and_task_method(sdk: str) -> None:
    document = next(iter(BundledCorpus()))
    steps = every_skill_and_task_method(send, document)
    async with Emulator(EmulatorConfig(rate_limits=None, protocol=PROTOCOL[sdk])) as emulator:
        report = await run_js_client(sdk, emulator, steps)
        served = emulator.stats.total
    out = report["steps"]

    served_skills = [skill["id"] for skill in agent_card("http://emulator")["skills"]]
    assert report["card"] == {"kind": "card", "skills": served_skills}
    assert len(report["card"]["skills"]) == 10
    for label in ("qa", "qa_named"):
        assert artifact_of(out[label], "catholic_qa_response")[0]["kind"] == "text"
    results = artifact_of(out["search"], "search_results")[0]["data"]["results"]
    assert results and {"id", "url", "title"} <= set(results[0])
    for label in ("fetch", "fetch_text"):
        parts = artifact_of(out[label], "document")
        assert [p["kind"] for p in parts] == ["text", "data"]
        assert parts[1]["data"]["id"] == document.id
    assert artifact_of(out["fetch_missing"], "document") == [text("Document not found.")]
    assert artifact_of(out["readings"], "mass_readings")[0]["kind"] == "text"
    assert artifact_of(out["saints"], "martyrology")[0]["kind"] == "text"
    assert (out["failed"]["state"], out["failed"]["statusText"]) == ("failed", "the skill raised")
    assert out["get_search"] == out["search"]
    assert out["get_failed"] == out["failed"]
    assert served == len(steps)  # one request per call: the card is not counted

    for label in ("get_unknown", "cancel_unknown"):
        assert error_of(out[label], -32001, "TaskNotFoundError")["data"] == {"id": MISSING_TASK}
    # The service's codes, under generic A2A's names: -32002 is "skill not found" here.
    skill = error_of(out["unknown_skill"], -32002, "TaskNotCancelableError")
    assert skill["data"] == {"skillId": "no_such_skill"}
    invalid = out["cancel_search"]
    if sdk == "03":  # 0.3 keeps the service's message only for codes it has no class for
        assert error_of(invalid, -32602, "Error")["message"].startswith(
            "JSON-RPC error: Invalid state transition (Code: -32602)"
        )
        assert (skill["message"], skill["type"]) == (
            "Task cannot be canceled",
            "TaskNotCancelableJSONRPCError",
        )
    else:
        assert error_of(invalid, -32602, "RequestMalformedError")["message"] == (
            "Invalid state transition"
        )
        assert (skill["message"], skill["type"]) == (
            "Skill not found",
            "JsonRpcTaskNotCancelableError",
        )


async def test_http_status_errors(sdk: str) -> None:
    # -32003, -32004 and -32005 come with HTTP 429, 401 and 403: both SDKs read the body of
    # a non-2xx answer and raise the JSON-RPC error it holds, with its code and data.
    config = EmulatorConfig(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=5, period=3600),
        protocol=PROTOCOL[sdk],
    )
    async with Emulator(config) as emulator:
        emulator.script(Fault.internal_error(), Fault.http_502(), skill="catholic_qa")
        report = await run_js_client(
            sdk,
            emulator,
            [
                send("first", "document_search", text("human work")),
                send("limited", "document_search", text("human work")),
                send("bad_token", "document_search", text("x"), token="wrong-token"),
                send("free_plan", "document_search", text("x"), token="free-token"),
                send("internal", "catholic_qa", text("What is grace?")),
                send("bad_gateway", "catholic_qa", text("What is grace?")),
            ],
        )
    out = report["steps"]

    artifact_of(out["first"], "search_results")
    limited = error_of(out["limited"], -32003, "PushNotificationNotSupportedError")
    assert isinstance(limited["data"]["retryAfter"], int) and limited["data"]["retryAfter"] > 0
    unauthorized = error_of(out["bad_token"], -32004, "UnsupportedOperationError")
    paid = error_of(out["free_plan"], -32005, "ContentTypeNotSupportedError")
    internal = error_of(
        out["internal"], -32603, "Error" if sdk == "03" else "JsonRpcTransportError"
    )
    assert "Internal error" in internal["message"]
    gateway = out["bad_gateway"]
    assert (gateway["kind"], gateway["code"]) == ("error", None)
    assert gateway["message"].startswith("HTTP error for message/send! Status: 502")
    messages = [e["message"] for e in (limited, unauthorized, paid)]
    if sdk == "03":  # the class's own message, not the service's
        assert messages == [
            "Push Notification is not supported",
            "This operation is not supported",
            "Incompatible content types",
        ]
    else:
        assert messages == ["Rate limit exceeded", "Unauthorized", "Paid plan required"]


async def test_1_3_speaks_1_0_to_the_services_own_card() -> None:
    # The service's card says protocolVersion 0.2.6: @a2a-js/sdk 1.3 keeps its compat layer
    # off and sends 1.0's SendMessage, which the service does not know.
    steps = [send("search", "document_search", text("grace"))]
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        report = await run_js_client("13", emulator, steps)
        methods = [arrival.method for arrival in emulator.arrivals]
    assert report["card"]["kind"] == "card"
    error_of(report["steps"]["search"], -32601, "RequestMalformedError")
    assert methods == ["SendMessage"]


async def test_1_3_against_the_emulator_speaking_1_0() -> None:
    document = next(iter(BundledCorpus()))
    steps = every_skill_and_task_method(send, document)
    async with Emulator(EmulatorConfig(rate_limits=None, protocol="1.0")) as emulator:
        report = await run_js_client("13", emulator, steps)
        methods = {arrival.method for arrival in emulator.arrivals}
    out = report["steps"]

    # Sent as SendMessage, GetTask, CancelTask (with A2A-Version: none was refused), counted
    # by the service's names.
    assert methods == {"message/send", "tasks/get", "tasks/cancel"}
    assert report["card"]["kind"] == "card"
    for label in ("qa", "qa_named"):
        assert artifact_of(out[label], "catholic_qa_response")[0]["kind"] == "text"
    results = artifact_of(out["search"], "search_results")[0]["data"]["results"]
    assert results and {"id", "url", "title"} <= set(results[0])
    for label in ("fetch", "fetch_text"):
        parts = artifact_of(out[label], "document")
        assert [p["kind"] for p in parts] == ["text", "data"]
        assert parts[1]["data"]["id"] == document.id
    assert artifact_of(out["fetch_missing"], "document") == [text("Document not found.")]
    assert (out["failed"]["state"], out["failed"]["statusText"]) == ("failed", "the skill raised")
    assert out["get_search"] == out["search"]
    for label in ("get_unknown", "cancel_unknown"):
        assert error_of(out[label], -32001, "TaskNotFoundError")
    assert error_of(out["cancel_search"], -32602, "RequestMalformedError")["message"] == (
        "Invalid state transition"
    )
    assert error_of(out["unknown_skill"], -32002, "TaskNotCancelableError")["message"] == (
        "Skill not found"
    )
