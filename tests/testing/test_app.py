"""The emulator against the service contract, row by row, over loopback HTTP."""

from __future__ import annotations

import contextlib
import datetime
import json
from typing import Any

import aiohttp
import pytest

from magisterium_async.testing import EmulatorConfig, Fault, RateLimitConfig
from magisterium_async.testing.emulator._tasks import TaskStore
from magisterium_async.testing.emulator.content._skills import SKILLS

from ..conftest import JumpClock
from .conftest import StartWire
from .helpers import Wire, data, message, text


def _iso(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_send_returns_the_finished_task_in_wire_shape(wire: Wire) -> None:
    sent = message(text("Lumen Gentium"), skill="document_search")
    answer = await wire.call("message/send", {"message": sent}, request_id="req-7")

    assert answer.status == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.body["jsonrpc"] == "2.0"
    assert answer.body["id"] == "req-7"
    task = answer.result
    assert task["kind"] == "task"
    assert set(task) == {"kind", "id", "contextId", "status", "artifacts", "history"}
    assert task["status"]["state"] == "completed"
    assert _iso(task["status"]["timestamp"]).tzinfo is not None
    [artifact] = task["artifacts"]
    assert set(artifact) == {"artifactId", "name", "parts"}
    assert artifact["name"] == "search_results"
    user, agent = task["history"]
    assert user == {
        "kind": "message",
        "role": "user",
        "messageId": sent["messageId"],
        "parts": sent["parts"],
        "contextId": task["contextId"],
        "taskId": task["id"],
        "metadata": {"skillId": "document_search"},
    }
    assert agent["role"] == "agent"
    assert agent["kind"] == "message"
    assert agent["taskId"] == task["id"]
    assert agent["contextId"] == task["contextId"]
    assert agent["messageId"] != user["messageId"]


async def test_ids_are_unique_and_numeric_request_ids_are_echoed(wire: Wire) -> None:
    first = await wire.call("message/send", {"message": message(text("x"))}, request_id=41)
    second = await wire.call("message/send", {"message": message(text("x"))}, request_id=4.5)
    assert (first.body["id"], second.body["id"]) == (41, 4.5)
    one, two = first.result, second.result
    assert one["id"] != two["id"]
    assert one["artifacts"][0]["artifactId"] != two["artifacts"][0]["artifactId"]


async def test_catholic_qa_is_the_default_skill(wire: Wire) -> None:
    answer = await wire.send(None, text("What is the Eucharist?"))
    assert answer.result["artifacts"][0]["name"] == "catholic_qa_response"
    assert wire.emu.stats.count(skill="catholic_qa", outcome="ok") == 1


async def test_context_id_is_kept_when_given_and_made_when_absent(wire: Wire) -> None:
    kept = await wire.send("document_search", text("faith"), context_id="ctx-mine")
    assert kept.result["contextId"] == "ctx-mine"
    assert kept.result["history"][0]["contextId"] == "ctx-mine"
    made = [(await wire.send("document_search", text("faith"))).result for _ in range(2)]
    assert made[0]["contextId"] and made[0]["contextId"] != made[1]["contextId"]


async def test_tasks_get_returns_the_same_task_until_the_ttl(
    start_wire: StartWire, clock: JumpClock
) -> None:
    wire = await start_wire(clock=clock, task_ttl=100.0)
    task = (await wire.send("document_search", text("hope"))).result

    clock.time += 99.0
    found = await wire.call("tasks/get", {"id": task["id"]}, request_id=9)
    assert found.status == 200
    assert found.body["id"] == 9
    assert found.result == task

    clock.time += 1.0
    expired = await wire.call("tasks/get", {"id": task["id"]})
    assert (expired.status, expired.error["code"]) == (200, -32001)


async def test_tasks_are_kept_24_hours_by_default(start_wire: StartWire, clock: JumpClock) -> None:
    wire = await start_wire(clock=clock)
    task = (await wire.send("document_search", text("hope"))).result
    clock.time += 24 * 3600 - 1
    assert (await wire.call("tasks/get", {"id": task["id"]})).result["id"] == task["id"]
    clock.time += 1
    assert (await wire.call("tasks/get", {"id": task["id"]})).error["code"] == -32001


async def test_unknown_task_is_not_found(wire: Wire) -> None:
    for method in ("tasks/get", "tasks/cancel"):
        answer = await wire.call(method, {"id": "no-such-task"})
        assert (answer.status, answer.error["code"]) == (200, -32001)
        assert answer.error["message"] == "Task not found"


async def test_cancelling_a_finished_task_is_an_invalid_state_transition(wire: Wire) -> None:
    task = (await wire.send("document_search", text("hope"))).result
    answer = await wire.call("tasks/cancel", {"id": task["id"]})
    assert answer.status == 200
    assert answer.error["code"] == -32602
    assert answer.error["message"] == "Invalid state transition"
    still = await wire.call("tasks/get", {"id": task["id"]})
    assert still.result["status"]["state"] == "completed"


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"'],
    ids=["garbage", "empty", "cut"],
)
async def test_bad_json_is_a_parse_error(wire: Wire, body: bytes) -> None:
    answer = await wire.post(body)
    assert answer.status == 200
    assert answer.body == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


