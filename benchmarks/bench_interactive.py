"""Interactive latency beside bulk work: how soon a single call finds a start
while a bulk job keeps the same quota busy, and what that costs the bulk job.

Real time, at 10 searches per 1 s window (one *quota interval* is 0.1 s): a ``window``
server (``_server.py``) in its own process, the client told the same
(``RateLimits(10, 2, period=1)``, ``max_concurrency=B``).

- ``search_many`` over endless queries with B in flight (B = 16, 64) and a single
  ``search`` every 0.35 window (so the singles meet the window at every phase), 28 of
  them, each without waiting for the one before; then the same across four processes over
  one private ``redis-server`` (``SharedQuota(url, workers=4)``: singles in one process,
  ``search_many`` in three, B split). Neither names a priority: single calls are
  interactive and batches bulk by default. Goals: the singles' p95 at most three quota
  intervals (0.3 s), bulk gets at least 0.90 of the quota the singles leave
  (``(used - singles) / (allowed - singles)`` over the whole windows before the last
  single ended), no 429.
- A fairness key's newcomer: while one key has 1,000 single searches queued (or a
  ``search_many`` on one key keeps 64 in flight, its newcomers bulk too), a new key makes
  its first search every 0.45 window, 10 keys. Goal: each first search within two quota
  intervals (0.2 s).
- A lone bulk job: ``search_many`` of 25 queries, 16 in flight, nothing else on the
  quota. Goal: its wall time within 1.05x of the engine's before this pacing
  (:data:`BASELINE`).

Virtual time at the Pro quota (``RateLimits.pro()``: 15 a minute, one start every 4 s;
``catholic_qa`` 2 a minute), deterministic: the client on a ``VirtualClock`` and a
``MockTransport`` whose handler keeps a fixed-window quota of 15 (2) a minute and answers
after a 0.5 s round trip.

- A single ``search`` every 47 s (20 of them) beside a harvest's traffic (``search_many``,
  16 in flight, the harvest's default). Goal: p95 at most two quota intervals (8 s).
- A fairness key's newcomer, the two shapes above, every 47 s. Goal: within 8 s.
- A lone bulk job of 15 and 45 searches (one window's burst; three windows). Goal: within
  1.05x of :data:`BASELINE`.
- Cold: a harvest (``search_many``, 16 and 64 in flight) alone for seven windows, then one
  single search, at ten phases of the next window (a fresh client each). Goal: p95 at most
  0.3 window (18 s), the harvest using at least 0.90 of the quota before it, no 429. And a
  long harvest alone (300 searches): its wall time against bursting every window, the cost
  of pacing it.

``--quick``: real-time windows of 0.25 s (every time scaled by 0.25), 12 singles and 6
newcomers, the four-process row with B = 16 only; the lone job's real-time row is
reported against its ideal only (the baseline is the full run's). The virtual-time rows
are the same in both modes (they cost milliseconds).
"""

from __future__ import annotations

import asyncio
import math
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from ._quota_worker import Workers, make_client
from ._report import Row, Section
from ._server import ROOT, RedisServer, ServerProcess
from .bench_priority import across_case, local_case, quota_figures, round_trip

__all__ = ["BASELINE", "run"]

LIMIT, EXPENSIVE = 10, 2  # per window: the server's and the client's (real time)
BULK = (16, 64)  # bulk calls in flight
COUNT, QUICK_COUNT = 28, 12  # single searches
EVERY = 0.35  # windows between two single searches
NEWCOMERS, QUICK_NEWCOMERS = 10, 6  # fairness keys making their first search
NEW_EVERY = 0.45  # windows between two newcomers
CROWD = 1000  # one key's single searches queued
STUCK = 4  # windows a newcomer's first search is given before it counts as stuck
LONE = 25  # searches of the lone bulk job (real time)
MAX_P95_INTERVALS, MIN_BULK_SHARE, MAX_NEW_INTERVALS = 3, 0.90, 2
MAX_LONE_RATIO = 1.05

