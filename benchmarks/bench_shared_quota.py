"""Shared quota: how much of one token's quota 1, 2, 4 and 8 worker processes use together.

The emulator runs in its own process with a sliding window of 20 searches per 2 s; a
private ``redis-server`` on a loopback port holds the shared log. Each count of workers
gets a fresh emulator and Redis, and four workers run once more on a fresh three-primary
Redis Cluster (``redis+cluster://``; not in the smoke run), which must use the quota as one
Redis does; every worker process is an ``AsyncMagisterium`` with
``shared_quota=`` configured to the quota, and fires its share of the searches at once
(all workers released together). ``ideal`` is the shortest time the server's window
allows for all the searches (``floor((N - 1) / L) * P``); ``utilization = ideal / wall``.
429s are counted by the server. Needs ``redis-server`` on PATH and redis-py.

Entry point for the runner: ``run(quick: bool) -> Section``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from ._report import Row, Section
from ._server import ROOT, RedisCluster, RedisServer, ServerProcess, run_together

__all__ = ["run"]

LIMIT, PERIOD = 20, 2.0
COUNTS = (1, 2, 4, 8)
QUICK_COUNTS = (1, 4)  # each count starts its own processes: the smoke run keeps two
CLUSTER_WORKERS = 4  # and once more on a three-primary Redis Cluster (not in the smoke run)


def _measure(workers: int, searches: int, cluster: bool = False) -> dict[str, Any]:
    redis: RedisServer | RedisCluster = RedisCluster() if cluster else RedisServer()
    try:
        with ServerProcess("emulator", "--default", str(LIMIT), "--period", str(PERIOD)) as server:
            env = {**os.environ, "MAGISTERIUM_TOKEN": server.token}
            share = [searches // workers + (i < searches % workers) for i in range(workers)]
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.bench_shared_quota",
                        server.base_url,
                        redis.url,
                        str(n),
                        str(workers),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                for n in share
            ]
            results = run_together(procs, timeout=120)
            outcomes = server.stats()["by_outcome"]
    finally:
        redis.stop()
    ideal = math.floor((searches - 1) / LIMIT) * PERIOD
    wall = max(r["wall"] for r in results)
    return {
        "workers": workers,
        "searches": searches,
        "wall": wall,
        "ideal": ideal,
        "utilization": ideal / wall if wall > 0 else math.nan,
        "ok": outcomes.get("ok", 0),
        "rate_limited": outcomes.get("rate_limited", 0),
        "errors": sum(r["errors"] for r in results),
    }


def run(quick: bool) -> Section:
    searches = 41 if quick else 121  # 2 (6) windows' worth + 1: ideal 4 s (12 s)
    counts = QUICK_COUNTS if quick else COUNTS
    section = Section(
        "shared_quota",
        "Shared quota (Redis) over worker processes",
        setup=(
            f"emulator in its own process, sliding window {LIMIT} searches per {PERIOD:g} s; "
            f"private redis-server on loopback; {searches} searches split over "
            f"{'/'.join(map(str, counts))} "
            "worker processes, each AsyncMagisterium(shared_quota=...) configured to the quota"
        ),
    )
    if shutil.which("redis-server") is None:
        section.fail("redis-server is not installed")
        return section
    runs = [(workers, False) for workers in counts]
    if not quick:
        runs.append((CLUSTER_WORKERS, True))
    data = []
    for workers, cluster in runs:
        where = "a three-primary Redis Cluster" if cluster else "Redis"
        name = f"{workers} worker{'s' if workers > 1 else ''}" + (", Cluster" if cluster else "")
        try:
            result = _measure(workers, searches, cluster)
        except Exception as exc:
            section.fail(f"{name}: {exc!r}")
            continue
        result["cluster"] = cluster
        data.append(result)
        if result["errors"] or result["ok"] != searches:
            section.fail(f"{name}: {result['ok']} of {searches} answered")
        section.rows.append(
            Row(
                name,
                f"magisterium_async + {where}",
                f"{result['utilization']:.0%} utilization",
                f"{result['rate_limited']} x 429; wall {result['wall']:.2f} s vs ideal "
                f"{result['ideal']:.1f} s",
            )
        )
    section.data = {"counts": data, "limit": LIMIT, "period": PERIOD}
    if data:
        worst = min(r["utilization"] for r in data)
        limited = sum(r["rate_limited"] for r in data)
        section.goal(
            "utilization >= 0.95 at every worker count (and on the Cluster), zero 429s",
            worst >= 0.95 and limited == 0 and len(data) == len(runs),
            f"lowest {worst:.0%}, {limited} x 429",
        )
    return section


# The worker process ---------------------------------------------------------------------


async def _worker(base_url: str, redis_url: str, searches: int, workers: int) -> dict[str, Any]:
    import asyncio

    from magisterium_async import AsyncMagisterium, RateLimits
    from magisterium_async._ratelimit import SharedQuota

    client = AsyncMagisterium(
        base_url=base_url,
        rate_limits=RateLimits(LIMIT, 2, period=PERIOD),
        shared_quota=SharedQuota(redis_url, workers=workers),
    )
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        try:
            await client.search(f"grace nature {i}")
        except Exception:
            errors += 1

    async with client:
        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(searches)))
        wall = time.monotonic() - started
    return {"errors": errors, "wall": wall}


if __name__ == "__main__":
    import asyncio

    url, redis_url, count, total = sys.argv[1:5]
    print(json.dumps(asyncio.run(_worker(url, redis_url, int(count), int(total)))), flush=True)
