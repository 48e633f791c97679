"""One call's way down: the loop's budgets (429s, a refused token), and how deep it goes.

Whatever a server answers (a wait of 0 forever, -0.0, a tiny one, nonsense, a 400-digit
number), one call sends a bounded number of requests, in virtual time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import types
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._call import CallPath, call_with_retries
from magisterium_async._clock import VirtualClock
from magisterium_async._config import (
    DEFAULT_CALL_OPTIONS,
    DEFAULT_RETRY_POLICY,
    RateLimits,
    RetryPolicy,
)
from magisterium_async._errors import RateLimitError
from magisterium_async._events import PoolEvent
from magisterium_async._http._jsonrpc import Transport
from magisterium_async._ratelimit import Scheduler
from magisterium_async._skills import SendParams
from magisterium_async._telemetry import Telemetry
from magisterium_async.testing import MockRequest, MockResponse, MockTransport
from tests.conftest import CARD, artifact, data, task_json

from .conftest import TOKEN, ScriptedServer

DEFAULT = RetryPolicy()


def limited(retry_after: Any = None) -> RateLimitError:
    data = None if retry_after is None else {"retryAfter": retry_after}
    return RateLimitError("Rate limit exceeded", data=data)


def requests_until_the_budget_runs_out(policy: RetryPolicy, window: float) -> int:
    """The requests one call sends when every answer is a 429 of ``window`` seconds."""
    sent, waited = 0, 0.0
    while True:
        sent += 1
        floor = policy.min_retry_after * 2.0 ** (sent - 1)
        waited += min(max(window, floor), policy.max_retry_after)
        if waited > policy.rate_limit_budget:
            return sent


# One 429 turned into waits, by the pool --------------------------------------------------


async def told(error: RateLimitError, policy: RetryPolicy = DEFAULT, earlier: int = 0) -> Any:
    """What a fresh pool makes of ``error``: the window it learns (its ``rate_limited``
    event) and the wait of the call (``earlier``: the call's 429s before)."""
    events: list[PoolEvent] = []
    clock = VirtualClock()
    sched = Scheduler(RateLimits.pro(), max_concurrency=1, clock=clock, on_event=events.append)
    async with sched.pool("default").slot() as permit:
        delay = permit.rate_limited(error.retry_after, policy, earlier)
    await sched.aclose()
    (window,) = [e.value for e in events if e.kind == "rate_limited"]
    return window, delay


async def test_the_service_wait_is_the_window_and_the_delay() -> None:
    assert await told(limited(7)) == (7.0, 7.0)
    assert await told(limited(2.5), earlier=3) == (2.5, 2.5)


async def test_a_tiny_wait_gets_a_floor_that_doubles_with_each_429_of_the_call() -> None:
    waits = [await told(limited(0), earlier=n) for n in range(13)]
    assert [w[0] for w in waits] == [0.0] * 13  # what the pool learns: as said
    assert [w[1] for w in waits] == [0.1 * 2**n for n in range(11)] + [120.0, 120.0]


async def test_no_wait_given_falls_back_and_absurd_ones_are_capped() -> None:
    assert await told(limited()) == (5.0, 5.0)
    assert await told(limited(10**400)) == (120.0, 120.0)
    assert await told(limited(3600)) == (120.0, 120.0)
    policy = RetryPolicy(max_retry_after=30, fallback_retry_after=2, min_retry_after=1)
    assert await told(limited("nan"), policy) == (2.0, 2.0)
    assert await told(limited(0), policy, 10) == (0.0, 30.0)


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
        RetryPolicy(**kwargs)


# Bounded, whatever the answer ----------------------------------------------------------


async def hammer(
    answer: Any, *, calls: int = 1, policy: RetryPolicy = DEFAULT
) -> tuple[list[BaseException | object], int, float, list[PoolEvent]]:
    """``calls`` calls, each answered a 429 with ``retryAfter`` ``answer`` forever."""
    clock = VirtualClock()
    events: list[PoolEvent] = []
    sched = Scheduler(RateLimits.pro(), max_concurrency=32, clock=clock, on_event=events.append)
    sent = 0

    async def attempt(token: str | None = None) -> object:
        nonlocal sent
        sent += 1
        await clock.sleep(0.05)
        raise limited(answer)

    tasks = [
        asyncio.create_task(
            call_with_retries(
                attempt, pool=sched.pool("default"), policy=policy, clock=clock, what="x"
            )
        )
        for _ in range(calls)
    ]
    await clock.run_until_idle()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    await sched.aclose()
    return outcomes, sent, clock.now(), events


@pytest.mark.parametrize("answer", [0, -0.0, 1e-9, "0", 0.0001])
async def test_a_zero_or_tiny_wait_forever_ends_after_a_bounded_number_of_requests(
    answer: Any,
) -> None:
    outcomes, sent, elapsed, _ = await hammer(answer)
    assert len(outcomes) == 1 and isinstance(outcomes[0], m.RateLimitError)
    assert sent == requests_until_the_budget_runs_out(DEFAULT, 0.0) == 17
    assert elapsed <= DEFAULT.rate_limit_budget + 1  # the budget, in virtual time


@pytest.mark.parametrize("answer", ["nan", -5, True, "soon", None, 10**400, "1e999"])
async def test_nonsense_waits_are_absent_or_capped_and_still_bounded(answer: Any) -> None:
    outcomes, sent, _, _ = await hammer(answer)
    assert isinstance(outcomes[0], m.RateLimitError)
    assert sent <= 17


async def test_many_calls_meeting_zero_waits_never_storm() -> None:
    outcomes, sent, _, events = await hammer(0, calls=20)
    assert all(isinstance(o, m.RateLimitError) for o in outcomes)
    assert sent == 20 * 17
    starts = sorted(e.time for e in events if e.kind == "sent")
    # Each call's own floor doubles: never more than the calls' first tries in one second
    # past the first few, whatever the pool does.
    assert sum(1 for t in starts if t < 1.0) <= 20 * 4


async def test_a_budget_smaller_than_one_wait_raises_at_once() -> None:
    policy = RetryPolicy(rate_limit_budget=1)
    outcomes, sent, _, _ = await hammer(30, policy=policy)
    assert isinstance(outcomes[0], m.RateLimitError)
    assert outcomes[0].retry_after == 30
    assert sent == 1


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


# Every way out of a try frees its slot -----------------------------------------------------


def _fails_with(error: BaseException) -> Any:
    async def attempt(token: str | None = None) -> object:
        raise error

    return attempt


async def assert_the_next_call_gets_through(sched: Scheduler, clock: VirtualClock) -> None:
    """Nothing is in flight, and a call starts (with a leaked slot of ``max_concurrency=1``
    it would wait forever)."""
    assert sched.stats.in_flight == 0

    async def ok(token: str | None = None) -> str:
        return "ok"

    pool = sched.pool("default")
    after = asyncio.create_task(
        call_with_retries(ok, pool=pool, policy=DEFAULT, clock=clock, what="next")
    )
    await clock.run_until_idle()
    assert after.done() and after.result() == "ok"
    await sched.aclose()


@pytest.mark.parametrize(
    "error",
    [
        m.InvalidParamsError("bad params"),  # final at once
        m.AuthenticationError("Unauthorized"),  # final at once (the renewal is above this)
        m.InternalServerError("boom"),  # transient: every retry fails too
        limited(1000),  # a 429 past the budget
        RuntimeError("a bug in the attempt"),  # not ours: passes through, slot freed
    ],
    ids=lambda e: type(e).__name__,
)
async def test_a_call_that_fails_frees_its_slot_for_the_next(error: BaseException) -> None:
    clock = VirtualClock()
    sched = Scheduler(RateLimits.pro(), max_concurrency=1, clock=clock)
    pool = sched.pool("default")
    policy = RetryPolicy(max_retries=2, rate_limit_budget=10)
    failing = asyncio.create_task(
        call_with_retries(_fails_with(error), pool=pool, policy=policy, clock=clock, what="x")
    )
    await clock.run_until_idle()
    with pytest.raises(type(error)):
        await failing
    assert pool.stats(clock.now()).in_flight == 0
    await assert_the_next_call_gets_through(sched, clock)


async def test_a_call_cancelled_while_sending_or_waiting_frees_its_place() -> None:
    clock = VirtualClock()
    sched = Scheduler(RateLimits.pro(), max_concurrency=1, clock=clock)
    pool = sched.pool("default")
    sending = asyncio.Event()

    async def slow(token: str | None = None) -> object:
        sending.set()
        await clock.sleep(3600)
        return "late"

    calls = [
        asyncio.create_task(
            call_with_retries(slow, pool=pool, policy=DEFAULT, clock=clock, what=str(n))
        )
        for n in range(2)
    ]
    await sending.wait()  # the first sends; the second waits in line for the one slot
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    assert all(c.cancelled() for c in calls)
    assert pool.stats(clock.now()).waiting == 0
    await assert_the_next_call_gets_through(sched, clock)


# The call path: a refused token renewed once, the resend in a slot of its own
# --------------------------------------------------------------------------------


URL = "http://127.0.0.1:1/a2a"


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


def refusing(*refused: str) -> MockTransport:
    def answer(request: MockRequest) -> MockResponse:
        if request.headers["Authorization"].removeprefix("Bearer ") in refused:
            return MockResponse.error(request, -32004, "Unauthorized", status=401)
        return MockResponse.result(request, task_json())

    return MockTransport(answer)


def calls_over(http: MockTransport, tokens: Tokens) -> tuple[CallPath, Scheduler]:
    clock = VirtualClock()
    scheduler = Scheduler(m.RateLimits.unlimited(), max_concurrency=4, clock=clock)
    transport = Transport(URL, None, max_concurrency=4, connect_timeout=5.0, clock=clock, http=http)
    return CallPath(transport, scheduler, clock, tokens, Telemetry(URL)), scheduler


async def call(calls: CallPath) -> m.Task:
    return await calls.call(
        "tasks/get",
        {"id": "t"},
        "default",
        timeout=5.0,
        policy=DEFAULT_RETRY_POLICY,
        options=DEFAULT_CALL_OPTIONS,
    ).send()


async def test_the_resend_after_a_renewed_token_takes_a_slot_the_pool_counts() -> None:
    http, tokens = refusing("old"), Tokens()
    calls, scheduler = calls_over(http, tokens)
    task = await call(calls)
    assert task.id == "task-1"
    assert [r.headers["Authorization"] for r in http.requests] == ["Bearer old", "Bearer new"]
    assert tokens.refused == ["old"]
    stats = scheduler.stats.default
    assert (stats.sent, stats.retries) == (2, 0)  # seen by the pool; not a retry


async def test_a_renewed_token_refused_again_is_final() -> None:
    http, tokens = refusing("old", "new"), Tokens()
    calls, scheduler = calls_over(http, tokens)
    with pytest.raises(m.AuthenticationError):
        await call(calls)
    assert len(http.requests) == 2 and tokens.refused == ["old"]
    assert scheduler.stats.default.sent == 2


async def test_no_resend_when_the_source_has_no_new_token() -> None:
    http, tokens = refusing("old"), Tokens(renews=False)
    calls, scheduler = calls_over(http, tokens)
    with pytest.raises(m.AuthenticationError):
        await call(calls)
    assert len(http.requests) == 1 and scheduler.stats.default.sent == 1


async def test_every_try_of_a_call_sends_the_same_params() -> None:
    gate = asyncio.Event()
    answers = iter([503, 200])

    async def answer(request: MockRequest) -> MockResponse:
        await gate.wait()
        status = next(answers, 200)
        if status != 200:
            return MockResponse(status=status, content=b"busy")
        return MockResponse.result(request, task_json())

    http = MockTransport(answer)
    clock = VirtualClock()
    scheduler = Scheduler(m.RateLimits.unlimited(), max_concurrency=1, clock=clock)
    transport = Transport(URL, None, max_concurrency=1, connect_timeout=5.0, clock=clock, http=http)
    calls = CallPath(transport, scheduler, clock, None, Telemetry(URL))

    def send(text: str) -> Awaitable[m.Task]:
        message = m.Message(role="user", parts=[m.TextPart(text=text)], message_id=text)
        return calls.call(
            "message/send",
            SendParams(message),
            "default",
            timeout=5.0,
            policy=m.RetryPolicy(max_retries=1),
            options=DEFAULT_CALL_OPTIONS,
        ).send()

    pending = [asyncio.ensure_future(send(f"waiting-{i}")) for i in range(50)]
    gate.set()
    await clock.run_until_idle()  # the 503's backoff, in virtual time
    await asyncio.gather(*pending)
    first_call = "waiting-0"
    tries = [
        r.content for r in http.requests if r.json["params"]["message"]["messageId"] == first_call
    ]
    assert len(tries) == 2  # the 503, then its retry
    first, retried = (json.loads(t) for t in tries)
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
    of coroutines the caller's task awaits (an identical call in flight is shared by a
    task of its own, so a search crosses two tasks). Each frame counted once."""
    stacks: list[list[types.FrameType]] = []
    caller: asyncio.Task[Any] | None = None

    def answer(request: MockRequest) -> MockResponse:
        frames, frame = [], sys._getframe()
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        assert caller is not None
        stacks.append(frames + _awaiting(caller.get_coro()))
        found = data({"results": [{"id": "1", "url": "u", "title": "T"}]})
        return MockResponse.result(
            request, task_json(artifacts=[artifact("search_results", found)])
        )

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

    clock = VirtualClock()
    events: list[PoolEvent] = []
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url=URL,
        transport=MockTransport(answer),
        rate_limits=m.RateLimits.unlimited(),
        clock=clock,
        on_event=events.append,
    )
    async with client:
        call = asyncio.ensure_future(client.get_task("t"))
        await clock.run_until_idle()
        await call
    sent = [e.time for e in events if e.kind == "sent"]
    retries = [e for e in events if isinstance(e, m.RetryEvent)]
    assert [e.kind for e in events if e.kind != "sent"] == [
        "answered", "retried", "answered", "rate_limited", "retried", "answered",
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
        f"{failed.value:.3g} s",
        "tasks/get: rate limited (HTTP 429; the service asks to wait 7 s); retrying in 7 s",
    ]