# Virtual time, the Pro quota.
PRO, PRO_EXPENSIVE, PRO_WINDOW = 15, 2, 60.0
PRO_RTT = 0.5  # the handler's round trip: half on the way there, half back
PRO_EVERY = 47.0  # seconds between two single calls (not a divisor of the window)
PRO_COUNT, PRO_NEWCOMERS, PRO_CROWD = 20, 10, 300
PRO_LONE = (15, 45)
COLD_WINDOWS = 7  # windows of bulk alone before the cold single call
COLD_PHASES = tuple(0.5 + 6.0 * i for i in range(10))  # where in its window it comes
PRO_LONG = 300  # searches of a long harvest alone (20 windows): what pacing it costs
MAX_COLD_SHARE = 0.3  # of a window: the cold call's p95
PRO_MAX_WAIT = 2 * PRO_WINDOW / PRO  # two quota intervals: 8 s

# The engine before this pacing (c2bf181): the wall time of each lone bulk job, in seconds
# (real time: the median of five runs on the development machine, 2 CPUs, round trip 7 ms).
BASELINE = {"real, 25 searches": 2.065, "Pro, 15 searches": 0.5, "Pro, 45 searches": 122.5}


def _job(server: ServerProcess, period: float, max_concurrency: int) -> dict[str, Any]:
    return {
        "token": server.token,
        "base_url": server.base_url,
        "default": LIMIT,
        "expensive": EXPENSIVE,
        "period": period,
        "max_concurrency": max_concurrency,
    }


def _queries(prefix: str) -> Iterator[str]:
    index = 0
    while True:
        yield f"{prefix} {index}"
        index += 1


def _p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(sorted(values), n=20, method="inclusive")[18]


async def _drain(batch: Any) -> int:
    done = 0
    async with batch as items:
        async for item in items:
            done += item.error is None
    return done


# Fairness keys' newcomers ---------------------------------------------------------------


async def _newcomers(
    client: Any,
    shape: str,
    count: int,
    every: float,
    stuck: float,
    sleep: Callable[[float], Awaitable[None]],
    now: Callable[[], float],
) -> list[float]:
    """``count`` new keys, one every ``every`` s, each making its first search while a
    crowd on one key waits (``shape``: ``queued``, single searches; ``bulk``, a
    ``search_many`` with 64 in flight, the newcomers bulk too). Their latencies
    (``inf``: not answered within ``stuck`` s)."""
    crowd = client.with_options(fairness_key="user-crowd")
    if shape == "queued":
        tasks = [asyncio.ensure_future(crowd.search(f"crowd {i}")) for i in range(CROWD)]
        priority = "interactive"
    else:
        tasks = [
            asyncio.ensure_future(_drain(crowd.search_many(_queries("crowd"), concurrency=64)))
        ]
        priority = "bulk"
    latencies: list[float] = []

    async def first(key: int) -> None:
        await sleep((key + 1) * every)
        view = client.with_options(priority=priority, fairness_key=f"user-{key}")
        started = now()
        call = asyncio.ensure_future(view.search("a first question"))
        limit = asyncio.ensure_future(sleep(stuck))
        await asyncio.wait((call, limit), return_when=asyncio.FIRST_COMPLETED)
        limit.cancel()
        if call.done() and call.exception() is None:
            latencies.append(now() - started)
        else:
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            latencies.append(math.inf)

    try:
        await asyncio.gather(*(first(k) for k in range(count)))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


async def _real_newcomers(server: ServerProcess, period: float, shape: str, count: int) -> Any:
    async with make_client(_job(server, period, 64)) as client:
        server.reset()
        return await _newcomers(
            client, shape, count, NEW_EVERY * period, STUCK * period, asyncio.sleep, time.monotonic
        )


async def _real_lone(server: ServerProcess, period: float) -> float:
    async with make_client(_job(server, period, 16)) as client:
        server.reset()
        started = time.monotonic()
        done = await _drain(client.search_many([f"lone {i}" for i in range(LONE)]))
        wall = time.monotonic() - started
    if done != LONE:
        raise RuntimeError(f"the lone job answered {done} of {LONE}")
    return wall


