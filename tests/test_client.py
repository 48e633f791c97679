"""AsyncMagisterium: construction, each skill end to end, retries, redaction, lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import inspect
import logging
import math
import sys
import threading
import warnings
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
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


async def _an_async_callback(event: m.PoolEvent) -> None:
    """Never awaited where events are heard: refused as an ``on_event``."""


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"max_retries": 1.5}, TypeError, "max_retries"),
        ({"max_retries": 10**30}, ValueError, "max_retries must be <= 100"),  # a call must end
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
        ({"base_url": ""}, ValueError, "base_url"),  # never taken for the service's
        ({"base_url": "http://127.0.0.1:99999/"}, ValueError, "base_url has no valid port"),
        # What would fail only at a later call, with an AttributeError naming nothing:
        ({"retry_policy": {"max_retries": 5}}, TypeError, "retry_policy must be RetryPolicy"),
        ({"clock": "x"}, TypeError, r"clock must have now\(\) and sleep\(\)"),
        ({"transport": "x"}, TypeError, "transport must have send"),
        ({"tracer_provider": 1}, TypeError, "tracer_provider must have get_tracer"),
        ({"meter_provider": "x"}, TypeError, "meter_provider must have get_meter"),
        ({"on_event": "print"}, TypeError, "on_event must be callable"),
        ({"on_event": _an_async_callback}, TypeError, "on_event must be a plain function"),
        ({"trace_configs": 1}, TypeError, "trace_configs must be a sequence"),
        ({"trust_env": "no"}, TypeError, "trust_env must be True or False"),
        ({"cache": "Memory"}, ValueError, "'memory' \\(in lower case\\)"),
    ],
)
def test_bad_construction_arguments(kwargs: dict[str, Any], error: type, name: str) -> None:
    kwargs.setdefault("token", "t")
    with pytest.raises(error, match=name):
        m.AsyncMagisterium(**kwargs)


def test_nothing_is_positional_after_the_token() -> None:
    params = list(inspect.signature(m.AsyncMagisterium).parameters.values())
    assert params[0].name == "token"
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    with pytest.raises(TypeError):
        m.AsyncMagisterium("t", "https://example.org/a2a")  # type: ignore[misc]


def test_the_options_are_read_back_and_max_retries_wins_over_the_policy() -> None:
    limits = m.RateLimits(30, 3)
    client = m.AsyncMagisterium(
        "t",
        base_url="https://example.org/a2a",
        rate_limits=limits,
        max_retries=5,
        timeout=12.0,
        max_concurrency=4,
    )
    assert (client.rate_limits, client.retry_policy.max_retries) == (limits, 5)
    assert (client.timeouts.default, client.max_concurrency) == (12.0, 4)
    assert client.base_url == "https://example.org/a2a"
    policy = m.RetryPolicy(max_retries=5)
    assert m.AsyncMagisterium("t", retry_policy=policy).retry_policy.max_retries == 5
    explicit = m.AsyncMagisterium("t", max_retries=2, retry_policy=policy)
    assert explicit.retry_policy.max_retries == 2


@pytest.mark.parametrize(
    "option",
    [
        "base_url",
        "timeouts",
        "retry_policy",
        "max_concurrency",
        "shared_quota",
        "rate_limits",
        "cache_policy",
        "priority",
        "fairness_key",
    ],
)
def test_options_are_read_only(option: str) -> None:
    client = m.AsyncMagisterium("t")
    with pytest.raises(AttributeError):
        setattr(client, option, getattr(client, option))


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
        server.result(completed(artifact("mass_readings", text("Readings")))),
    )
    answer = await client.ask("What is grace?", context_id="ctx-7")
    assert answer.text == "Grace perfects nature."
    assert answer.citations[0].document_title == "Summa"
    assert [r.id for r in await client.search("grace")] == ["1"]
    document = await client.fetch("1")
    assert document is not None and document.text == "body"
    assert await client.mass_readings() == "Readings"
    assert await client.saints(dt.date(2026, 3, 19)) == "Saint Joseph"
    assert await client.mass_readings(dt.date(2026, 4, 5)) == "Readings"  # as ISO text
    skills = [r["params"]["message"]["metadata"]["skillId"] for r in server.requests]
    assert skills == [
        "catholic_qa",
        "document_search",
        "document_fetch",
        "liturgical_readings",
        "saints_of_the_day",
        "liturgical_readings",
    ]
    assert server.requests[0]["params"]["message"]["contextId"] == "ctx-7"
    assert server.requests[2]["params"]["message"]["parts"] == [
        {"kind": "data", "data": {"id": "1"}}
    ]
    assert server.requests[4]["params"]["message"]["parts"] == [
        {"kind": "data", "data": {"date": "2026-03-19"}}
    ]
    assert server.requests[3]["params"]["message"]["parts"] == [{"kind": "text", "text": "today"}]
    assert server.requests[5]["params"]["message"]["parts"] == [
        {"kind": "text", "text": "2026-04-05"}
    ]


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


async def test_send_message_draws_on_its_skills_pool(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.default = server.result(task_json())
    await client.send_message("x")  # the service's default skill, catholic_qa
    await client.send_message("x", skill_id="saint_lookup")
    await client.send_message("x", skill_id="a_skill_the_table_does_not_know")
    assert (client.stats.expensive.sent, client.stats.default.sent) == (1, 2)


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


async def test_one_rule_for_what_every_skill_method_sends(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    """Every skill method takes a str only (fetch(123) as search(123)), sends it stripped of
    a byte order mark and surrounding whitespace, and refuses one past the bound unsent."""
    for call in (client.search, client.fetch, client.ask, client.mass_readings, client.saints):
        with pytest.raises(TypeError, match=r"must be a str.*, not int"):
            await call(123)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="more than the 65,536"):
            await call("x" * (5 << 20))
        with pytest.raises(ValueError, match="blank"):
            await call("\ufeff \n")
    with pytest.raises(TypeError, match="query"):
        await client.saint_lookup(123)  # type: ignore[arg-type]
    assert server.requests == []
    server.reply(server.result(completed(artifact("search_results", data({"results": []})))))
    assert await client.search("\ufeff  grace\t\n") == []
    [sent] = server.requests
    assert sent["params"]["message"]["parts"] == [{"kind": "text", "text": "grace"}]


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


# An overall deadline per call ----------------------------------------------------------


def mock_client(
    handler: Any, clock: VirtualClock, **kwargs: Any
) -> tuple[m.AsyncMagisterium, MockTransport]:
    transport = MockTransport(handler)
    kwargs.setdefault("rate_limits", m.RateLimits.unlimited())
    client = m.AsyncMagisterium(
        token=TOKEN, base_url="https://a2a.example/api", clock=clock, transport=transport, **kwargs
    )
    return client, transport


async def run(clock: VirtualClock, call: Any) -> Any:
    task = asyncio.ensure_future(call)
    await clock.run_until_idle()
    return await task


async def test_total_timeout_bounds_every_attempt_and_wait() -> None:
    clock = VirtualClock()

    async def hang(request: MockRequest) -> MockResponse:
        await clock.sleep(math.inf)
        raise AssertionError("unreachable")

    policy = m.RetryPolicy(max_retries=5, total_timeout=12.0)
    client, transport = mock_client(hang, clock, retry_policy=policy, timeout=5.0)
    async with client:
        with pytest.raises(m.APITimeoutError, match=r"total_timeout \(12 s\)"):
            await run(clock, client.get_task("t"))
    # 5 s, backoff 0.5 s, 5 s, backoff 1 s: the third attempt is cut off at 12 s.
    assert len(transport.requests) == 3
    assert clock.now() == 12.0


async def test_total_timeout_counts_the_wait_for_the_quota() -> None:
    clock = VirtualClock()

    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    policy = m.RetryPolicy(total_timeout=30.0)
    client, transport = mock_client(
        answer, clock, retry_policy=policy, rate_limits=m.RateLimits(1, 1, period=60.0)
    )
    async with client:
        first = asyncio.ensure_future(client.search("a"))
        second = asyncio.ensure_future(client.search("b"))
        await clock.run_until_idle()
        assert await first == []
        with pytest.raises(m.APITimeoutError, match="total_timeout"):
            await second
    assert len(transport.requests) == 1 and clock.now() == 30.0


async def test_calls_waiting_for_the_pool_hold_no_task_of_their_own() -> None:
    # Thousands may wait at once: each waits in its caller's task, and the task that
    # shares a call in flight is made only once its turn has come.
    clock, gate = VirtualClock(), asyncio.Event()

    async def answer(request: MockRequest) -> MockResponse:
        await gate.wait()
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    client, transport = mock_client(answer, clock, max_concurrency=2)
    async with client:
        before = len(asyncio.all_tasks())
        calls = [asyncio.ensure_future(client.search(f"q{i}")) for i in range(200)]
        for _ in range(10):
            await asyncio.sleep(0)
        assert client.stats.default.waiting == 198
        # The 200 callers and what the two calls in flight run: not a task per waiting call.
        assert 200 < len(asyncio.all_tasks()) - before <= 200 + 2 * 2
        gate.set()
        assert await asyncio.gather(*calls) == [[]] * 200
    assert len(transport.requests) == 200


async def test_calls_cancelled_at_any_moment_of_their_turn_give_their_slots_back() -> None:
    clock = VirtualClock()

    async def answer(request: MockRequest) -> MockResponse:
        await clock.sleep(1.0)
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    client, _ = mock_client(answer, clock, max_concurrency=3)
    async with client:
        for turns in range(8):  # cancelled after 0 to 7 turns of the loop: in line, just
            calls = [asyncio.ensure_future(client.search(f"{turns}-{i}")) for i in range(9)]
            for _ in range(turns):  # let through, with a flight not yet started, sending
                await asyncio.sleep(0)
            for call in calls[::2]:
                call.cancel()
            await clock.run_until_idle()
            results = await asyncio.gather(*calls, return_exceptions=True)
            assert all(r == [] for r in results[1::2])
            stats = client.stats.default
            assert (stats.in_flight, stats.waiting) == (0, 0)
        # Every slot is free: three calls at once still go together.
        start = clock.now()
        await run(clock, asyncio.gather(*(client.search(f"last {i}") for i in range(3))))
        assert clock.now() - start == 1.0


@pytest.mark.parametrize("leader_cancelled", [False, True])
async def test_a_call_joining_one_in_line_ends_by_its_own_deadline_when_the_leader_leaves(
    leader_cancelled: bool,
) -> None:
    # The leader times out in line (or is cancelled): the call that joined it begins again,
    # and ends by its own deadline (it joined 20 s later), still in line.
    clock = VirtualClock(autojump=False)

    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    policy = m.RetryPolicy(total_timeout=30.0)
    client, transport = mock_client(
        answer, clock, retry_policy=policy, rate_limits=m.RateLimits(1, 1, period=120.0)
    )
    async with client:
        first = asyncio.ensure_future(client.search("a"))
        leader = asyncio.ensure_future(client.search("b"))  # in line until t=120
        await clock.advance(20.0)
        joiner = asyncio.ensure_future(client.search("b"))
        await clock.advance(5.0)
        if leader_cancelled:
            leader.cancel()
        await clock.advance(5.0)
        assert leader.done() and not joiner.done()
        await clock.advance(20.0)
        assert joiner.done()
        with pytest.raises(m.APITimeoutError, match="total_timeout"):
            await joiner
        assert clock.now() == 50.0
        assert await first == []
        await asyncio.gather(leader, return_exceptions=True)
    assert len(transport.requests) == 1


async def test_a_call_joining_another_ends_by_its_own_deadline_and_the_other_goes_on() -> None:
    clock = VirtualClock(autojump=False)

    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    client, transport = mock_client(answer, clock, rate_limits=m.RateLimits(1, 1, period=120.0))
    async with client:
        first = asyncio.ensure_future(client.search("a"))
        leader = asyncio.ensure_future(client.search("b"))  # in line until t=120
        await clock.advance(10.0)
        hasty = client.with_options(retry_policy=m.RetryPolicy(total_timeout=5.0))
        joiner = asyncio.ensure_future(hasty.search("b"))
        await clock.advance(5.0)
        assert joiner.done()
        with pytest.raises(m.APITimeoutError, match=r"total_timeout \(5 s\)"):
            await joiner
        assert not leader.done()
        await clock.advance(120.0)
        assert await leader == [] and await first == []
    assert len(transport.requests) == 2


async def test_total_timeout_bounds_the_wait_for_another_process_s_answer(
    memory_redis: Any,
) -> None:
    from fakeredis import FakeAsyncRedis

    redis: Any = FakeAsyncRedis(server=memory_redis)
    clock = VirtualClock()

    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    policy = m.RetryPolicy(total_timeout=2.0)
    client, transport = mock_client(answer, clock, retry_policy=policy, cache=redis)
    async with client:
        store: Any = client._cache.store

        async def held_by_another(key: str, seconds: float, owner: str) -> tuple[None, bool]:
            await redis.set(f"magisterium:cache-claim:{{{key}}}", b"another", px=60_000)
            return None, False

        store.claim = held_by_another  # another process sends every call, for a minute
        with pytest.raises(m.APITimeoutError, match=r"total_timeout \(2 s\)"):
            await run(clock, client.search("q"))
        assert clock.now() == 2.0
    assert transport.requests == []
    await redis.aclose()


async def test_a_call_failing_before_it_is_sent_fails_those_who_joined_it() -> None:
    clock, gate = VirtualClock(), asyncio.Event()

    async def answer(request: MockRequest) -> MockResponse:
        await gate.wait()
        return MockResponse.result(
            request, completed(artifact("search_results", data({"results": []})))
        )

    client, transport = mock_client(answer, clock, max_concurrency=1)
    async with client:
        busy = asyncio.ensure_future(client.search("other"))  # holds the only slot
        for _ in range(5):
            await asyncio.sleep(0)
        calls = [asyncio.ensure_future(client.search("same")) for _ in range(3)]
        for _ in range(5):
            await asyncio.sleep(0)
        ended = m.ClientClosedError("the client was closed while this call waited")
        client._scheduler.pool("default").fail(ended)  # ends the wait in line, as aclose()
        results = await asyncio.gather(*calls, return_exceptions=True)
        gate.set()
        assert await busy == []
    assert all(isinstance(r, m.ClientClosedError) for r in results)
    assert len({id(r) for r in results}) == 3  # each its own
    assert len(transport.requests) == 1  # "other" only
    assert len(client._cache._flights) == 0


@pytest.mark.parametrize(("retry_after", "requests"), [(30, 1), (4, 3)])
async def test_a_429_waiting_past_total_timeout_is_raised_at_once(
    retry_after: float, requests: int
) -> None:
    clock = VirtualClock()

    def limited(request: MockRequest) -> MockResponse:
        return MockResponse.error(
            request, -32003, "Rate limit exceeded", {"retryAfter": retry_after}, status=429
        )

    policy = m.RetryPolicy(total_timeout=10.0)
    client, transport = mock_client(limited, clock, retry_policy=policy)
    async with client:
        with pytest.raises(m.RateLimitError) as caught:
            await run(clock, client.search("q"))
    assert caught.value.retry_after == retry_after
    # Waits of 4 s fit twice before 10 s; the third would end at 12 s. 30 s never fits.
    assert len(transport.requests) == requests
    assert clock.now() == retry_after * (requests - 1)


async def test_without_total_timeout_a_call_takes_its_attempts_and_backoffs() -> None:
    clock = VirtualClock()

    async def hang(request: MockRequest) -> MockResponse:
        await clock.sleep(math.inf)
        raise AssertionError("unreachable")

    client, transport = mock_client(hang, clock, timeout=5.0)
    async with client:
        with pytest.raises(m.APITimeoutError, match="timed out after 5 s"):
            await run(clock, client.get_task("t"))
    assert len(transport.requests) == 3
    assert 5.0 * 3 < clock.now() <= 5.0 * 3 + 0.5 + 1.0


@pytest.mark.parametrize("value", [0, -1.0, math.nan])
def test_total_timeout_must_be_positive(value: float) -> None:
    with pytest.raises(ValueError, match="total_timeout"):
        m.RetryPolicy(total_timeout=value)


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, TypeError)])
def test_max_response_bytes_must_be_a_positive_int(value: Any, error: type) -> None:
    with pytest.raises(error, match="max_response_bytes"):
        m.AsyncMagisterium(token=TOKEN, max_response_bytes=value)


def test_max_response_bytes_is_read_only() -> None:
    client = m.AsyncMagisterium(token=TOKEN, max_response_bytes=1000)
    assert client.max_response_bytes == 1000
    with pytest.raises(AttributeError):
        client.max_response_bytes = 5  # type: ignore[misc]


TWO_RUNS = """
import asyncio, gc, sys
import magisterium_async as m
client = m.AsyncMagisterium("t", base_url=sys.argv[1], max_retries=0)

