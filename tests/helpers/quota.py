"""Helpers shared by the rate-limit tests: a scheduler in virtual time at the Pro quota,
a fixed-window server to run scenarios against, and a client of the emulator that shares
its quota through Redis."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import magisterium_async as m
from magisterium_async import AsyncMagisterium, RateLimits, RetryPolicy, Timeouts
from magisterium_async._call import Caller
from magisterium_async._clock import Clock
from magisterium_async._config import DEFAULT_CACHE_POLICY, CallOptions, Priority
from magisterium_async._errors import RateLimitError
from magisterium_async._events import Counters, EventLog, Events, PoolEvent, log_event
from magisterium_async._http import JSONRPCClient
from magisterium_async._ratelimit import (
    Permit,
    Pool,
    PoolStats,
    SchedulerStats,
    SharedQuota,
)
from magisterium_async._ratelimit import Scheduler as _Scheduler
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    MockRequest,
    MockResponse,
    MockTransport,
    RateLimitConfig,
    VirtualClock,
)
from tests.conftest import artifact, data, task_json, text
from tests.helpers.redis_server import RedisServer

PRO = RateLimits.pro()  # 15 and 2 a minute; the safety margin is 1 s


class Scheduler(_Scheduler):
    """The engine's scheduler with the client's subscribers on its stream: the log, the
    counters behind ``.stats`` (as ``client.stats`` reads them), and ``on_event``."""

    def __init__(
        self, *args: Any, on_event: Callable[[PoolEvent], None] | None = None, **kwargs: Any
    ) -> None:
        self.counters = Counters()
        log = EventLog()
        heard = (log, self.counters) if on_event is None else (log, self.counters, on_event)
        super().__init__(*args, emit=Events(*heard), **kwargs)

    @property
    def stats(self) -> SchedulerStats:
        counters, now = self.counters, self.clock.now()

        def of(name: str) -> PoolStats:
            pool = self.pool(None if name == "unmetered" else name)  # type: ignore[arg-type]
            sent, limited, retries = counters.of(name)
            return PoolStats(
                name, sent, limited, retries, counters.paused_seconds(name, now), pool.rate,
                pool.configured, pool.in_flight, pool.waiting, pool.next_start_in(),
            )  # fmt: skip

        return SchedulerStats(
            of("default"), of("expensive"), of("unmetered"), self.in_flight, self.max_concurrency
        )


@asynccontextmanager
async def slot(
    pool: Pool, priority: Priority = "interactive", key: str | None = None
) -> AsyncIterator[Permit]:
    """A turn of ``pool``, released on the way out."""
    permit = await pool.acquire(priority, key)
    try:
        yield permit
    finally:
        permit.release()


def retried(sched: Scheduler, pool: str) -> None:
    """A retry in ``pool``, as the call loop tells it on the stream (the counters hear it)."""
    sched.counters(PoolEvent("retried", pool, sched.clock.now(), 0.0))


class _OnePool:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def pool(self, name: object) -> Pool:
        return self._pool


async def call_with_retries(
    attempt: Callable[[], Awaitable[Any]],
    *,
    pool: Pool,
    policy: RetryPolicy,
    clock: Clock,
    what: str = "x",
    priority: Priority = "interactive",
) -> Any:
    """``attempt`` as each try of a call through the client's call loop, in ``pool``'s
    turns: a ``RateLimitError`` it raises is answered as the service's 429, an
    ``APITimeoutError`` as a request that timed out; what it returns is returned."""
    returned: list[Any] = []

    async def answer(request: MockRequest) -> MockResponse:
        try:
            returned.append(await attempt())
        except RateLimitError as exc:
            data = None if exc.retry_after is None else {"retryAfter": exc.retry_after}
            return MockResponse.error(request, -32003, str(exc), data, status=429)
        except m.APITimeoutError:
            raise asyncio.TimeoutError from None
        return MockResponse.result(request, task_json())

    rpc = JSONRPCClient(
        "http://127.0.0.1:9/a2a", None, MockTransport(answer), max_response_bytes=1 << 20,
        clock=clock,
    )  # fmt: skip
    options = CallOptions(Timeouts(3600.0), policy, DEFAULT_CACHE_POLICY, "0.3", priority)
    caller = Caller(
        rpc, _OnePool(pool), clock, None, log_event,  # type: ignore[arg-type]
        protocol="0.3", extensions=(), card_options=options, on_card=lambda card: None,
    )  # fmt: skip
    name = None if pool.name == "unmetered" else pool.name
    await caller.call("tasks/get", {"id": what}, name, options)  # type: ignore[arg-type]
    return returned[-1]


def scheduler(
    limits: RateLimits = PRO,
    *,
    max_concurrency: int = 32,
    on_event: Callable[[PoolEvent], None] | None = None,
) -> tuple[Scheduler, VirtualClock]:
    clock = VirtualClock()
    sched = Scheduler(limits, max_concurrency=max_concurrency, clock=clock, on_event=on_event)
    return sched, clock


@dataclass
class Quota:
    """A fixed-window server: ``schedule`` is (seconds, limit per window) steps; random 429s
    (``spurious`` of them, ``retryAfter`` ``spurious_wait``) on top; ``jitter``: the most a
    request waits on its way before the server counts it."""

    schedule: tuple[tuple[float, int], ...]
    period: float
    jitter: float = 0.0
    spurious: float = 0.0
    spurious_wait: float = 0.0
    accepted: int = 0
    refused: int = 0

    window: int = -1
    count: int = 0

    def limit_at(self, t: float) -> int:
        return next(limit for at, limit in reversed(self.schedule) if t >= at)

    async def attempt(self, clock: VirtualClock, rng: random.Random) -> None:
        """One request: on its way (and the jitter), counted, answered 50 ms later; a 429
        carries whole seconds of ``retryAfter``, as the service sends them."""
        await clock.sleep(0.05 + rng.uniform(0, self.jitter))
        now = clock.now()
        wait: float | None = None
        if self.spurious and rng.random() < self.spurious:
            wait = self.spurious_wait
        else:
            if math.floor(now / self.period) != self.window:
                self.window, self.count = math.floor(now / self.period), 0
            if self.count < self.limit_at(self.window * self.period):
                self.count += 1
            else:
                wait = (self.window + 1) * self.period - now
        await clock.sleep(0.05)
        if wait is not None:
            self.refused += 1
            raise RateLimitError("Rate limit exceeded", data={"retryAfter": math.ceil(wait)})
        self.accepted += 1

    def ideal(self, requests: int) -> float:
        """When the window that admits the last request opens (plus the jitter)."""
        admitted, window = 0, 0
        while admitted + self.limit_at(window * self.period) < requests:
            admitted += self.limit_at(window * self.period)
            window += 1
        return window * self.period + self.jitter


async def scenario(
    quota: Quota, told: float, requests: int, *, pool: str = "default", seed: int = 1
) -> tuple[float, Scheduler]:
    """``requests`` calls fired at once through the real retry loop; the wall time."""
    clock = VirtualClock()
    limits = RateLimits(told, told, period=quota.period)
    sched = Scheduler(limits, max_concurrency=16, clock=clock)
    rng = random.Random(seed)

    def attempt(token: str | None = None) -> Awaitable[None]:
        return quota.attempt(clock, rng)

    tasks = [
        asyncio.create_task(
            call_with_retries(
                attempt,
                pool=sched.pool(pool),  # type: ignore[arg-type]
                policy=RetryPolicy(),
                clock=clock,
                what="x",
            )
        )
        for _ in range(requests)
    ]
    await clock.run_until_idle()
    await asyncio.gather(*tasks)
    return clock.now(), sched


PRO_SCENARIOS = {
    # told, the server, requests; goals: 429s per success, wall / ideal
    "right": (15, Quota(((0, 15),), 60.0, jitter=1.8), 150, 0.02, 1.15),
    "hidden": (150, Quota(((0, 15),), 60.0), 300, 0.10, 1.10),
    "shift": (15, Quota(((0, 15), (240, 5), (600, 15)), 60.0), 200, 0.10, 1.20),
    # 5% random 429s (12 s): some look like a window ending (three in one burst, or one no
    # probe could test in time); each such costs a few starts, won back within a window.
    "spurious": (15, Quota(((0, 15),), 60.0, spurious=0.05, spurious_wait=12), 150, 0.10, 1.30),
}


LIMIT, PERIOD = 10, 2.0
# The emulator counts a request when its handler runs, the shared log when Redis admits it:
# on a loaded 2-core machine (CI runs three suites side by side) the gap between the two
# varies by more than the default 40 ms margin, which is for network jitter, and a sliding
# window then sees one start too many. A tenth of the period covers the machine (the Pro
# quota's margin is a sixtieth of its minute, at 1 s).
MARGIN = PERIOD / 10


def quota_config(**kwargs: object) -> EmulatorConfig:
    limits = RateLimitConfig(default=LIMIT, expensive=2, period=PERIOD, algorithm="sliding")
    return EmulatorConfig(rate_limits=limits, **kwargs)  # type: ignore[arg-type]


def admitted_times(emu: Emulator) -> list[float]:
    return [a.time for a in emu.arrivals if a.admitted and a.skill == "document_search"]


def client_for(
    emu: Emulator, redis: RedisServer, workers: int = 1, **kwargs: object
) -> AsyncMagisterium:
    return AsyncMagisterium(
        token=emu.token,
        base_url=emu.base_url,
        rate_limits=RateLimits(LIMIT, 2, period=PERIOD, safety_margin=MARGIN),
        shared_quota=SharedQuota(redis.url, workers=workers, retry_interval=0.5),
        **kwargs,  # type: ignore[arg-type]
    )


# A service answering through MockTransport, for the client-level tests in virtual time.

Sent = list[tuple[str, float]]


def service(clock: VirtualClock, sent: Sent) -> Callable[[MockRequest], MockResponse]:
    """Searches find one document per query (``d-<query>``); every fetch finds nothing.
    Each request's query or id goes into ``sent`` with the time it arrived."""

    def answer(request: MockRequest) -> MockResponse:
        message = request.json["params"]["message"]
        part = message["parts"][0]
        what = part["text"] if part["kind"] == "text" else part["data"]["id"]
        sent.append((what, clock.now()))
        if message["metadata"]["skillId"] == "document_search":
            found = data({"results": [{"id": f"d-{what}", "url": "u", "title": what}]})
            results = artifact("search_results", found)
            return MockResponse.result(request, task_json(artifacts=[results]))
        missing = artifact("document", text("Document not found."))
        return MockResponse.result(request, task_json(artifacts=[missing]))

    return answer


QUOTA_WORKER = Path(__file__).parent.parent / "workers" / "redis_quota_worker.py"


async def run_quota_workers(
    emu: Emulator, redis_url: str, workers: int, each: int
) -> list[dict[str, Any]]:
    """``workers`` processes sharing one quota through ``redis_url``, ``each`` searches
    apiece: every worker connected, then all start at once; what each reported."""
    env = {**os.environ, "MAGISTERIUM_TOKEN": emu.token}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(QUOTA_WORKER),
            emu.base_url,
            redis_url,
            str(each),
            str(LIMIT),
            str(PERIOD),
            str(workers),
            str(MARGIN),  # the workers, the emulator and Redis on two cores
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert (await proc.stdout.readline()).strip() == b"READY"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    outputs = [await proc.communicate() for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * workers
    return [json.loads(out.splitlines()[-1]) for out, _ in outputs]
