"""``client.with_options(...)`` and the priorities the client gives its calls, in virtual
time through ``MockTransport`` (the client's part of the engine; ``_client.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async import Priority
from magisterium_async._ratelimit import Permit, Pool
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
from tests.conftest import TOKEN, task_json
from tests.helpers.quota import Sent, service


def client_for(
    clock: VirtualClock, sent: Sent, **kwargs: Any
) -> tuple[m.AsyncMagisterium, MockTransport]:
    transport = MockTransport(service(clock, sent))
    kwargs.setdefault("rate_limits", m.RateLimits.pro())  # 15 a minute, a 1 s margin
    client = m.AsyncMagisterium(
        token=TOKEN, base_url="https://a2a.example/api", clock=clock, transport=transport, **kwargs
    )
    return client, transport


async def later(clock: VirtualClock, at: float, call: Awaitable[Any]) -> Any:
    await clock.sleep(at)
    return await call


async def drain(items: AsyncIterator[Any]) -> int:
    return sum([1 async for _ in items])


# Views share everything but their options ------------------------------------------------


async def test_a_view_shares_the_quota_pools_and_stats_with_its_parent() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent, rate_limits=m.RateLimits(1, 1, period=60.0))
    view = client.with_options(priority="bulk", fairness_key="user-1")
    async with client:
        await client.search("parent")
        second = asyncio.ensure_future(view.search("view"))
        await clock.run_until_idle()
        await second
        assert sent == [("parent", 0.0), ("view", pytest.approx(61.0))]  # one quota
        assert client.stats.default.sent == 2 and view.stats == client.stats


async def test_a_views_options_are_its_own() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent)
    view = client.with_options(priority="bulk", fairness_key="user-1", max_retries=0)
    assert (view.priority, view.fairness_key, view.retry_policy.max_retries) == (
        "bulk",
        "user-1",
        0,
    )
    assert (client.priority, client.fairness_key) == ("interactive", None)
    assert client.retry_policy.max_retries == 2
    nested = view.with_options(priority="interactive")
    assert (nested.priority, nested.fairness_key) == ("interactive", "user-1")
    await client.aclose()


async def test_a_views_max_retries_and_timeout_apply_to_its_calls_only() -> None:
    clock = VirtualClock()

    async def unwell(request: MockRequest) -> MockResponse:
        if request.json["params"]["message"]["parts"][0]["text"] == "hang":
            await clock.sleep(math.inf)
        return MockResponse(status=503, content="down for maintenance")

    transport = MockTransport(unwell)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url="https://a2a.example/api",
        clock=clock,
        transport=transport,
        rate_limits=m.RateLimits.unlimited(),
    )
    view = client.with_options(max_retries=0, timeout=2.0)
    async with client:
        for who, requests in ((view, 1), (client, 3)):  # the parent keeps its 2 retries
            before = len(transport.requests)
            call = asyncio.ensure_future(who.search("q"))
            await clock.run_until_idle()
            with pytest.raises(m.MagisteriumError):
                await call
            assert len(transport.requests) - before == requests
        hangs = asyncio.ensure_future(view.search("hang"))
        await clock.run_until_idle()
        with pytest.raises(m.APITimeoutError, match="after 2 s"):
            await hangs
        assert client.timeouts != view.timeouts


async def test_aclose_on_a_view_closes_nothing() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent)
    view = client.with_options(priority="bulk")
    async with view:
        await view.search("a")
    await view.aclose()
    assert not client.is_closed and not view.is_closed
    await client.search("b")
    late = asyncio.ensure_future(view.search("c"))  # bulk after an interactive call: paced
    await clock.run_until_idle()
    await late
    assert [what for what, _ in sent] == ["a", "b", "c"]
    await client.aclose()


async def test_closing_the_parent_closes_every_view() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent)
    view = client.with_options(fairness_key="k")
    await client.aclose()
    assert view.is_closed
    with pytest.raises(m.ClientClosedError):
        await view.search("x")
    with pytest.raises(m.ClientClosedError):
        await client.with_options(priority="bulk").search("y")
    assert sent == []


async def test_closing_the_parent_wakes_a_views_waiting_call() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent, rate_limits=m.RateLimits(1, 1, period=60.0))
    view = client.with_options(priority="bulk")
    await client.search("first")
    waiting = asyncio.ensure_future(view.search("waits"))
    await clock.advance(1.0)
    await client.aclose()
    with pytest.raises(m.ClientClosedError):
        await waiting
    assert [what for what, _ in sent] == ["first"]


async def test_with_options_clears_an_inherited_fairness_key_and_priority() -> None:
    client, _ = client_for(VirtualClock(), [])
    view = client.with_options(priority="bulk", fairness_key="user-1")
    kept = view.with_options()
    assert (kept.priority, kept.fairness_key) == ("bulk", "user-1")  # NOT_GIVEN: kept
    cleared = view.with_options(fairness_key=None, priority=None)
    assert (cleared.priority, cleared.fairness_key) == ("interactive", None)  # None: default
    assert (view.priority, view.fairness_key) == ("bulk", "user-1")
    await client.aclose()


async def test_none_takes_each_options_default_back() -> None:
    client, _ = client_for(VirtualClock(), [], timeout=5.0, max_retries=0)
    policy = m.RetryPolicy(max_retries=7)
    changed = client.with_options(
        timeout=9.0, retry_policy=policy, cache_policy=m.CachePolicy(rules={}), protocol="1.0"
    )
    assert changed.timeouts.default == 9.0 and changed.retry_policy == policy
    assert changed.cache_policy == m.CachePolicy(rules={}) and changed.protocol == "1.0"
    back = changed.with_options(
        timeout=None, retry_policy=None, max_retries=None, cache_policy=None, protocol=None
    )
    assert back.timeouts == m.DEFAULT_TIMEOUTS
    assert back.retry_policy == m.DEFAULT_RETRY_POLICY
    assert back.cache_policy == m.DEFAULT_CACHE_POLICY
    assert client.protocol == back.protocol == "0.3"  # "auto", before any agent card
    retried = changed.with_options(max_retries=1)  # applies to the view's own policy
    assert retried.retry_policy == dataclasses.replace(policy, max_retries=1)
    await client.aclose()


def test_with_options_covers_every_per_call_option() -> None:
    # Every constructor option is either changeable per view or owned by the client (its
    # connections, pools, token, cache store): a new option must be put in one or the other.
    per_view = set(inspect.signature(m.AsyncMagisterium.with_options).parameters) - {"self"}
    owned = {
        "token",
        "base_url",
        "rate_limits",
        "max_concurrency",
        "clock",
        "on_event",
        "trace_configs",
        "shared_quota",
        "credentials",
        "max_response_bytes",
        "transport",
        "proxy",
        "trust_env",
        "tracer_provider",
        "meter_provider",
        "cache",
        "extensions",
    }
    constructor = set(inspect.signature(m.AsyncMagisterium).parameters)
    assert constructor - owned <= per_view, constructor - owned - per_view
    assert {"timeout", "max_retries", "priority", "fairness_key", "cache_policy"} <= per_view
    assert {"protocol", "retry_policy"} <= per_view
    for option in inspect.signature(m.AsyncMagisterium.with_options).parameters.values():
        if option.name != "self":
            assert option.kind is inspect.Parameter.KEYWORD_ONLY
            assert option.default is m.NOT_GIVEN


async def test_a_views_protocol_is_its_own_on_the_same_connections() -> None:
    clock = VirtualClock()
    methods: list[str] = []

    def answer(request: MockRequest) -> MockResponse:
        methods.append(request.json["method"])
        if request.json["method"] == "SendMessage":
            v1_task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
            return MockResponse.result(request, {"task": v1_task})
        return MockResponse.result(request, task_json())

    transport = MockTransport(answer)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url="https://a2a.example/api",
        clock=clock,
        transport=transport,
        protocol="0.3",
        rate_limits=m.RateLimits.unlimited(),
    )
    async with client:
        await client.send_message("hello")
        await client.with_options(protocol="1.0").send_message("hello")
        await client.send_message("hello")
    assert methods == ["message/send", "SendMessage", "message/send"]


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"priority": "urgent"}, ValueError, "priority"),
        ({"priority": 1}, ValueError, "priority"),
        ({"fairness_key": 42}, TypeError, "fairness_key"),
        ({"fairness_key": b"user"}, TypeError, "fairness_key"),
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"max_retries": "2"}, TypeError, "max_retries"),
        ({"max_retries": True}, TypeError, "max_retries"),
        ({"max_retries": 10**30}, ValueError, "max_retries must be <= 100"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"timeout": "30"}, TypeError, "timeout"),
        ({"retry_policy": 3}, TypeError, "retry_policy"),
        ({"cache_policy": "none"}, TypeError, "cache_policy"),
        ({"protocol": "2.0"}, ValueError, "protocol"),
    ],
)
async def test_bad_options_are_refused_naming_the_argument(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    client, _ = client_for(VirtualClock(), [])
    with pytest.raises(error, match=named):
        client.with_options(**options)
    await client.aclose()


# Priorities the client gives its calls ------------------------------------------------------


def batch(client: m.AsyncMagisterium, kind: str, n: int, **kw: Any) -> AsyncIterator[Any]:
    inputs = [f"{kind}-{i}" for i in range(n)]
    if kind == "search_many":
        return aiter(client.search_many(inputs, concurrency=n, **kw))
    if kind == "fetch_many":
        return aiter(client.fetch_many(inputs, concurrency=n, **kw))
    return aiter(client.harvest(inputs, concurrency=n, **kw))


async def batch_then_single(
    kind: str, single: Callable[[m.AsyncMagisterium], Awaitable[Any]], **batch_kw: Any
) -> Sent:
    """At 15 a minute, a batch of 40 from t=0 and a single call at t=10: each query or id
    (the single call's is ``"single"``) with when it was sent, in the order sent."""
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent)
    async with client:
        job = asyncio.ensure_future(drain(batch(client, kind, 40, **batch_kw)))
        one = asyncio.ensure_future(later(clock, 10.0, single(client)))
        await clock.run_until_idle()
        await asyncio.gather(job, one)
    return sent