# Virtual time: the Pro quota ------------------------------------------------------------


class _ProServer:
    """A fixed-window quota of 15 (``catholic_qa``: 2) a minute in front of a one-hit
    search, in virtual time; each request answered after :data:`PRO_RTT`."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.accepted: list[float] = []  # the default pool's, in order
        self.rate_limited = 0
        self._counts: dict[tuple[str, int], int] = {}

    async def __call__(self, request: Any) -> Any:
        from magisterium_async.testing import MockResponse

        await self.clock.sleep(PRO_RTT / 2)
        now = self.clock.now()
        message = request.json["params"]["message"]
        pool = "expensive" if message["metadata"]["skillId"] == "catholic_qa" else "default"
        window = math.floor(now / PRO_WINDOW)
        count = self._counts.get((pool, window), 0)
        if count >= (PRO_EXPENSIVE if pool == "expensive" else PRO):
            self.rate_limited += 1
            wait = round((window + 1) * PRO_WINDOW - now, 6)
            await self.clock.sleep(PRO_RTT / 2)
            return MockResponse.error(
                request, -32003, "Rate limit exceeded", {"retryAfter": wait}, status=429
            )
        self._counts[(pool, window)] = count + 1
        if pool == "default":
            self.accepted.append(now)
        await self.clock.sleep(PRO_RTT / 2)
        hit = {"id": "doc-1", "url": "u", "title": "Grace"}
        part = {"kind": "data", "data": {"results": [hit]}}
        task = {
            "kind": "task",
            "id": "task-1",
            "contextId": "ctx-1",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a-1", "name": "search_results", "parts": [part]}],
        }
        return MockResponse.result(request, task)


def _pro_client(clock: Any, server: _ProServer) -> Any:
    from magisterium_async import AsyncMagisterium, RateLimits
    from magisterium_async.testing import MockTransport

    return AsyncMagisterium(
        token="bench-token",
        base_url="https://a2a.example/api",
        rate_limits=RateLimits.pro(),
        clock=clock,
        transport=MockTransport(server),
    )


async def _until_done(clock: Any, tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Move virtual time on until every task is done."""
    while not all(task.done() for task in tasks):
        await clock.advance(1.0)


async def _pro_beside_bulk() -> dict[str, Any]:
    from magisterium_async.testing import VirtualClock

    clock = VirtualClock()
    server = _ProServer(clock)
    async with _pro_client(clock, server) as client:
        bulk = asyncio.ensure_future(_drain(client.search_many(_queries("bulk"), concurrency=16)))
        latencies: list[float] = []
        ends: list[float] = []

        async def one(index: int) -> None:
            await clock.sleep((index + 1) * PRO_EVERY)
            started = clock.now()
            await client.search(f"interactive question {index}")
            latencies.append(clock.now() - started)
            ends.append(clock.now())

        singles = [asyncio.ensure_future(one(i)) for i in range(PRO_COUNT)]
        await _until_done(clock, singles)
        errors = sum(1 for task in singles if task.exception() is not None)
        bulk.cancel()
        await asyncio.gather(bulk, return_exceptions=True)
    single = {"latencies": latencies, "ends": ends, "errors": errors, "unfinished": 0}
    single.update(count=PRO_COUNT, bulk={"done": 0, "errors": 0})
    stats = {"t0": 0.0, "accepted": server.accepted, "rate_limited": server.rate_limited}
    return _with_later(single, stats, PRO_WINDOW, PRO)


async def _pro_newcomers(shape: str) -> dict[str, Any]:
    from magisterium_async.testing import VirtualClock

    clock = VirtualClock()
    server = _ProServer(clock)
    async with _pro_client(clock, server) as client:
        work = asyncio.ensure_future(
            _newcomers(
                client, shape, PRO_NEWCOMERS, PRO_EVERY, STUCK * PRO_WINDOW, clock.sleep, clock.now
            )
        )
        await _until_done(clock, [work])
        latencies = work.result()
    return {"latencies": latencies, "rate_limited": server.rate_limited}


