"""One call's way down, through the client: the loop's budgets (429s, transient failures,
a refused token), every way out freeing its turn, what it tells, and how deep it goes.

Whatever a server answers (a wait of 0 forever, -0.0, a tiny one, nonsense, a 400-digit
number), one call sends a bounded number of requests, in virtual time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._call import Caller
from magisterium_async._config import DEFAULT_CACHE_POLICY, CallOptions
from magisterium_async._events import PoolEvent, unheard
from magisterium_async._http import JSONRPCClient
from magisterium_async._ratelimit import Scheduler
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
from tests.conftest import CARD, artifact, data, task_json

from .conftest import TOKEN, ScriptedServer

URL = "http://127.0.0.1:1/a2a"
DEFAULT = m.RetryPolicy()
Answer = Callable[[MockRequest], Any]
_QUERIES = itertools.count()


def limited(retry_after: Any = None) -> Answer:
    """Every request answered HTTP 429 with ``retryAfter`` (none when ``None``), 50 ms
    after it was sent."""

    async def answer(request: MockRequest) -> MockResponse:
        data = None if retry_after is None else {"retryAfter": retry_after}
        return MockResponse.error(request, -32003, "Rate limit exceeded", data, status=429)

    return answer


def searched(request: MockRequest) -> MockResponse:
    found = data({"results": [{"id": "1", "url": "u", "title": "T"}]})
    return MockResponse.result(request, task_json(artifacts=[artifact("search_results", found)]))


def client_of(
    answer: Answer,
    clock: VirtualClock,
    events: list[PoolEvent],
    *,
    policy: m.RetryPolicy = DEFAULT,
    limits: m.RateLimits | None = None,
    max_concurrency: int = 32,
) -> tuple[m.AsyncMagisterium, MockTransport]:
    http = MockTransport(answer)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url=URL,
        transport=http,
        rate_limits=limits or m.RateLimits.pro(),
        retry_policy=policy,
        max_concurrency=max_concurrency,
        clock=clock,
        on_event=events.append,
    )
    return client, http


async def hammer(
    answer: Answer, *, calls: int = 1, policy: m.RetryPolicy = DEFAULT
) -> tuple[list[BaseException | object], int, float, list[PoolEvent]]:
    """``calls`` searches (each its own query) in the default pool at the Pro quota."""
    clock, events = VirtualClock(), []
    client, http = client_of(answer, clock, events, policy=policy)
    async with client:
        tasks = [asyncio.ensure_future(client.search(f"q{next(_QUERIES)}")) for _ in range(calls)]
        await clock.run_until_idle()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    return outcomes, len(http.requests), clock.now(), events


def requests_until_the_budget_runs_out(policy: m.RetryPolicy, window: float) -> int:
    """The requests one call sends when every answer is a 429 of ``window`` seconds."""
    sent, waited = 0, 0.0
    while True:
        sent += 1
        waited += policy.rate_limit_wait(window, sent - 1)
        if waited > policy.rate_limit_budget:
            return sent


# A 429's wait: the service's, within the policy's floor and cap ---------------------------


async def waits_after(*retry_after: Any, policy: m.RetryPolicy = DEFAULT) -> list[float]:
    """The delays of one call's retries after 429s of these ``retryAfter``s, then an
    answer (unlimited pools: nothing but the 429s decides)."""
    answers = iter(retry_after)
    waits: list[float] = []

    async def answer(request: MockRequest) -> MockResponse:
        try:
            return await limited(next(answers))(request)
        except StopIteration:
            return MockResponse.result(request, task_json())

    clock, events = VirtualClock(), []
    client, _ = client_of(answer, clock, events, policy=policy, limits=m.RateLimits.unlimited())
    async with client:
        call = asyncio.ensure_future(client.get_task("t"))
        await clock.run_until_idle()
        await call
    waits = [e.value for e in events if isinstance(e, m.RetryEvent)]
    told = [e.value for e in events if e.kind == "rate_limited"]
    assert told == waits  # the engine is told the wait the call waits
    return waits


async def test_the_service_wait_is_the_delay() -> None:
    assert await waits_after(7, 2.5) == [7.0, 2.5]


async def test_a_tiny_wait_gets_a_floor_that_doubles_with_each_429_of_the_call() -> None:
    assert await waits_after(*[0] * 13) == [0.1 * 2**n for n in range(11)] + [120.0, 120.0]


async def test_no_wait_given_falls_back_and_absurd_ones_are_capped() -> None:
    assert await waits_after(None, 10**400, 3600) == [5.0, 120.0, 120.0]
    policy = m.RetryPolicy(max_retry_after=30, fallback_retry_after=2, min_retry_after=1)
    assert await waits_after("nan", 0, policy=policy) == [2.0, 2.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_retry_after": 0}, "min_retry_after"),
        ({"min_retry_after": math.nan}, "min_retry_after"),
        ({"min_retry_after": 5, "max_retry_after": 1}, "must not exceed"),
    ],
)
def test_bad_floors_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        m.RetryPolicy(**kwargs)


# Bounded, whatever the answer ----------------------------------------------------------


@pytest.mark.parametrize("answer", [0, -0.0, 1e-9, "0", 0.0001])
async def test_a_zero_or_tiny_wait_forever_ends_after_a_bounded_number_of_requests(
    answer: Any,
) -> None:
    outcomes, sent, elapsed, _ = await hammer(limited(answer))
    assert len(outcomes) == 1 and isinstance(outcomes[0], m.RateLimitError)
    assert sent == requests_until_the_budget_runs_out(DEFAULT, 0.0) == 17
    assert elapsed <= DEFAULT.rate_limit_budget + 1  # the budget, in virtual time


@pytest.mark.parametrize("answer", ["nan", -5, True, "soon", None, 10**400, "1e999"])
async def test_nonsense_waits_are_absent_or_capped_and_still_bounded(answer: Any) -> None:
    outcomes, sent, _, _ = await hammer(limited(answer))
    assert isinstance(outcomes[0], m.RateLimitError)
    assert sent <= 17


async def test_many_calls_meeting_zero_waits_never_storm() -> None:
    outcomes, sent, _, events = await hammer(limited(0), calls=20)
    assert all(isinstance(o, m.RateLimitError) for o in outcomes)
    assert sent <= 20 * 17
    starts = sorted(e.time for e in events if e.kind == "sent")
    # Each call's own floor doubles: never more than the calls' first tries in one second
    # past the first few, whatever the pool does.
    assert sum(1 for t in starts if t < 1.0) <= 20 * 4


async def test_a_budget_smaller_than_one_wait_raises_at_once() -> None:
    outcomes, sent, _, _ = await hammer(limited(30), policy=m.RetryPolicy(rate_limit_budget=1))
    assert isinstance(outcomes[0], m.RateLimitError)
    assert outcomes[0].retry_after == 30
    assert sent == 1


async def test_a_429_whose_wait_ends_past_the_deadline_is_raised_at_once() -> None:
    policy = m.RetryPolicy(total_timeout=20)
    outcomes, sent, elapsed, _ = await hammer(limited(30), policy=policy)
    assert isinstance(outcomes[0], m.RateLimitError) and outcomes[0].retry_after == 30
    assert (sent, elapsed) == (1, 0.0)


async def test_transient_failures_are_retried_max_retries_times_with_backoff() -> None:
    async def busy(request: MockRequest) -> MockResponse:
        return MockResponse(status=503, content=b"busy")

    outcomes, sent, _, events = await hammer(busy, policy=m.RetryPolicy(max_retries=3))
    assert isinstance(outcomes[0], m.UnexpectedStatusError)
    assert sent == 4
    waits = [e.value for e in events if isinstance(e, m.RetryEvent)]
    assert [round(w / (0.5 * 2**n), 2) <= 1 for n, w in enumerate(waits)] == [True] * 3


# The same reading for every kind of answer ------------------------------------------------


async def test_agent_card_429_honours_retry_after_like_rpc_calls(server: ScriptedServer) -> None:
    from aiohttp import web

    answers = [
        web.Response(status=429, headers={"Retry-After": "3"}),
        web.json_response(CARD),
    ]

    async def serve(request: web.Request) -> web.StreamResponse:
        return answers.pop(0)

    server.extra_routes["/.well-known/agent.json"] = serve
    sleeps: list[float] = []

    class Clock:
        def now(self) -> float:
            return 0.0

        async def sleep(self, seconds: float) -> None:
            sleeps.append(seconds)

    async with m.AsyncMagisterium(token=TOKEN, base_url=server.url, clock=Clock()) as client:
        assert (await client.agent_card()).name == "Magisterium AI"
    assert sleeps == [3.0]  # the header's wait, read where every 429 is read


# Every way out of a try frees its turn -----------------------------------------------------


def failing(error: str) -> Answer:
    def answer(request: MockRequest) -> MockResponse:
        if request.json["params"]["message"]["parts"][0]["text"] == "next":
            return searched(request)
        if error == "RuntimeError":
            raise RuntimeError("a bug in the transport")
        code, status = {
            "InvalidParamsError": (-32602, 200),  # final at once
            "AuthenticationError": (-32004, 401),  # final at once (a fixed token)
            "InternalServerError": (-32603, 200),  # transient: every retry fails too
            "RateLimitError": (-32003, 429),  # a 429 past the budget
        }[error]
        return MockResponse.error(request, code, error, {"retryAfter": 1000}, status=status)

    return answer


@pytest.mark.parametrize(
    "error",
    ["InvalidParamsError", "AuthenticationError", "InternalServerError", "RateLimitError",
     "RuntimeError"],
)  # fmt: skip
async def test_a_call_that_fails_frees_its_turn_for_the_next(error: str) -> None:
    clock, events = VirtualClock(), []
    policy = m.RetryPolicy(max_retries=2, rate_limit_budget=10)
    client, _ = client_of(failing(error), clock, events, policy=policy, max_concurrency=1)
    async with client:
        call = asyncio.ensure_future(client.search("fails"))
        await clock.run_until_idle()
        with pytest.raises(Exception) as raised:
            await call
        assert type(raised.value).__name__ == error
        assert client.stats.in_flight == 0
        after = asyncio.ensure_future(client.search("next"))
        await clock.run_until_idle()
        assert [hit.id for hit in await after] == ["1"]


async def test_a_call_cancelled_while_sending_or_waiting_frees_its_place() -> None:
    clock, events = VirtualClock(), []
    sending = asyncio.Event()

    async def slow(request: MockRequest) -> MockResponse:
        if request.json["params"]["message"]["parts"][0]["text"] == "next":
            return searched(request)
        sending.set()
        await clock.sleep(3600)
        return searched(request)

    client, _ = client_of(slow, clock, events, max_concurrency=1)
    async with client:
        calls = [asyncio.ensure_future(client.search(f"slow {n}")) for n in range(2)]
        await sending.wait()  # the first sends; the second waits in line for the one turn
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        assert all(c.cancelled() for c in calls)
        assert (client.stats.in_flight, client.stats.default.waiting) == (0, 0)
        after = asyncio.ensure_future(client.search("next"))
        await clock.run_until_idle()
        assert [hit.id for hit in await after] == ["1"]


async def test_a_connection_refused_gives_its_start_back() -> None:
    clock, events = VirtualClock(), []
    answers = iter([ConnectionRefusedError("refused")])

    def answer(request: MockRequest) -> MockResponse:
        error = next(answers, None)
        if error is not None:
            raise error
        return searched(request)

    limits = m.RateLimits(1, 1, period=60.0)
    client, http = client_of(answer, clock, events, limits=limits)
    async with client:
        call = asyncio.ensure_future(client.search("grace"))
        await clock.run_until_idle()
        assert [hit.id for hit in await call] == ["1"]
    assert len(http.requests) == 2
    assert clock.now() < 60  # the one start a minute was given back: the retry went


# A refused token: renewed once, the resend in a turn of its own ---------------------------


class Tokens:
    """A token source that has a new token ready after each refusal (``renews``)."""

    identity = "test"

    def __init__(self, renews: bool = True) -> None:
        self.current = "old"
        self.renews = renews
        self.refused: list[str] = []

    async def token(self) -> str:
        return self.current

    async def rejected(self, token: str) -> bool:
        self.refused.append(token)
        if self.renews:
            self.current = "new"
        return self.renews

    async def aclose(self) -> None:
        return None


async def get_task_with(tokens: Tokens, *refused: str) -> tuple[Any, list[str], list[PoolEvent]]:
    """``tasks/get`` through the call loop, a token source of ``tokens``, and a service
    refusing the tokens ``refused``: the task or the error, the tokens sent, the events."""

    def answer(request: MockRequest) -> MockResponse:
        if request.headers["Authorization"].removeprefix("Bearer ") in refused:
            return MockResponse.error(request, -32004, "Unauthorized", status=401)
        return MockResponse.result(request, task_json())

    clock, events, http = VirtualClock(), [], MockTransport(answer)
    scheduler = Scheduler(m.RateLimits.unlimited(), max_concurrency=4, clock=clock)
    rpc = JSONRPCClient(URL, None, http, max_response_bytes=1 << 20, clock=clock)
    options = CallOptions(m.Timeouts(), DEFAULT, DEFAULT_CACHE_POLICY, "0.3")
    caller = Caller(
        rpc, scheduler, clock, tokens, events.append, protocol="0.3", extensions=(),
        card_options=options, on_card=unheard,  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        outcome: Any = await caller.call("tasks/get", {"id": "t"}, "default", options)
    except m.MagisteriumError as exc:
        outcome = exc
    await scheduler.aclose()
    sent = [r.headers["Authorization"].removeprefix("Bearer ") for r in http.requests]
    return outcome, sent, events


async def test_the_resend_after_a_renewed_token_takes_a_turn_and_is_no_retry() -> None:
    tokens = Tokens()
    task, sent, events = await get_task_with(tokens, "old")
    assert task.id == "task-1"
    assert sent == ["old", "new"] and tokens.refused == ["old"]
    kinds = [e.kind for e in events]
    assert (kinds.count("answered"), kinds.count("retried")) == (2, 0)


async def test_a_renewed_token_refused_again_is_final() -> None:
    tokens = Tokens()
    error, sent, _ = await get_task_with(tokens, "old", "new")
    assert isinstance(error, m.AuthenticationError)
    assert sent == ["old", "new"] and tokens.refused == ["old"]


async def test_no_resend_when_the_source_has_no_new_token() -> None:
    error, sent, _ = await get_task_with(Tokens(renews=False), "old")
    assert isinstance(error, m.AuthenticationError) and sent == ["old"]


async def test_every_try_of_a_call_sends_the_same_params() -> None:
    answers = iter([503, 200])

    def answer(request: MockRequest) -> MockResponse:
        if next(answers, 200) != 200:
            return MockResponse(status=503, content=b"busy")
        return MockResponse.result(request, task_json())

    clock, events = VirtualClock(), []
    client, http = client_of(answer, clock, events, limits=m.RateLimits.unlimited())
    async with client:
        call = asyncio.ensure_future(client.send_message("hello"))
        await clock.run_until_idle()
        await call
    first, retried = (json.loads(r.content) for r in http.requests)
    assert first["params"] == retried["params"] and first["id"] != retried["id"]


# How deep one call goes ------------------------------------------------------------------

_PACKAGE = Path(m.__file__).parent
_TESTING = _PACKAGE / "testing"


def _ours(code: types.CodeType) -> bool:
    where = Path(code.co_filename)
    return where.is_relative_to(_PACKAGE) and not where.is_relative_to(_TESTING)


def _awaiting(coro: Any) -> list[types.FrameType]:
    """The frames of a task that waits: its coroutine, the one it awaits, and so on down."""
    frames = []
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frames.append(coro.cr_frame)
        coro = coro.cr_await
    return frames


@pytest.mark.parametrize("total_timeout", [None, 60.0])
async def test_a_search_reaches_the_transport_through_at_most_ten_of_the_packages_frames(
    total_timeout: float | None,
) -> None:
    """Counted when ``MockTransport`` is asked for the answer: every frame whose code is
    the package's (the ``testing`` subpackage, where ``MockTransport`` lives, left out),
    below ``client.search()`` itself, on the stack of the task that sends and on the chain
    of coroutines the caller's task awaits. Each frame counted once."""
    stacks: list[list[types.FrameType]] = []
    caller: asyncio.Task[Any] | None = None

    def answer(request: MockRequest) -> MockResponse:
        frames, frame = [], sys._getframe()
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        assert caller is not None
        stacks.append(frames + _awaiting(caller.get_coro()))
        return searched(request)

    policy = m.RetryPolicy(total_timeout=total_timeout)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url=URL,
        transport=MockTransport(answer),
        rate_limits=m.RateLimits.unlimited(),
        retry_policy=policy,
    )
    async with client:
        caller = asyncio.ensure_future(client.search("grace"))
        assert [r.id for r in await caller] == ["1"]
    (frames,) = stacks
    seen = {id(f): f for f in frames if _ours(f.f_code) and f.f_code.co_name != "search"}
    names = [f.f_code.co_name for f in seen.values()]
    assert len(seen) <= 10, names