@pytest.mark.parametrize("kind", ["search_many", "fetch_many"])
async def test_batch_calls_are_bulk_and_a_single_call_goes_first(kind: str) -> None:
    """A single call made while a batch waits starts at the next free start, ahead of
    every batch call still waiting (first of the 15 at t=61)."""
    sent = await batch_then_single(kind, lambda client: client.search("single"))
    assert sent[15] == ("single", pytest.approx(61.0))  # right after the first 15


@pytest.mark.parametrize("kind", ["search_many", "fetch_many", "harvest"])
async def test_each_batch_asks_its_pool_for_bulk_turns_and_single_calls_for_interactive(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each call asks the pool for (harvest keeps a database in a worker thread, so
    this runs on the real clock with no quota, watching the pool's door)."""
    asked: list[tuple[str, str | None]] = []
    acquire = Pool.acquire

    async def watched(self: Pool, priority: Priority, key: str | None) -> Permit:
        asked.append((priority, key))
        return await acquire(self, priority, key)

    monkeypatch.setattr(Pool, "acquire", watched)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url="https://a2a.example/api",
        transport=MockTransport(service(VirtualClock(), [])),
        rate_limits=m.RateLimits.unlimited(),
    )
    async with client:
        view = client.with_options(fairness_key="user-1")
        await drain(batch(view, kind, 3))
        assert set(asked) == {("bulk", "user-1")}
        assert len(asked) >= 3
        asked.clear()
        await drain(batch(view, kind, 2, priority="interactive"))
        assert set(asked) == {("interactive", "user-1")}
        asked.clear()
        await view.search("one")
        await client.fetch("d-one")
        assert asked == [("interactive", "user-1"), ("interactive", None)]


async def test_a_batch_made_interactive_waits_its_turn_like_any_call() -> None:
    sent = await batch_then_single(
        "search_many", lambda client: client.search("single"), priority="interactive"
    )
    assert dict(sent)["single"] == pytest.approx(2 * 61.0)  # behind the 25 that waited


async def test_a_bulk_views_single_calls_are_bulk() -> None:
    sent = await batch_then_single(
        "search_many", lambda client: client.with_options(priority="bulk").search("single")
    )
    # Behind the 25 that waited: the batch's third window is paced (a bulk run of two
    # windows is a harvest), a start every 4 s, and the single call is the eleventh.
    assert dict(sent)["single"] == pytest.approx(2 * 61.0 + 10 * 4.0)


async def test_a_second_fairness_key_is_served_in_turn_not_after_the_first_keys_batch() -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent)
    a, b = client.with_options(fairness_key="a"), client.with_options(fairness_key="b")
    async with client:
        first = asyncio.ensure_future(drain(batch(a, "search_many", 100)))
        second = asyncio.ensure_future(later(clock, 10.0, drain(batch(b, "fetch_many", 3))))
        await clock.run_until_idle()
        await asyncio.gather(first, second)
    at = [t for what, t in sent if what.startswith("fetch_many")]
    # "a"'s calls carry a fairness key: paced from the first, a start every 4 s, although
    # the batch feeds them one at a time. "b" takes the next paced start after it arrives
    # (newcomer first), and every other one after that.
    assert at == [pytest.approx(12.0), pytest.approx(20.0), pytest.approx(28.0)]