async def first():
    try:
        await client.search("grace")
    except m.MagisteriumError:
        pass  # the server's answer does not matter: the session now lives in this loop

async def second():
    try:
        await client.search("grace")
    except m.ClientClosedError as exc:
        print("ClientClosedError:", exc)
    await client.aclose()

asyncio.run(first())
asyncio.run(second())
del client
gc.collect()
"""


async def test_a_client_reused_in_a_second_asyncio_run_says_so(server: ScriptedServer) -> None:
    """The first loop ends with the client open: its connections are closed as that loop
    ends (no ``Unclosed connector``), and the second run is told the client is closed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "dev",  # every ResourceWarning shown
        "-c",
        TWO_RUNS,
        server.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert "ClientClosedError: the client was opened in another event loop" in out.decode()
    assert "Event loop is closed" not in err.decode()
    assert "ResourceWarning" not in err.decode() and "Unclosed" not in err.decode(), err.decode()


async def test_a_client_left_open_as_its_asyncio_run_ends_closes_its_connections_in_it(
    server: ScriptedServer,
) -> None:
    async def first(client: m.AsyncMagisterium) -> None:
        with contextlib.suppress(m.MagisteriumError):
            await client.search("grace")  # a connection opened, and left open

    client = m.AsyncMagisterium(TOKEN, base_url=server.url, max_retries=0)
    await asyncio.to_thread(asyncio.run, first(client))  # the server answers from this loop
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del client
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_a_client_used_from_a_second_thread_is_refused_and_stays_open(
    server: ScriptedServer,
) -> None:
    """A client is bound to the loop of its first call: another thread's loop is told the
    rule (not that the loop has ended), and the client goes on in its own."""
    refused: list[BaseException] = []
    bound: list[str] = []

    async def main() -> None:
        bound.append(threading.current_thread().name)
        async with m.AsyncMagisterium(TOKEN, base_url=server.url, max_retries=0) as client:
            with contextlib.suppress(m.MagisteriumError):
                await client.search("grace")

            def other() -> None:
                try:
                    asyncio.run(client.search("mercy"))
                except BaseException as exc:  # what the thread met: asserted below
                    refused.append(exc)

            thread = threading.Thread(target=other)
            thread.start()
            await asyncio.to_thread(thread.join)
            assert not client.is_closed
            with contextlib.suppress(m.APIResponseError, m.JSONRPCError):
                await client.search("grace")  # still open in its own loop

    await asyncio.to_thread(asyncio.run, main())  # the server answers from this loop
    [error] = refused
    assert type(error) is m.MagisteriumError
    assert "a client is used from one event loop, the one of its first call" in str(error)
    assert f"thread {bound[0]!r}" in str(error) and "has ended" not in str(error)