async def _pro_cold(in_flight: int, phase: float) -> dict[str, Any]:
    """A harvest (``search_many``, ``in_flight`` at once) alone for :data:`COLD_WINDOWS`
    windows, then one single search ``phase`` seconds into the next: its latency, and the
    share of the quota the harvest used in the windows before it."""
    from magisterium_async.testing import VirtualClock

    clock = VirtualClock()
    server = _ProServer(clock)
    async with _pro_client(clock, server) as client:
        bulk = asyncio.ensure_future(
            _drain(client.search_many(_queries("bulk"), concurrency=in_flight))
        )
        arrive = COLD_WINDOWS * PRO_WINDOW + phase

        async def one() -> float:
            await clock.sleep(arrive)
            await client.search("the first question")
            return clock.now() - arrive

        single = asyncio.ensure_future(one())
        await _until_done(clock, [single])
        bulk.cancel()
        await asyncio.gather(bulk, return_exceptions=True)
    before = sum(1 for t in server.accepted if t < COLD_WINDOWS * PRO_WINDOW)
    return {
        "latency": single.result(),
        "quota_used": before / (COLD_WINDOWS * PRO),
        "rate_limited": server.rate_limited,
    }


async def _pro_lone(searches: int) -> dict[str, Any]:
    from magisterium_async.testing import VirtualClock

    clock = VirtualClock()
    server = _ProServer(clock)
    async with _pro_client(clock, server) as client:

        async def lone() -> tuple[int, float]:
            done = await _drain(client.search_many([f"lone {i}" for i in range(searches)]))
            return done, clock.now()

        job = asyncio.ensure_future(lone())
        await _until_done(clock, [job])
        done, wall = job.result()
    return {"wall": wall, "done": done, "rate_limited": server.rate_limited}


# The section -----------------------------------------------------------------------------


def _seconds(t: float, stuck: float) -> str:
    return f"> {stuck:g} s (stuck)" if math.isinf(t) else f"{t:.3f} s"


def _with_later(
    single: dict[str, Any], stats: dict[str, Any], window: float, limit: int
) -> dict[str, Any]:
    """:func:`quota_figures`, and the slowest single call made after the first window
    (those made in it meet the burst bulk sent before anything contended)."""
    figures = quota_figures(single, stats, window, limit)
    later = [
        latency
        for end, latency in zip(single["ends"], single["latencies"], strict=True)
        if end - latency - stats["t0"] >= window
    ]
    figures["later_max"] = max(later) if later else math.nan
    return figures


def _quota_row(section: Section, case: str, f: dict[str, Any], bound: float, unit: str) -> None:
    section.rows.append(
        Row(
            case,
            "magisterium_async",
            f"single p50 {f['p50']:.3f} s, p95 {f['p95']:.3f} s; bulk gets "
            f"{f['bulk_share']:.0%} of the quota left; {f['rate_limited']} x 429",
            f"max {f['max']:.3f} s, {f['later_max']:.3f} s after the first window; "
            f"{f['answered']} of {f['count']} answered; quota used "
            f"{f['quota_used']:.0%} over {f['windows']} windows",
        )
    )
    if f["errors"] or f["unfinished"] or f["answered"] != f["count"]:
        section.fail(f"{case}: {f['errors']} errors, {f['unfinished']} single calls unfinished")
    section.goal(
        f"{case}: single p95 <= {unit} ({bound:.3g} s), bulk >= {MIN_BULK_SHARE:.0%} of the "
        "quota left, no 429",
        f["p95"] <= bound and f["bulk_share"] >= MIN_BULK_SHARE and f["rate_limited"] == 0,
        f"p95 {f['p95']:.3f} s, bulk {f['bulk_share']:.0%}, {f['rate_limited']} x 429",
    )


