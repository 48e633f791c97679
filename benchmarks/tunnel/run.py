"""Running one scenario in virtual time, three ways: the SDK, an oracle, a naive loop.

The SDK runs through its public API: ``AsyncMagisterium`` on a ``VirtualClock`` with a
``MockTransport`` whose handler is the scenario's server; processes sharing a quota are
clients in one event loop, each with its own ``SharedQuota`` on one in-memory Redis
(fakeredis). The **oracle** is the ideal the SDK's wall time is measured against: a client
that knows the server's state and sends each call the moment the server would admit it
(its answers still take the round trip). The **naive loop** (for the random 429s) sends
everything at once, up to the same concurrency, and sleeps ``retryAfter`` after a 429.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchmarks.tunnel.scenarios import Scenario
from benchmarks.tunnel.server import Server, Window
from magisterium_async import AsyncMagisterium, RateLimits, SharedQuota
from magisterium_async.testing import MockTransport, VirtualClock


class Caller(Protocol):
    """What a driver needs of a client (the SDK's, or one of the stand-ins below)."""

    def search(self, query: str) -> Awaitable[Any]: ...
    def ask(self, question: str) -> Awaitable[Any]: ...
    def search_many(self, queries: list[str], *, concurrency: int) -> AsyncIterator[Any]: ...
    def keyed(self, key: str) -> Caller: ...


@dataclass
class Timeline:
    """What the drivers saw: when the last call ended, and each interactive call's wait."""

    end: float = 0.0
    latencies: list[float] = field(default_factory=list)


class LateClock:
    """A clock whose timers wake up to ``late`` seconds late: a busy machine."""

    def __init__(self, clock: VirtualClock, late: float, rng: random.Random) -> None:
        self._clock, self._late, self._rng = clock, late, rng

    def now(self) -> float:
        return self._clock.now()

    async def sleep(self, seconds: float) -> None:
        extra = self._rng.uniform(0, self._late) if seconds > 0 else 0.0
        await self._clock.sleep(seconds + extra)


def make_server(scenario: Scenario, clock: VirtualClock, seed: int) -> Server:
    """The scenario's server, its randomness drawn from ``seed``."""
    period, allowed = scenario.period, scenario.allowed

    def default_limit(t: float) -> int:
        if scenario.drop is not None:
            begin, end, share = scenario.drop
            if begin * period <= t < end * period:
                return max(1, round(share * allowed))
        return allowed

    windows = {
        "default": Window(scenario.kind, period, default_limit),
        "expensive": Window(scenario.kind, period, lambda t: scenario.expensive),
    }
    return Server(
        clock,
        windows,
        random.Random(seed),
        spurious=scenario.spurious,
        spurious_wait=scenario.spurious_wait,
        others=random.Random(seed + 1000),  # the same in every client's run
    )


# The drivers: how calls arrive. Each returns when every call has ended.


async def drive(
    scenario: Scenario, callers: list[Caller], clock: VirtualClock, phase: float = 0.0
) -> Timeline:
    """Make the scenario's calls through ``callers`` (one per process); ``phase``: where
    in its window a cold interactive call comes (a share of the period)."""
    timeline = Timeline()
    procs, calls, period = len(callers), scenario.calls, scenario.period

    def share(index: int) -> list[str]:
        return [f"q{i}" for i in range(index, calls, procs)]

    async def timed(call: Awaitable[Any]) -> None:
        begun = clock.now()
        await call
        timeline.latencies.append(clock.now() - begun)

    kind = scenario.arrivals
    if kind in ("gather", "ask"):
        method = "ask" if kind == "ask" else "search"
        await asyncio.gather(
            *(getattr(c, method)(q) for i, c in enumerate(callers) for q in share(i))
        )
    elif kind == "worker":

        async def worker(caller: Caller, queue: list[str]) -> None:
            while queue:
                await caller.search(queue.pop())

        await asyncio.gather(
            *(worker(c, q) for i, c in enumerate(callers) for q in [share(i)] for _ in range(8))
        )
    elif kind == "bursts":

        async def burst(index: int) -> None:
            await clock.sleep(index * 3 * period)
            await asyncio.gather(
                *(
                    c.search(f"b{index}-{q}")
                    for i, c in enumerate(callers)
                    for q in share(i)[index::3]
                )
            )

        await asyncio.gather(*(burst(k) for k in range(3)))
    elif kind == "keys":  # one user's backlog, and another user's first call each window

        async def newcomers() -> None:
            for n in range(4):
                await clock.sleep(period + n * period * 1.37 + phase * period - clock.now())
                await timed(callers[0].keyed(f"new{n}").search(f"new{n}"))

        backlog = callers[-1].keyed("backlog")
        await asyncio.gather(newcomers(), *(backlog.search(f"b{j}") for j in range(calls)))
    else:  # harvest, cold: bulk in every process but the first (alone: in it too)
        bulk = callers[1:] or callers
        done = asyncio.Event()

        async def consume(caller: Caller, queries: list[str]) -> None:
            async for _ in caller.search_many(queries, concurrency=scenario.in_flight):
                pass

        async def bulk_work() -> None:
            await asyncio.gather(*(consume(c, share(i)) for i, c in enumerate(bulk)))
            done.set()

        async def interactive(seed_phase: float) -> None:
            if kind == "cold":
                await clock.sleep(7 * period + seed_phase * period)
                if not done.is_set():
                    await timed(callers[0].search("cold"))
                return
            if kind == "early":  # from the bulk's first window on, none waiting
                singles = []
                while not done.is_set():
                    await clock.sleep(0.35 * period)
                    singles.append(asyncio.ensure_future(timed(callers[0].search("e"))))
                await asyncio.gather(*singles)
                return
            await clock.sleep(period)
            index = 0
            while not done.is_set():
                await timed(callers[0].search(f"i{index}"))
                index += 1
                await clock.sleep(period / 4)

        await asyncio.gather(bulk_work(), interactive(phase))
    timeline.end = clock.now()
    return timeline


# The SDK.


class _SDK:
    """The SDK's client as a driver calls it: single calls interactive, batches bulk."""

    def __init__(self, client: AsyncMagisterium) -> None:
        self.client = client

    def search(self, query: str) -> Awaitable[Any]:
        return self.client.search(query)

    def ask(self, question: str) -> Awaitable[Any]:
        return self.client.ask(question)

    def search_many(self, queries: list[str], *, concurrency: int) -> AsyncIterator[Any]:
        return aiter(self.client.search_many(queries, concurrency=concurrency))

    def keyed(self, key: str) -> _SDK:
        return _SDK(self.client.with_options(fairness_key=key))


async def run_sdk(scenario: Scenario, seed: int) -> tuple[Timeline, Server, float]:
    """The scenario through the SDK; its timeline, the server, and the virtual time."""
    clock = VirtualClock()
    server = make_server(scenario, clock, seed)
    redis: Any = None
    if scenario.procs > 1:
        import fakeredis

        redis = fakeredis.FakeServer()
    limits = RateLimits(scenario.told, scenario.expensive, period=scenario.period)
    rng = random.Random(seed * 7919)
    clients = []
    for _ in range(scenario.procs):
        shared = None
        if redis is not None:
            import fakeredis

            shared = SharedQuota(fakeredis.FakeAsyncRedis(server=redis), account="account")
        clients.append(
            AsyncMagisterium(
                "token",
                transport=MockTransport(server.handle),
                clock=LateClock(clock, scenario.late, rng) if scenario.late else clock,
                rate_limits=limits,
                shared_quota=shared,
                max_concurrency=scenario.in_flight,
                protocol="0.3",
                cache_policy=None,
            )
        )
    other = _other(scenario, server)
    try:
        timeline = await drive(scenario, [_SDK(c) for c in clients], clock, phase(seed))
    finally:
        if other is not None:
            other.cancel()
        for client in clients:
            await client.aclose()
    return timeline, server, clock.now()


def _other(scenario: Scenario, server: Server) -> asyncio.Task[None] | None:
    if scenario.other is None:
        return None
    until = scenario.period * 1000
    return asyncio.ensure_future(
        scenario.other.run(server, "default", scenario.period, scenario.allowed, until)
    )


# The oracle: knows the server's state, sends each call the moment it would be admitted.


class _Oracle:
    def __init__(self, server: Server, in_flight: int, told: dict[str, Window]) -> None:
        self.server = server
        self.slots = asyncio.Semaphore(in_flight)
        self.told = told  # what the user allows the client: the ideal keeps to it too

    async def _call(self, pool: str) -> None:
        server, clock, told = self.server, self.server.clock, self.told[pool]
        async with self.slots:
            while (wait := max(server.windows[pool].wait(t := clock.now()), told.wait(t))) > 0:
                await clock.sleep(wait)
            told.take(clock.now())
            server.arrive(pool, "ours")
            await clock.sleep(2 * server.latency + server.jitter / 2)

    def search(self, query: str) -> Awaitable[None]:
        return self._call("default")

    def ask(self, question: str) -> Awaitable[None]:
        return self._call("expensive")

    async def search_many(self, queries: list[str], *, concurrency: int) -> AsyncIterator[None]:
        for _ in await asyncio.gather(*(self._call("default") for _ in queries)):
            yield None

    def keyed(self, key: str) -> _Oracle:
        return self


class _Naive(_Oracle):
    """Sends at once (up to its concurrency); after a 429, sleeps ``retryAfter``."""

    async def _call(self, pool: str) -> None:
        server, clock = self.server, self.server.clock
        while True:
            async with self.slots:
                await clock.sleep(server.latency + server.rng.uniform(0, server.jitter))
                wait = server.arrive(pool, "ours")
                await clock.sleep(server.latency)
            if wait == 0:
                return
            await clock.sleep(max(math.ceil(wait - 1e-9), 1))


async def run_stand_in(
    scenario: Scenario, seed: int, kind: Callable[[Server, int, dict[str, Window]], _Oracle]
) -> tuple[Timeline, Server]:
    """The scenario through the oracle or the naive loop (all processes as one)."""
    clock = VirtualClock()
    server = make_server(scenario, clock, seed)
    other = _other(scenario, server)
    told = {
        "default": Window("sliding", scenario.period, lambda t: int(scenario.told)),
        "expensive": Window("sliding", scenario.period, lambda t: scenario.expensive),
    }
    try:
        caller = kind(server, scenario.in_flight * scenario.procs, told)
        timeline = await drive(scenario, [caller] * scenario.procs, clock, phase(seed))
    finally:
        if other is not None:
            other.cancel()
    return timeline, server


def oracle(server: Server, in_flight: int, told: dict[str, Window]) -> _Oracle:
    """The ideal client: it keeps to what it was told, and to the server's quota."""
    return _Oracle(server, in_flight, told)


def naive(server: Server, in_flight: int, told: dict[str, Window]) -> _Oracle:
    """The naive retry-after loop (it keeps to nothing)."""
    return _Naive(server, in_flight, told)


def phase(seed: int) -> float:
    """Where in its window a seed's cold interactive call comes: a third apart."""
    return (seed % 3) / 3 + 0.1


def percentile(values: Iterable[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]