async def test_asks_run_at_once_when_only_the_rate_is_capped() -> None:
    """No concurrency cap on catholic_qa by default: the service documents only a rate."""
    clock = VirtualClock()
    arrived = asyncio.Event()
    seen: list[object] = []

    async def answer(request: MockRequest) -> MockResponse:
        seen.append(request)
        if len(seen) == 3:
            arrived.set()
        await arrived.wait()  # answers only once all three are in flight
        return MockResponse(
            json={
                "jsonrpc": "2.0",
                "id": request.json["id"],
                "error": {"code": -32603, "message": "done"},
            }
        )

    limits = m.RateLimits(100, 100)
    assert limits.expensive_concurrency is None and limits.default_concurrency is None
    client, _ = mock_client(answer, clock, rate_limits=limits, max_retries=0)
    async with client:
        results = await asyncio.wait_for(
            asyncio.gather(*(client.ask(f"q{i}") for i in range(3)), return_exceptions=True), 10
        )
    assert [type(r) for r in results] == [m.InternalServerError] * 3


async def test_a_trailing_slash_on_the_base_url_is_dropped() -> None:
    clock = VirtualClock()
    client, transport = mock_client(lambda r: MockResponse(status=404), clock, max_retries=0)
    assert client.base_url == "https://a2a.example/api"
    slashed = m.AsyncMagisterium(
        TOKEN, base_url="https://a2a.example/api/v1/a2a//", transport=transport
    )
    assert slashed.base_url == "https://a2a.example/api/v1/a2a"
    assert (
        m.AsyncMagisterium(TOKEN, base_url="https://a2a.example/").base_url
        == "https://a2a.example/"
    )