def _newcomer_row(
    section: Section, case: str, latencies: list[float], bound: float, stuck: float, unit: str
) -> None:
    worst = max(latencies)
    section.rows.append(
        Row(
            case,
            "magisterium_async",
            f"worst {_seconds(worst, stuck)}, p50 {statistics.median(latencies):.3f} s",
            ", ".join(_seconds(t, stuck) for t in latencies),
        )
    )
    section.goal(
        f"{case}: each newcomer's first search <= {unit} ({bound:.3g} s)",
        worst <= bound,
        f"worst {_seconds(worst, stuck)}",
    )


def _lone_row(section: Section, case: str, wall: float, ideal: float, compare: bool) -> None:
    base = BASELINE[case]
    ratio = wall / base
    section.rows.append(
        Row(
            f"lone bulk job, {case}",
            "magisterium_async",
            f"wall {wall:.3f} s",
            f"{ratio:.3f}x the baseline ({base:g} s); ideal {ideal:.3f} s",
        )
    )
    section.goal(
        f"lone bulk job, {case}: wall time <= {MAX_LONE_RATIO}x the baseline ({base:g} s)",
        ratio <= MAX_LONE_RATIO if compare else None,
        f"{wall:.3f} s, {ratio:.3f}x" + ("" if compare else " (--quick: scaled, not compared)"),
    )


def _real(section: Section, quick: bool, data: dict[str, Any]) -> None:
    period = 0.25 if quick else 1.0
    count = QUICK_COUNT if quick else COUNT
    interval = period / LIMIT
    bound = MAX_P95_INTERVALS * interval
    unit = f"{MAX_P95_INTERVALS} quota intervals"
    rate = f"{LIMIT / period:g}/s"
    cases: list[tuple[str, int]] = [("one process", b) for b in BULK]
    cases += [("four processes", b) for b in (BULK[:1] if quick else BULK)]
    with ServerProcess("window", "--schedule", f"0:{LIMIT}", "--period", f"{period:g}") as server:
        data["round_trip"] = round_trip(server)
        redis = RedisServer() if shutil.which("redis-server") else None
        workers = Workers(4, cwd=ROOT) if redis else None
        try:
            for where, bulk in cases:
                case = f"{rate}, {where}, {bulk} bulk in flight"
                try:
                    if where == "one process":
                        single = asyncio.run(
                            local_case(server, period, bulk, count, EVERY * period)
                        )
                    elif redis is None or workers is None:
                        section.fail(f"{case}: redis-server is not installed")
                        continue
                    else:
                        single = across_case(
                            workers, redis, server, period, bulk, count, EVERY * period
                        )
                    figures = _with_later(single, server.stats(), period, LIMIT)
                except Exception as exc:
                    section.fail(f"{case}: {type(exc).__name__}: {exc}")
                    continue
                data[case] = figures
                _quota_row(section, case, figures, bound, unit)
        finally:
            if workers is not None:
                workers.stop()
            if redis is not None:
                redis.stop()
        newcomers = QUICK_NEWCOMERS if quick else NEWCOMERS
        for shape, label in (("queued", f"{CROWD:,} queued"), ("bulk", "search_many, 64")):
            case = f"{rate}, newcomer beside one key's {label}"
            try:
                latencies = asyncio.run(_real_newcomers(server, period, shape, newcomers))
            except Exception as exc:
                section.fail(f"{case}: {type(exc).__name__}: {exc}")
                continue
            data[case] = latencies
            new_bound = MAX_NEW_INTERVALS * interval
            _newcomer_row(
                section, case, latencies, new_bound, STUCK * period, "two quota intervals"
            )
        try:
            wall = asyncio.run(_real_lone(server, period))
        except Exception as exc:
            section.fail(f"lone bulk job: {type(exc).__name__}: {exc}")
        else:
            data["lone, real"] = wall
            ideal = math.floor((LONE - 1) / LIMIT) * period + data["round_trip"]
            _lone_row(section, f"real, {LONE} searches", wall, ideal, not quick)