# What a call tells ----------------------------------------------------------------------


async def test_each_retry_is_one_event_with_its_real_delay_and_the_log_says_the_same(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="magisterium_async.retry")
    answers = iter([503, 429, 200])

    def answer(request: MockRequest) -> MockResponse:
        status = next(answers)
        if status == 503:
            return MockResponse(status=503, content=b"busy")
        if status == 429:
            return MockResponse.error(
                request, -32003, "Rate limited", {"retryAfter": 7}, status=429
            )
        return MockResponse.result(request, task_json())

    clock, events = VirtualClock(), []
    client, _ = client_of(answer, clock, events, limits=m.RateLimits.unlimited())
    async with client:
        call = asyncio.ensure_future(client.get_task("t"))
        await clock.run_until_idle()
        await call
    sent = [e.time for e in events if e.kind == "sent"]
    retries = [e for e in events if isinstance(e, m.RetryEvent)]
    assert [e.kind for e in events if e.kind != "sent"] == [
        "call_started", "answered", "retried", "answered", "rate_limited", "retried",
        "answered", "call_ended",
    ]  # fmt: skip
    failed, limited = retries
    assert failed.value == sent[1] - sent[0] > 0  # the backoff slept, not 1.0
    assert (failed.reason, failed.retry, failed.max_retries) == ("UnexpectedStatusError", 1, 2)
    assert (limited.value, limited.reason, limited.retry, limited.retry_after) == (
        7.0, "rate_limited", 0, 7.0,
    )  # fmt: skip
    assert sent[2] - sent[1] == 7.0
    said = [r.getMessage() for r in caplog.records if r.name == "magisterium_async.retry"]
    assert said == [
        f"tasks/get: unexpected HTTP 503 [HTTP 503, request 1]; retry 1 of 2 in "
        f"{failed.value:.3g}s",
        "tasks/get: rate limited (HTTP 429; the service asks to wait 7s); retrying in 7s",
    ]