async def test_a_tls_handshake_failure_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    connections = 0

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")  # not TLS
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(plain, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with m.AsyncMagisterium(TOKEN, base_url=f"https://127.0.0.1:{port}/a2a") as client:
            with pytest.raises(m.TLSError, match="TLS") as raised:
                await client.search("grace")
    finally:
        listener.close()
        await listener.wait_closed()
    assert connections == 1 and isinstance(raised.value, m.APIConnectionError)
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


async def test_each_retry_is_logged_at_info_with_its_reason_and_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    answers = iter([MockResponse(status=503), MockResponse(status=503)])

    def handler(request: MockRequest) -> MockResponse:
        return next(answers, MockResponse(status=503))

    client, _ = mock_client(handler, clock, max_retries=1)
    caplog.set_level(logging.INFO, logger="magisterium_async")
    async with client:
        with pytest.raises(m.UnexpectedStatusError):
            await run(clock, client.search("grace"))
    retries = [r for r in caplog.records if r.levelno == logging.INFO and "retry" in r.message]
    assert len(retries) == 1
    message = retries[0].message
    assert message.startswith("message/send: unexpected HTTP 503")  # the method once
    assert "[HTTP 503, request 1]; retry 1 of 1 in" in message


@pytest.mark.parametrize(
    ("skill_id", "data", "named"),
    [
        ("document_search", None, "document_search"),  # the service did not say: we know
        (None, None, "catholic_qa"),  # the service's default skill
        ("document_search", {"skillId": "other"}, "other"),  # the service's word first
    ],
)
async def test_skill_not_found_names_the_skill_the_call_asked_for(
    client: m.AsyncMagisterium,
    server: ScriptedServer,
    skill_id: str | None,
    data: Any,
    named: str,
) -> None:
    server.default = server.error(-32002, "Skill not found", data=data)
    with pytest.raises(m.SkillNotFoundError) as caught:
        await client.send_message("x", skill_id=skill_id)
    assert caught.value.skill_id == named


# A client's life: bound to the loop of its first call, closed for good
# --------------------------------------------------------------------------------


def _mock_client() -> m.AsyncMagisterium:
    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(request, task_json())

    return m.AsyncMagisterium(
        token=TOKEN, base_url="http://127.0.0.1:1/a2a", transport=MockTransport(answer)
    )


def test_a_client_bound_to_an_ended_loop_counts_as_closed() -> None:
    client = _mock_client()
    assert not client.is_closed
    assert asyncio.run(client.get_task("t")).id == "task-1"  # bound to that loop
    with pytest.raises(m.ClientClosedError, match="opened in another event loop"):
        asyncio.run(client.get_task("t"))
    assert client.is_closed


async def test_a_closed_client_stays_closed() -> None:
    client = _mock_client()
    await client.get_task("t")
    await client.get_task("t")  # the same loop: still open
    await client.aclose()
    with pytest.raises(m.ClientClosedError, match="the client is closed"):
        await client.get_task("t")
    with pytest.raises(m.ClientClosedError):
        async with client:
            pass
    # A batch or harvest made now would read its whole input, failing each item.
    for made in (client.search_many, client.fetch_many, client.harvest):
        with pytest.raises(m.ClientClosedError, match="the client is closed"):
            made(iter(["a"]))


async def test_closing_a_client_closes_its_views_and_they_say_so() -> None:
    def answer(request: MockRequest) -> MockResponse:
        return MockResponse(status=500)

    client = m.AsyncMagisterium(token="t", transport=MockTransport(answer))
    view = client.with_options(max_retries=0)
    assert not view.is_closed
    await client.aclose()
    assert view.is_closed
    with pytest.raises(m.ClientClosedError, match="the client is closed"):
        await view.search("grace")
    with pytest.raises(m.ClientClosedError):
        await view.agent_card()
    with pytest.raises(m.ClientClosedError):
        async with client:
            pass


async def test_a_call_joining_one_whose_caller_leaves_goes_on_by_itself() -> None:
    """The first caller is cancelled once its request has left and a second call joined:
    its request is cancelled with it (it ran in its caller's task), and the second call,
    never cancelled, sends its own and gets its answer."""
    arrived, release, cancelled = asyncio.Event(), asyncio.Event(), []

    async def answer(request: MockRequest) -> MockResponse:
        arrived.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(request)
            raise
        hits = data({"results": [{"id": "1", "url": "https://x.example/1", "title": "One"}]})
        return MockResponse.result(request, completed(artifact("search_results", hits)))

    client, transport = mock_client(answer, VirtualClock())
    async with client:
        first = asyncio.ensure_future(client.search("grace"))
        await arrived.wait()  # the request is at the server
        second = asyncio.ensure_future(client.search("grace"))
        for _ in range(5):
            await asyncio.sleep(0)
        first.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert first.cancelled() and not second.done()
        release.set()
        assert [r.id for r in await second] == ["1"]
        assert len(transport.requests) == 2 and cancelled == transport.requests[:1]
        assert client.cache_stats.misses == 2


async def test_memory_is_memory_with_spaces_around_it_never_a_file() -> None:
    async with m.AsyncMagisterium(token="t", cache=" memory ") as client:
        assert client.cache_stats.entries == 0  # a memory store: 0, where none is None