@pytest.mark.parametrize(
    "request_body",
    [
        [],
        "text",
        {"id": 1, "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "1.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "2.0", "id": True, "method": "tasks/get", "params": {"id": "x"}},
        {"jsonrpc": "2.0", "id": 1, "params": {"id": "x"}},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
    ],
    ids=[
        "array",
        "string",
        "no-jsonrpc",
        "jsonrpc-1.0",
        "no-id",
        "object-id",
        "bool-id",
        "no-method",
        "method-not-string",
    ],
)
async def test_malformed_envelope_is_an_invalid_request(wire: Wire, request_body: Any) -> None:
    answer = await wire.post(json.dumps(request_body).encode())
    assert answer.status == 200
    assert answer.error["code"] == -32600
    assert answer.error["message"] == "Invalid Request"


async def test_invalid_request_echoes_a_valid_id(wire: Wire) -> None:
    body = {"jsonrpc": "1.0", "id": "abc", "method": "tasks/get"}
    assert (await wire.post(json.dumps(body).encode())).body["id"] == "abc"


async def test_null_id_is_accepted_and_echoed(wire: Wire) -> None:
    answer = await wire.call("tasks/get", {"id": "x"}, request_id=None)
    assert answer.body["id"] is None
    assert answer.error["code"] == -32001


async def test_unknown_method(wire: Wire) -> None:
    answer = await wire.call("message/stream", {"message": message(text("x"))})
    assert (answer.status, answer.error["code"]) == (200, -32601)
    assert answer.error["message"] == "Method not found"


def _msg(**changes: Any) -> dict[str, Any]:
    msg = message(text("query"), skill="document_search")
    for key, value in changes.items():
        if value is None:
            del msg[key]
        else:
            msg[key] = value
    return msg


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("message/send", None),
        ("message/send", []),
        ("message/send", {}),
        ("message/send", {"message": "hello"}),
        ("message/send", {"message": _msg(role="agent")}),
        ("message/send", {"message": _msg(role=None)}),
        ("message/send", {"message": _msg(kind="task")}),
        ("message/send", {"message": _msg(messageId=None)}),
        ("message/send", {"message": _msg(messageId="")}),
        ("message/send", {"message": _msg(parts=[])}),
        ("message/send", {"message": _msg(parts=None)}),
        ("message/send", {"message": _msg(parts="query")}),
        ("message/send", {"message": _msg(parts=[{"kind": "image", "url": "x"}])}),
        ("message/send", {"message": _msg(parts=[{"kind": "text"}])}),
        ("message/send", {"message": _msg(parts=[{"kind": "text", "text": 3}])}),
        ("message/send", {"message": _msg(parts=[{"kind": "data", "data": [1]}])}),
        ("message/send", {"message": _msg(parts=[{"kind": "file", "file": {}}])}),
        ("message/send", {"message": _msg(parts=["query"])}),
        ("message/send", {"message": _msg(metadata="x")}),
        ("message/send", {"message": _msg(metadata={"skillId": 5})}),
        ("message/send", {"message": _msg(contextId=5)}),
        ("tasks/get", None),
        ("tasks/get", {}),
        ("tasks/get", {"id": 5}),
        ("tasks/get", {"id": ""}),
        ("tasks/cancel", {"taskId": "x"}),
    ],
)
async def test_invalid_params(wire: Wire, method: str, params: Any) -> None:
    answer = await wire.call(method, params)
    assert answer.status == 200
    assert answer.error["code"] == -32602
    assert answer.error["message"] == "Invalid params"
    assert isinstance(answer.error["data"]["detail"], str)


