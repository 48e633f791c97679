"""An interactive call while ``search_many`` runs: how long a single ``search`` waits when a
bulk job keeps the same quota busy, and how much of the quota the bulk job still gets.

A ``window`` server (``_server.py``) in its own process allows 10 searches per 1 s window.
The client is ``AsyncMagisterium(rate_limits=RateLimits(10, 2, period=1),
max_concurrency=B)`` and ``search_many(endless queries, concurrency=B)`` keeps B bulk
calls in flight (B = 16, 64); meanwhile a single ``search`` is issued every 0.5 s, 20 of
them, each without waiting for the one before. Neither names a priority: single calls
are interactive and batches bulk by default, as an application writes them. Then the same
across processes through one Redis (``shared_quota=SharedQuota(url, workers=4)``): the
single searches in one process, ``search_many`` in three others (B split between them).

Figures: p50/p95 latency of the single searches; *quota used*, the requests the server
accepted over the whole windows before the last single search ended, over what those
windows allow; and the bulk job's share of what the single searches left
(``(used - single) / (allowed - single)``). Goals: p95 at most one quota
window (stretch: two quota intervals plus a round trip); the bulk job gets at least 0.85
of the quota the single searches leave. ``--quick``: windows of 0.25 s, calls every
0.125 s, 12 of them, the cross-process row with B = 16 only.

Fairness (``client.with_options(fairness_key=...)``): one key has 1,000 searches queued
(``asyncio.gather``); then, every half window, a new key makes its first search, five
keys in turn. Goal: each new key's first search is answered within two quota
intervals plus a round trip. Reported as not measurable on a client without
``with_options``.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import statistics
import time
from typing import Any

from ._quota_worker import Workers, bulk_calls, interactive_calls, make_client
from ._report import Row, Section
from ._server import ROOT, RedisServer, ServerProcess

__all__ = ["across_case", "local_case", "quota_figures", "round_trip", "run"]

LIMIT, EXPENSIVE = 10, 2  # per window: the server's and the client's
COUNT, QUICK_COUNT = 20, 12  # single searches, one every half window
BULK = (16, 64)  # bulk calls in flight
PROCESSES = 4  # across processes: one interactive, three bulk
MAX_P95_WINDOWS, MIN_BULK_SHARE = 1.0, 0.85
FAIR_QUEUED, FAIR_KEYS = 1000, 5  # one key's queued searches; new keys, one after another
FAIR_LIMIT = 4  # windows a new key's first search is given before it counts as stuck


def _job(server: ServerProcess, period: float, max_concurrency: int) -> dict[str, Any]:
    return {
        "token": server.token,
        "base_url": server.base_url,
        "default": LIMIT,
        "expensive": EXPENSIVE,
        "period": period,
        "max_concurrency": max_concurrency,
    }


async def local_case(
    server: ServerProcess, period: float, bulk: int, count: int, every: float
) -> dict[str, Any]:
    """One process: ``search_many`` with ``bulk`` in flight, and ``count`` single searches,
    one every ``every`` s, on one client; the singles' figures and the bulk job's counts."""
    async with make_client(_job(server, period, bulk)) as client:
        server.reset()
        stop = asyncio.Event()
        job = asyncio.create_task(bulk_calls(client, bulk, stop))
        try:
            single = await interactive_calls(client, every, count, 30 * period)
        finally:
            stop.set()
        return {**single, "bulk": await job}


async def _fairness(server: ServerProcess, period: float) -> dict[str, Any]:
    async with make_client(_job(server, period, 16)) as client:
        with_options = getattr(client, "with_options", None)
        if with_options is None:
            return {"unavailable": "this client has no with_options (fairness_key)"}
        crowd = with_options(fairness_key="user-crowd")
        server.reset()

        async def queued(index: int) -> None:
            await crowd.search(f"crowd question {index}")

        tasks = [asyncio.create_task(queued(i)) for i in range(FAIR_QUEUED)]
        latencies = []
        try:
            for key in range(FAIR_KEYS):
                await asyncio.sleep(period / 2)
                started = time.monotonic()
                view = with_options(fairness_key=f"user-{key}")
                try:  # behind the crowd it would take 100 windows: stop at a few
                    await asyncio.wait_for(view.search("a first question"), FAIR_LIMIT * period)
                except asyncio.TimeoutError:
                    latencies.append(math.inf)
                    break
                latencies.append(time.monotonic() - started)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return {"latencies": latencies}


def across_case(
    workers: Workers,
    redis: RedisServer,
    server: ServerProcess,
    period: float,
    bulk: int,
    count: int,
    every: float,
) -> dict[str, Any]:
    """:func:`local_case` across four processes over one Redis: the singles in one,
    ``search_many`` in the three others (``bulk`` split between them)."""
    redis.flushall()
    shares = [bulk // (PROCESSES - 1) + (i < bulk % (PROCESSES - 1)) for i in range(PROCESSES - 1)]
    shared = {"redis_url": redis.url, "workers": PROCESSES}
    jobs = {0: {"task": "interactive", **_job(server, period, 16), **shared}}
    jobs[0].update(every=every, count=count, limit=30 * period)
    for i, share in enumerate(shares, start=1):
        jobs[i] = {"task": "bulk", "concurrency": share, **_job(server, period, share), **shared}
    workers.start(jobs)
    server.reset()
    workers.go(list(jobs))
    try:
        single = workers.result(0, count * every + 30 * period + 30)
    finally:
        for i in range(1, PROCESSES):
            workers.send(i, "stop")
    counts = [workers.result(i, 30) for i in range(1, PROCESSES)]
    done = {key: sum(c[key] for c in counts) for key in ("done", "errors")}
    return {**single, "bulk": done}


def quota_figures(
    single: dict[str, Any], stats: dict[str, Any], period: float, limit: int = LIMIT
) -> dict[str, Any]:
    """The singles' latencies and the quota's use over the whole windows before the last
    single ended, from a case's result and the window server's ``stats``."""
    ends = sorted(end - stats["t0"] for end in single["ends"])
    windows = math.floor(ends[-1] / period) if ends else 0
    horizon = windows * period
    used = sum(1 for at in stats["accepted"] if at < horizon)
    singles = sum(1 for end in ends if end < horizon)
    allowed = limit * windows
    latencies = sorted(single["latencies"])
    p95 = (
        statistics.quantiles(latencies, n=20, method="inclusive")[18]
        if len(latencies) > 1
        else math.nan
    )
    return {
        "p50": statistics.median(latencies) if latencies else math.nan,
        "p95": p95,
        "max": latencies[-1] if latencies else math.nan,
        "answered": len(latencies),
        "count": single["count"],
        "unfinished": single["unfinished"],
        "errors": single["errors"] + single["bulk"]["errors"],
        "bulk_done": single["bulk"]["done"],
        "windows": windows,
        "quota_used": used / allowed if allowed else math.nan,
        "bulk_share": (used - singles) / (allowed - singles) if allowed > singles else math.nan,
        "rate_limited": stats["rate_limited"],
    }


def round_trip(server: ServerProcess) -> float:
    """The median of five plain HTTP round trips to the server (its stats page)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        server.stats()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(quick: bool) -> Section:
    period = 0.25 if quick else 1.0
    count = QUICK_COUNT if quick else COUNT
    section = Section(
        "priority",
        "An interactive call while search_many runs (same quota, 10 per window)",
        setup=(
            f"window server in its own process, {LIMIT} per window of {period:g} s; client "
            f"RateLimits({LIMIT}, {EXPENSIVE}, period={period:g}); search_many with B in "
            f"flight (max_concurrency=B) and a single search every {period / 2:g} s, "
            f"{count} of them; across processes: singles in one, search_many in three "
            "(B split), one private redis-server (flushed before each run); quota used "
            "over the whole windows before the last single search ended"
            + (" (--quick: every time scaled by 0.25)" if quick else "")
        ),
    )
    cases: list[tuple[str, int]] = [("one process", b) for b in BULK]
    cases += [("four processes", b) for b in (BULK[:1] if quick else BULK)]
    data: dict[str, Any] = {}
    with ServerProcess("window", "--schedule", f"0:{LIMIT}", "--period", f"{period:g}") as server:
        rtt = round_trip(server)
        stretch = 2 * period / LIMIT + rtt
        redis = RedisServer() if shutil.which("redis-server") else None
        workers = Workers(PROCESSES, cwd=ROOT) if redis else None
        try:
            for where, bulk in cases:
                case = f"{where}, {bulk} bulk in flight"
                try:
                    if where == "one process":
                        single = asyncio.run(local_case(server, period, bulk, count, period / 2))
                    elif redis is None or workers is None:
                        section.fail(f"{case}: redis-server is not installed")
                        continue
                    else:
                        single = across_case(
                            workers, redis, server, period, bulk, count, period / 2
                        )
                    figures = quota_figures(single, server.stats(), period)
                except Exception as exc:
                    section.fail(f"{case}: {type(exc).__name__}: {exc}")
                    continue
                data[case] = figures
                _row(section, case, figures, period, stretch)
            _fair(section, server, period, stretch, data)
        finally:
            if workers is not None:
                workers.stop()
            if redis is not None:
                redis.stop()
    section.data = {"cases": data, "period": period, "round_trip": rtt}
    return section