def _virtual(section: Section, data: dict[str, Any]) -> None:
    unit = "two quota intervals"
    case = "Pro (virtual), one process, 16 bulk in flight"
    figures = asyncio.run(_pro_beside_bulk())
    data[case] = figures
    _quota_row(section, case, figures, PRO_MAX_WAIT, unit)
    for shape, label in (("queued", f"{PRO_CROWD:,} queued"), ("bulk", "search_many, 64")):
        case = f"Pro (virtual), newcomer beside one key's {label}"
        result = asyncio.run(_pro_newcomers(shape))
        data[case] = result
        _newcomer_row(section, case, result["latencies"], PRO_MAX_WAIT, STUCK * PRO_WINDOW, unit)
        if result["rate_limited"]:
            section.note(f"{case}: {result['rate_limited']} x 429")
    for in_flight in BULK:
        case = f"Pro (virtual), cold: one call after {COLD_WINDOWS} windows of bulk alone, "
        case += f"{in_flight} in flight"
        runs = [asyncio.run(_pro_cold(in_flight, phase)) for phase in COLD_PHASES]
        data[case] = runs
        latencies = [r["latency"] for r in runs]
        used = min(r["quota_used"] for r in runs)
        limited = sum(r["rate_limited"] for r in runs)
        p95, bound = _p95(latencies), MAX_COLD_SHARE * PRO_WINDOW
        section.rows.append(
            Row(
                case,
                "magisterium_async",
                f"p95 {p95:.3f} s, max {max(latencies):.3f} s; quota used {used:.0%}",
                f"{len(runs)} runs, one per phase; {limited} x 429",
            )
        )
        section.goal(
            f"{case}: p95 <= {MAX_COLD_SHARE} window ({bound:g} s), quota used >= "
            f"{MIN_BULK_SHARE:.0%}, no 429",
            p95 <= bound and used >= MIN_BULK_SHARE and not limited,
            f"p95 {p95:.3f} s, quota used {used:.0%}, {limited} x 429",
        )
    result = asyncio.run(_pro_lone(PRO_LONG))
    data[f"lone, Pro, {PRO_LONG}"] = result
    span = PRO_WINDOW + 1.0  # RateLimits.pro()'s safety margin
    bursts = math.floor((PRO_LONG - 1) / PRO) * span + PRO_RTT
    section.rows.append(
        Row(
            f"long bulk job alone, Pro, {PRO_LONG} searches",
            "magisterium_async",
            f"wall {result['wall']:.3f} s",
            f"{result['wall'] / bursts:.3f}x bursting every window ({bursts:.3f} s): "
            "the cost of pacing a harvest",
        )
    )
    for searches in PRO_LONE:
        result = asyncio.run(_pro_lone(searches))
        data[f"lone, Pro, {searches}"] = result
        if result["done"] != searches or result["rate_limited"]:
            section.fail(f"Pro lone job of {searches}: {result}")
        span = PRO_WINDOW + 1.0  # RateLimits.pro()'s safety margin
        ideal = math.floor((searches - 1) / PRO) * span + PRO_RTT
        _lone_row(section, f"Pro, {searches} searches", result["wall"], ideal, True)


def run(quick: bool) -> Section:
    period = 0.25 if quick else 1.0
    section = Section(
        "interactive",
        "Interactive latency beside bulk work",
        setup=(
            f"real time: window server in its own process, {LIMIT} per window of {period:g} s, "
            f"client RateLimits({LIMIT}, {EXPENSIVE}, period={period:g}), max_concurrency=B; "
            f"a single search every {EVERY * period:g} s; across processes one private "
            "redis-server (flushed before each run). Virtual time: RateLimits.pro() on a "
            f"VirtualClock, MockTransport with a fixed-window quota, {PRO_RTT:g} s round trip"
        ),
    )
    data: dict[str, Any] = {}
    try:
        _virtual(section, data)
    except Exception as exc:
        section.fail(f"virtual time: {type(exc).__name__}: {exc}")
    _real(section, quick, data)
    section.data = {"cases": data, "period": period}
    return section