async def test_file_parts_are_valid(wire: Wire) -> None:
    file_part = {"kind": "file", "file": {"name": "a.txt", "mimeType": "text/plain", "uri": "x"}}
    answer = await wire.send("document_search", text("grace"), file_part)
    assert answer.result["status"]["state"] == "completed"
    assert answer.result["history"][0]["parts"][1] == file_part


async def test_unknown_skill(wire: Wire) -> None:
    answer = await wire.send("summarize", text("x"))
    assert (answer.status, answer.error["code"]) == (200, -32002)
    assert answer.error["message"] == "Skill not found"
    assert answer.error["data"] == {"skillId": "summarize"}


@pytest.mark.parametrize(
    "token",
    [None, "wrong-token", ""],
    ids=["missing", "wrong", "empty"],
)
async def test_missing_or_wrong_token_is_401(wire: Wire, token: str | None) -> None:
    answer = await wire.send("document_search", text("x"), token=token)
    assert answer.status == 401
    assert answer.error["code"] == -32004
    assert answer.error["message"] == "Unauthorized"
    assert answer.body["id"] == 1
    assert wire.emu.stats.count(outcome="unauthorized") == 1


async def test_non_bearer_scheme_is_401(wire: Wire) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}})
    answer = await wire.post(
        body.encode(), token=None, headers={"Authorization": f"Basic {wire.emu.token}"}
    )
    assert (answer.status, answer.error["code"]) == (401, -32004)


async def test_free_plan_token_is_403(start_wire: StartWire) -> None:
    wire = await start_wire(tokens={"paid": "pro", "gratis": "free"})
    answer = await wire.send("document_search", text("x"), token="gratis")
    assert answer.status == 403
    assert answer.error["code"] == -32005
    assert answer.error["message"] == "Paid plan required"
    assert wire.emu.token == "paid"
    ok = await wire.send("document_search", text("x"), token="paid")
    assert ok.status == 200
    assert wire.emu.stats.count(outcome="forbidden") == 1


async def test_other_paid_plans_are_served(start_wire: StartWire) -> None:
    wire = await start_wire(tokens={"org": "organization", "ent": "enterprise"})
    for token in ("org", "ent"):
        assert (await wire.call("tasks/get", {"id": "x"}, token=token)).status == 200


async def test_auth_is_checked_before_the_envelope_but_after_parsing(wire: Wire) -> None:
    assert (await wire.post(b"nope", token=None)).error["code"] == -32700
    answer = await wire.post(b'{"id": 3}', token=None)
    assert (answer.status, answer.error["code"], answer.body["id"]) == (401, -32004, 3)


async def test_cors_preflight(wire: Wire) -> None:
    async with wire.session.options(
        wire.emu.base_url,
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"},
    ) as response:
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        assert response.headers["Access-Control-Allow-Methods"] == "POST, OPTIONS"
        assert response.headers["Access-Control-Allow-Headers"] == "Content-Type, Authorization"
    assert wire.emu.stats.total == 0


_ORIGIN = {"Origin": "http://127.0.0.1:9"}


