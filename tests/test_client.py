"""AsyncMagisterium: construction, each skill end to end, retries, redaction, agent card."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest
from aiohttp import web

import magisterium_async as m
from tests.conftest import TOKEN, JumpClock, Reply, ScriptedServer, artifact, data, task_json, text


def completed(*artifacts: dict[str, Any]) -> dict[str, Any]:
    return task_json(artifacts=list(artifacts))


# Construction ----------------------------------------------------------------------


def test_token_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGISTERIUM_TOKEN", "from-env")
    monkeypatch.setenv("MAGISTERIUM_BASE_URL", "http://127.0.0.1:1/a2a")
    client = m.AsyncMagisterium()
    assert client._token == "from-env"
    assert client.base_url == "http://127.0.0.1:1/a2a"


def test_missing_token_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)
    with pytest.raises(m.MagisteriumError, match="MAGISTERIUM_TOKEN"):
        m.AsyncMagisterium()


def test_default_base_url_and_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_BASE_URL", raising=False)
    client = m.AsyncMagisterium(token="t")
    assert client.base_url == "https://www.magisterium.com/api/v1/a2a"
    assert client.rate_limits == m.RateLimits.pro()
    assert client.timeouts.expensive > client.timeouts.default


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"max_retries": 1.5}, TypeError, "max_retries"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": -3}, ValueError, "timeout"),
        ({"timeout": "10"}, TypeError, "timeout"),
        ({"max_concurrency": 0}, ValueError, "max_concurrency"),
        ({"rate_limits": {"default": 1}}, TypeError, "rate_limits"),
        ({"token": ""}, ValueError, "token"),
        ({"token": 5}, TypeError, "token"),
        ({"token": "a\x00b"}, ValueError, "token"),
        ({"token": "abc\ndef"}, ValueError, "token"),
        ({"base_url": "http://example.com/a2a"}, ValueError, "base_url"),
    ],
)
def test_bad_construction_arguments(kwargs: dict[str, Any], error: type, name: str) -> None:
    kwargs.setdefault("token", "t")
    with pytest.raises(error, match=name):
        m.AsyncMagisterium(**kwargs)


def test_arguments_in_the_contracts_order_and_explicit_max_retries() -> None:
    limits = m.RateLimits(30, 3)
    client = m.AsyncMagisterium("t", "https://example.org/a2a", limits, 5, 12.0, 4)
    assert (client.rate_limits, client.retry_policy.max_retries) == (limits, 5)
    assert (client.timeouts.default, client.max_concurrency) == (12.0, 4)
    policy = m.RetryPolicy(max_retries=5)
    assert m.AsyncMagisterium("t", retry_policy=policy).retry_policy.max_retries == 5
    explicit = m.AsyncMagisterium("t", max_retries=2, retry_policy=policy)
    assert explicit.retry_policy.max_retries == 2


def test_token_never_in_repr() -> None:
    client = m.AsyncMagisterium(token=TOKEN)
    assert TOKEN not in repr(client) and TOKEN not in str(client)
    assert TOKEN not in repr(vars(client).get("_transport"))


# The skills end to end -------------------------------------------------------------


async def test_each_skill_against_the_wire(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.reply(
        server.result(
            completed(
                artifact(
                    "catholic_qa_response",
                    text("Grace perfects nature."),
                    data({"citations": [{"document_title": "Summa"}]}),
                )
            )
        ),
        server.result(
            completed(
                artifact(
                    "search_results", data({"results": [{"id": "1", "url": "u", "title": "T"}]})
                )
            )
        ),
        server.result(
            completed(
                artifact(
                    "document",
                    text("body"),
                    data({"id": "1", "title": "T", "author": "A", "ref": "R"}),
                )
            )
        ),
        server.result(completed(artifact("mass_readings", text("Readings")))),
        server.result(completed(artifact("martyrology", text("Saint Joseph")))),
    )
    answer = await client.ask("What is grace?", context_id="ctx-7")
    assert answer.text == "Grace perfects nature."
    assert answer.citations[0].document_title == "Summa"
    assert [r.id for r in await client.search("grace")] == ["1"]
    document = await client.fetch("1")
    assert document is not None and document.text == "body"
    assert await client.mass_readings() == "Readings"
    assert await client.saints(dt.date(2026, 3, 19)) == "Saint Joseph"
    skills = [r["params"]["message"]["metadata"]["skillId"] for r in server.requests]
    assert skills == [
        "catholic_qa",
        "document_search",
        "document_fetch",
        "liturgical_readings",
        "saints_of_the_day",
    ]
    assert server.requests[0]["params"]["message"]["contextId"] == "ctx-7"
    assert server.requests[2]["params"]["message"]["parts"] == [
        {"kind": "data", "data": {"id": "1"}}
    ]
    assert server.requests[4]["params"]["message"]["parts"] == [
        {"kind": "data", "data": {"date": "2026-03-19"}}
    ]
    assert server.requests[3]["params"]["message"]["parts"] == [{"kind": "text", "text": "today"}]


async def test_not_found_answers_are_none(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.reply(
        server.result(completed(artifact("document", text("Document not found.")))),
        server.result(completed(artifact("mass_readings", text("No mass readings found.")))),
        server.result(completed(artifact("martyrology", text("No martyrology data found.")))),
        server.result(completed(artifact("search_results", data({"results": []})))),
    )
    assert await client.fetch("404") is None
    assert await client.mass_readings("the day after never") is None
    assert await client.saints("nonsense") is None
    assert await client.search("nothing") == []


async def test_failed_task_raises_from_skills_but_returns_from_send_message(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.default = server.result(task_json(state="failed", reason="index offline"))
    with pytest.raises(m.TaskFailedError, match="index offline"):
        await client.search("x")
    task = await client.send_message(m.TextPart(text="x"), skill_id="document_search")
    assert task.state == "failed" and task.failure_reason == "index offline"
    assert len(server.requests) == 2  # a failed task is not retried


async def test_bad_arguments_send_nothing(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    with pytest.raises(ValueError, match="query"):
        await client.search(" ")
    with pytest.raises(TypeError, match="document_id"):
        await client.fetch(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="parts"):
        await client.send_message([])
    with pytest.raises(TypeError, match=r"parts\[1\]"):
        await client.send_message(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="task_id"):
        await client.get_task("")
    with pytest.raises(ValueError, match="context_id"):
        await client.ask("q", context_id="")
    assert server.requests == []


# Errors and retries ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (-32600, 200, m.InvalidRequestError),
        (-32601, 200, m.MethodNotFoundError),
        (-32602, 200, m.InvalidParamsError),
        (-32001, 200, m.TaskNotFoundError),
        (-32002, 200, m.SkillNotFoundError),
        (-32004, 401, m.AuthenticationError),
        (-32005, 403, m.PlanRequiredError),
        (-32700, 200, m.ParseError),
    ],
)
async def test_errors_that_are_never_retried(
    client: m.AsyncMagisterium, server: ScriptedServer, code: int, status: int, cls: type
) -> None:
    server.default = server.error(code, "no", status=status)
    with pytest.raises(cls):
        await client.send_message("x", skill_id="document_search")
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [
        Reply(status=502, body="<html>Bad Gateway</html>"),
        Reply(status=503, body=""),
        Reply(drop=True),
    ],
)
async def test_transient_failures_are_retried_with_backoff(
    client: m.AsyncMagisterium, server: ScriptedServer, clock: JumpClock, failure: Reply
) -> None:
    server.reply(failure, failure, server.result(task_json()))
    task = await client.get_task("t")
    assert task.id == "task-1"
    assert len(server.requests) == 3
    assert len(clock.sleeps) == 2
    assert 0.375 <= clock.sleeps[0] <= 0.5 and 0.75 <= clock.sleeps[1] <= 1.0


async def test_internal_error_is_retried_then_raised(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.default = server.error(-32603, "oops")
    with pytest.raises(m.InternalServerError):
        await client.search("x")
    assert len(server.requests) == 3  # the first try and max_retries=2


async def test_max_retries_zero_sends_once(server: ScriptedServer, clock: JumpClock) -> None:
    server.default = lambda req: Reply(status=502, body="bad gateway")
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, max_retries=0, clock=clock
    ) as client:
        with pytest.raises(m.UnexpectedStatusError):
            await client.get_task("t")
    assert len(server.requests) == 1


async def test_rate_limit_waits_retry_after_and_spends_no_retry(
    client: m.AsyncMagisterium, server: ScriptedServer, clock: JumpClock
) -> None:
    limited = server.error(-32003, "Rate limit exceeded", {"retryAfter": 7}, status=429)
    server.reply(
        limited,
        limited,
        limited,
        server.result(completed(artifact("search_results", data({"results": []})))),
    )
    assert await client.search("x") == []
    assert len(server.requests) == 4  # three 429s cost none of the two retries
    assert sum(clock.sleeps) >= 21


async def test_rate_limit_budget_raises(server: ScriptedServer, clock: JumpClock) -> None:
    server.default = server.error(-32003, "Rate limit exceeded", {"retryAfter": 60}, status=429)
    policy = m.RetryPolicy(rate_limit_budget=100)
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, retry_policy=policy, clock=clock
    ) as client:
        with pytest.raises(m.RateLimitError) as info:
            await client.search("x")
    assert info.value.retry_after == 60
    assert len(server.requests) == 2


async def test_catholic_qa_timeout_is_not_retried(server: ScriptedServer, clock: JumpClock) -> None:
    server.default = lambda req: Reply(hang=True)
    timeouts = m.Timeouts(default=0.2, expensive=0.2)
    async with m.AsyncMagisterium(
        token=TOKEN,
        base_url=server.url,
        timeout=timeouts,
        clock=clock,
        rate_limits=m.RateLimits.unlimited(),
    ) as client:
        with pytest.raises(m.APITimeoutError):
            await client.ask("q")
        assert len(server.requests) == 1
        with pytest.raises(m.APITimeoutError):
            await client.search("q")
        assert len(server.requests) == 4  # other skills' timeouts are retried


# Redaction --------------------------------------------------------------------------


async def test_token_never_in_logs_or_errors(
    server: ScriptedServer, clock: JumpClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.reply(
        Reply(status=502, body="bad"),
        server.error(-32004, "Unauthorized", status=401),
        Reply(drop=True),
        Reply(drop=True),
        Reply(drop=True),
    )
    errors: list[BaseException] = []
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, clock=clock, rate_limits=m.RateLimits.unlimited()
    ) as client:
        for _ in range(2):
            try:
                await client.search("x")
            except m.MagisteriumError as exc:
                errors.append(exc)
    assert [type(e) for e in errors] == [m.AuthenticationError, m.APIConnectionError]
    assert caplog.records, "DEBUG logging should have produced lines"
    for exc in errors:
        chain: BaseException | None = exc
        while chain is not None:
            assert TOKEN not in str(chain) and TOKEN not in repr(chain)
            chain = chain.__cause__
    assert TOKEN not in caplog.text


# Agent card --------------------------------------------------------------------------

CARD = {
    "name": "Magisterium AI",
    "version": "1.0",
    "protocolVersion": "0.3.0",
    "url": "https://www.magisterium.com/api/v1/a2a",
    "skills": [{"id": "catholic_qa", "name": "Q&A", "description": "Ask", "tags": []}],
    "capabilities": {"streaming": False},
}


async def test_agent_card_is_decoded_cached_and_spends_no_quota(
    client: m.AsyncMagisterium, server: ScriptedServer, clock: JumpClock
) -> None:
    hits: list[dict[str, str]] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(dict(request.headers))
        return web.json_response(CARD, headers={"Cache-Control": "public, max-age=60"})

    server.extra_routes["/.well-known/agent.json"] = serve
    card = await client.agent_card()
    assert (card.name, card.protocol_version, card.skills[0].id) == (
        "Magisterium AI",
        "0.3.0",
        "catholic_qa",
    )
    await client.agent_card()
    assert len(hits) == 1
    assert "Authorization" not in hits[0]
    clock.time += 61
    await client.agent_card()
    assert len(hits) == 2
    assert server.requests == []


async def test_agent_card_is_retried_on_a_5xx(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    answers = [web.Response(status=502, text="<html>bad gateway</html>"), web.json_response(CARD)]

    async def serve(request: web.Request) -> web.StreamResponse:
        return answers.pop(0)

    server.extra_routes["/.well-known/agent.json"] = serve
    assert (await client.agent_card()).name == "Magisterium AI"
    assert answers == []


async def test_agent_card_malformed(client: m.AsyncMagisterium, server: ScriptedServer) -> None:
    async def serve(request: web.Request) -> web.StreamResponse:
        return web.json_response({"skills": "none"})

    server.extra_routes["/.well-known/agent.json"] = serve
    with pytest.raises(m.MalformedResponseError, match="agent card"):
        await client.agent_card()