def _fair(
    section: Section, server: ServerProcess, period: float, bound: float, data: dict[str, Any]
) -> None:
    case = f"fairness: {FAIR_QUEUED:,} queued on one key, a new key's first search"
    goal = (
        f"fairness: each new key's first search answered within two quota intervals plus a "
        f"round trip ({bound:.3f} s) while one key has {FAIR_QUEUED:,} queued"
    )
    try:
        result = asyncio.run(_fairness(server, period))
    except Exception as exc:
        section.fail(f"fairness: {type(exc).__name__}: {exc}")
        return
    data["fairness"] = result
    if "unavailable" in result:
        section.rows.append(Row(case, "magisterium_async", "n/a", result["unavailable"]))
        section.goal(goal, None, result["unavailable"])
        return
    latencies = result["latencies"]

    def seconds(t: float) -> str:
        return f"> {FAIR_LIMIT * period:g} s (stopped)" if math.isinf(t) else f"{t:.3f} s"

    worst = seconds(max(latencies))
    section.rows.append(
        Row(
            case,
            "magisterium_async",
            f"worst {worst}, first key {seconds(latencies[0])}",
            f"{len(latencies)} of {FAIR_KEYS} keys in turn: "
            + ", ".join(seconds(t) for t in latencies),
        )
    )
    section.goal(goal, max(latencies) <= bound, f"worst {worst}")