async def _cors_headers(wire: Wire, method: str, path: str, **kwargs: Any) -> dict[str, str]:
    """Status and the CORS headers of one answer (its body may be cut short by a fault)."""
    url = wire.emu.origin + path
    headers = {**_ORIGIN, **kwargs.pop("headers", {})}
    async with wire.session.request(method, url, headers=headers, **kwargs) as response:
        with contextlib.suppress(aiohttp.ClientPayloadError):
            await response.read()
        return {"status": str(response.status)} | {
            key: value
            for key, value in response.headers.items()
            if key.lower().startswith("access-control-") or key in ("Retry-After",)
        }


def _rpc(method: str, params: Any, token: str | None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return {"data": json.dumps(body), "headers": headers}


def _search(token: str | None = "emu-token", skill: str = "document_search") -> dict[str, Any]:
    return _rpc("message/send", {"message": message(text("faith"), skill=skill)}, token)


async def test_every_answer_carries_cors_headers(start_wire: StartWire) -> None:
    wire = await start_wire(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=RateLimitConfig(default=1, expensive=20, period=3600, retry_after_header=True),
    )
    a2a = "/api/v1/a2a"
    answers = {
        "ok": await _cors_headers(wire, "POST", a2a, **_search()),
        "limited": await _cors_headers(wire, "POST", a2a, **_search()),
        "not_found": await _cors_headers(
            wire, "POST", a2a, **_rpc("tasks/get", {"id": "nope"}, "emu-token")
        ),
        "parse_error": await _cors_headers(wire, "POST", a2a, data=b"{"),
        "unauthorized": await _cors_headers(wire, "POST", a2a, **_search("wrong-token")),
        "no_token": await _cors_headers(wire, "POST", a2a, **_search(None)),
        "paid_plan": await _cors_headers(wire, "POST", a2a, **_search("free-token")),
        "card": await _cors_headers(wire, "GET", "/.well-known/agent.json"),
        # A2A 0.3's path: a 0.2.6 server (the service) serves its card at agent.json alone.
        "card_elsewhere": await _cors_headers(wire, "GET", "/.well-known/agent-card.json"),
        "oauth_metadata": await _cors_headers(
            wire, "GET", "/.well-known/oauth-authorization-server"
        ),
        "no_route": await _cors_headers(wire, "GET", "/elsewhere"),
        "get_a2a": await _cors_headers(wire, "GET", a2a),
    }
    for fault in (
        Fault.http_502(),
        Fault.http_503(retry_after=7),
        Fault.rate_limit(retry_after=3),
        Fault.internal_error(),
        Fault.jsonrpc_error(-32099, "odd"),
        Fault.malformed(),
        Fault.truncated(),
        Fault.task_failed(),
        Fault.latency(0.0),
    ):
        wire.emu.script(fault)
        answer = await _cors_headers(wire, "POST", a2a, **_search(skill="catholic_qa"))
        answers[f"fault_{fault.name}"] = answer

    expected_status = {
        "ok": "200",
        "limited": "429",
        "not_found": "200",
        "parse_error": "200",
        "unauthorized": "401",
        "no_token": "401",
        "paid_plan": "403",
        "card": "200",
        "card_elsewhere": "404",
        "oauth_metadata": "200",
        "no_route": "404",
        "get_a2a": "405",
        "fault_http_502": "502",
        "fault_http_503": "503",
        "fault_rate_limit": "429",
        "fault_jsonrpc_error": "200",
        "fault_malformed": "200",
        "fault_truncated": "200",
        "fault_task_failed": "200",
        "fault_latency": "200",
    }
    assert {label: a["status"] for label, a in answers.items()} == expected_status
    for label, answer in answers.items():
        assert answer["Access-Control-Allow-Origin"] == "*", label
        exposed = {h.strip() for h in answer["Access-Control-Expose-Headers"].split(",")}
        assert {"Retry-After", "WWW-Authenticate"} <= exposed, label
    assert answers["fault_http_503"]["Retry-After"] == "7"
    assert "Retry-After" in answers["limited"]


async def test_agent_card_is_the_services_own(wire: Wire) -> None:
    # The service's card, to the letter (its Discovery): A2A 0.2.6, state history kept, at
    # 0.2.6's path alone (0.3 renamed it agent-card.json).
    async with wire.session.get(wire.emu.origin + "/.well-known/agent-card.json") as response:
        assert response.status == 404
    async with wire.session.get(wire.emu.origin + "/.well-known/agent.json") as response:
        assert response.status == 200
        assert response.headers["Cache-Control"] == "public, max-age=3600"
        card = await response.json()
    assert card["url"] == wire.emu.base_url
    assert card["protocolVersion"] == "0.2.6"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["capabilities"] == {
        "streaming": False,
        "pushNotifications": False,
        "stateTransitionHistory": True,
    }
    assert "supportedInterfaces" not in card
    for key in ("name", "description", "version", "capabilities"):
        assert card[key]
    assert card["defaultInputModes"] and card["defaultOutputModes"]
    skills = {skill["id"]: skill for skill in card["skills"]}
    assert set(skills) == {
        "catholic_qa",
        "document_search",
        "document_fetch",
        "liturgical_readings",
        "saints_of_the_day",
        "saint_lookup",
        "person_lookup",
        "pope_lookup",
        "diocese_lookup",
        "diocese_statistics_lookup",
    }
    assert set(skills) == set(SKILLS)  # the card lists the skills the emulator serves
    for skill in skills.values():
        assert skill["name"] and skill["description"]
        assert skill["tags"] and skill["examples"]
    assert wire.emu.card_url.endswith("/.well-known/agent.json")
    assert wire.emu.stats.total == 0
    assert wire.emu.arrivals == []


async def test_agent_card_of_a2a_03(start_wire: StartWire) -> None:
    wire = await start_wire(protocol="0.3")
    async with wire.session.get(wire.emu.card_url) as response:
        card = await response.json()
    assert wire.emu.card_url.endswith("/.well-known/agent-card.json")
    async with wire.session.get(wire.emu.origin + "/.well-known/agent.json") as response:
        assert response.status == 404  # 0.2.6's path: 0.3 serves agent-card.json alone
    assert (card["url"], card["protocolVersion"]) == (wire.emu.base_url, "0.3.0")
    assert card["capabilities"]["stateTransitionHistory"] is True


async def test_agent_card_of_a2a_10(start_wire: StartWire) -> None:
    wire = await start_wire(protocol="1.0")
    async with wire.session.get(wire.emu.card_url) as response:
        card = await response.json()
    assert wire.emu.card_url.endswith("/.well-known/agent-card.json")
    async with wire.session.get(wire.emu.origin + "/.well-known/agent.json") as response:
        assert response.status == 404  # 0.2.6's path: 1.0 serves agent-card.json alone
    assert card["supportedInterfaces"] == [
        {"url": wire.emu.base_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert not {"url", "protocolVersion", "preferredTransport", "security"} & set(card)
    assert card["capabilities"] == {
        "streaming": False,
        "pushNotifications": False,
        "extendedAgentCard": False,
    }
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}}}
    assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    assert len(card["skills"]) == len(SKILLS)