@pytest.mark.parametrize("kind", ["search_many", "fetch_many", "harvest"])
async def test_a_batch_with_a_bad_priority_is_refused_naming_it(kind: str) -> None:
    client, transport = client_for(VirtualClock(), [])
    with pytest.raises(ValueError, match="priority"):
        batch(client, kind, 3, priority="urgent")
    assert transport.requests == []
    await client.aclose()


# A long wait for quota leaves a trace ---------------------------------------------------


async def test_a_long_wait_for_quota_is_logged_at_warning_once_then_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    sent: Sent = []
    client, _ = client_for(clock, sent, rate_limits=m.RateLimits(1, 1, period=60.0))
    caplog.set_level(logging.INFO, logger="magisterium_async.ratelimit")
    async with client:
        await client.search("first")  # the window's one start: no wait, nothing logged
        assert not [r for r in caplog.records if "quota is spent" in r.getMessage()]
        together = [asyncio.ensure_future(client.search(f"q{i}")) for i in range(3)]
        await clock.run_until_idle()
        await asyncio.gather(*together)  # three calls in line behind one wait: told once
        for i in range(2):  # a script's loop: each call waits a window of its own
            await client.search(f"loop {i}")
    told = [(r.levelno, r.getMessage()) for r in caplog.records if "quota is spent" in r.message]
    assert [level for level, _ in told] == [logging.WARNING, logging.INFO, logging.INFO]
    assert "default pool" in told[0][1] and "wait 1m01s" in told[0][1]


async def test_a_program_that_hears_the_events_is_told_of_a_long_wait_there_not_by_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As the CLI does: its status line shows the wait, and --json keeps stderr to one object.
    clock = VirtualClock()
    heard: list[m.PoolEvent] = []
    client, _ = client_for(
        clock, [], rate_limits=m.RateLimits(1, 1, period=60.0), on_event=heard.append
    )
    caplog.set_level(logging.INFO, logger="magisterium_async.ratelimit")
    async with client:
        await client.search("first")
        await client.search("second")  # waits a minute
    told = [r.levelno for r in caplog.records if "quota is spent" in r.getMessage()]
    assert told == [logging.INFO]
    assert [e.value for e in heard if e.kind == "waiting"] == [pytest.approx(61.0)]


async def test_a_short_wait_for_quota_is_not_news(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock()
    client, _ = client_for(clock, [], rate_limits=m.RateLimits(10, 1, period=5.0))
    caplog.set_level(logging.INFO, logger="magisterium_async.ratelimit")
    async with client:
        calls = [asyncio.ensure_future(client.search(f"q{i}")) for i in range(20)]
        await clock.run_until_idle()
        await asyncio.gather(*calls)
    assert not [r for r in caplog.records if "quota is spent" in r.getMessage()]