def _row(section: Section, case: str, f: dict[str, Any], period: float, stretch: float) -> None:
    section.rows.append(
        Row(
            case,
            "magisterium_async",
            f"single search p50 {f['p50']:.3f} s, p95 {f['p95']:.3f} s; bulk gets "
            f"{f['bulk_share']:.0%} of the quota left",
            f"max {f['max']:.3f} s; {f['answered']} of {f['count']} answered; quota used "
            f"{f['quota_used']:.0%} over {f['windows']} windows; {f['bulk_done']} bulk "
            f"searches; {f['rate_limited']} x 429",
        )
    )
    if f["errors"] or f["unfinished"] or f["answered"] != f["count"]:
        section.fail(f"{case}: {f['errors']} errors, {f['unfinished']} single searches unfinished")
    p95_ok = f["p95"] <= MAX_P95_WINDOWS * period
    share_ok = f["bulk_share"] >= MIN_BULK_SHARE
    reach = "stretch met" if f["p95"] <= stretch else "stretch missed"
    section.goal(
        f"{case}: single search p95 <= one quota window ({period:g} s; stretch: two quota "
        f"intervals plus a round trip, {stretch:.3f} s); bulk gets >= {MIN_BULK_SHARE:.0%} "
        "of the quota left",
        p95_ok and share_ok,
        f"p95 {f['p95']:.3f} s ({reach}), bulk {f['bulk_share']:.0%}",
    )