async def test_the_fail_prefix_makes_a_failed_task(wire: Wire) -> None:
    answer = await wire.send("document_fetch", text("__fail__: index offline"))
    assert answer.status == 200
    task = answer.result
    assert task["status"]["state"] == "failed"
    reason = task["status"]["message"]
    assert reason["role"] == "agent"
    assert reason["kind"] == "message"
    assert reason["parts"] == [{"kind": "text", "text": "index offline"}]
    assert task["artifacts"] == []
    assert [entry["role"] for entry in task["history"]] == ["user", "agent"]
    assert task["history"][1] == reason
    stored = await wire.call("tasks/get", {"id": task["id"]})
    assert stored.result == task
    cancel = await wire.call("tasks/cancel", {"id": task["id"]})
    assert cancel.error["message"] == "Invalid state transition"
    assert wire.emu.stats.count(outcome="failed") == 1


async def test_the_fail_prefix_alone_has_a_default_reason(wire: Wire) -> None:
    task = (await wire.send("catholic_qa", text("__fail__"))).result
    assert task["status"]["message"]["parts"][0]["text"] == "Simulated skill failure"


async def test_a_skill_without_its_input_fails(wire: Wire) -> None:
    task = (await wire.send("document_search", data({"q": "x"}))).result
    assert task["status"]["state"] == "failed"
    assert "text part" in task["status"]["message"]["parts"][0]["text"]


async def test_counters_and_arrivals(wire: Wire) -> None:
    await wire.send("document_search", text("charity"))
    await wire.send("document_fetch", data({"id": "10234"}))
    await wire.send("document_fetch", text("10234"))
    await wire.send("saints_of_the_day", data({"date": "2026-03-19"}))
    await wire.send("nope", text("x"))
    await wire.call("tasks/get", {"id": "x"})
    await wire.send("document_search", text("x"), token="bad")
    emu = wire.emu

    assert emu.stats.count(method="message/send", skill="document_search", outcome="ok") == 1
    assert emu.stats.count(skill="document_fetch") == 2
    assert emu.stats.count(outcome="error") == 2
    assert emu.stats.count(method="tasks/get") == 1
    assert emu.stats.count(outcome="unauthorized") == 1
    assert emu.stats.total == 7
    assert emu.stats.by_outcome() == {"ok": 4, "error": 2, "unauthorized": 1}

    inputs = [(a.skill, a.input) for a in emu.arrivals if a.admitted]
    assert inputs == [
        ("document_search", "charity"),
        ("document_fetch", "10234"),
        ("document_fetch", "10234"),
        ("saints_of_the_day", "2026-03-19"),
    ]
    assert [a.outcome for a in emu.arrivals] == [
        "ok",
        "ok",
        "ok",
        "ok",
        "error",
        "error",
        "unauthorized",
    ]
    tokens = {a.token for a in emu.arrivals}
    assert len(tokens) == 2
    assert emu.token not in tokens
    times = [a.time for a in emu.arrivals]
    assert times == sorted(times)

    emu.reset_stats()
    assert emu.stats.total == 0
    assert emu.arrivals == []


async def test_a_faulted_arrival_still_says_what_it_asked(wire: Wire) -> None:
    """A request a fault answers before the skill (a drop, a 429) did reach the service:
    tests counting what reached a skill see it."""
    wire.emu.script(Fault.drop(), Fault.rate_limit(), skill="document_fetch")
    for _ in range(2):
        with contextlib.suppress(Exception):
            await wire.send("document_fetch", data({"id": "10234"}))
    await wire.send("document_search", {"kind": "data"})  # params that do not validate
    assert [(a.fault, a.input) for a in wire.emu.arrivals] == [
        ("drop", "10234"),
        ("rate_limit", "10234"),
        (None, None),
    ]


async def test_arrivals_can_be_turned_off(start_wire: StartWire) -> None:
    wire = await start_wire(record_arrivals=False)
    await wire.send("document_search", text("x"))
    assert wire.emu.arrivals == []
    assert wire.emu.stats.total == 1


async def test_max_tasks_drops_the_oldest(start_wire: StartWire) -> None:
    wire = await start_wire(max_tasks=2)
    ids = [(await wire.send("document_search", text("x"))).result["id"] for _ in range(3)]
    assert (await wire.call("tasks/get", {"id": ids[0]})).error["code"] == -32001
    for task_id in ids[1:]:
        assert (await wire.call("tasks/get", {"id": task_id})).result["id"] == task_id


async def test_an_emulator_bug_is_an_internal_error(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(TaskStore, "put", broken)
    answer = await wire.send("document_search", text("x"))
    assert answer.status == 200
    assert answer.error["code"] == -32603
    assert answer.error["message"] == "Internal error"
    assert wire.emu.stats.count(outcome="error") == 1


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="task_ttl"):
        EmulatorConfig(task_ttl=0)
    with pytest.raises(ValueError, match="max_results"):
        EmulatorConfig(max_results=0)
    with pytest.raises(ValueError, match="plan"):
        EmulatorConfig(tokens={"t": "gold"})  # type: ignore[dict-item]
    with pytest.raises(LookupError):
        _ = EmulatorConfig(tokens={"t": "free"}).default_token
