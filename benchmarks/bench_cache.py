"""Paying for each answer once: shared calls in flight, and the cache in memory, on disk and
in Redis, against the emulator with its limits lifted (so it runs in seconds).

- Coalescing: 50 concurrent identical fetches, then 50 identical searches, no option
  given, from one client: the requests the server counted (goal: 1 each), beside the same
  with sharing turned off (``CachePolicy(rules={})``).
- The agent workload: 4 processes, each 400 fetches drawn Zipf(s=1.1) over 300 document
  ids and 100 searches over 60 queries (its own seed), shuffled, 8 agents at a time per
  process. Run uncached (no cache: sharing in flight only), then sharing one Redis cache
  (all four released together): requests the server counted per distinct key over all
  four (goal: at most 1.02).
- A cache on disk: the four processes share one SQLite file; then a new process runs the
  four workloads again on that file (goal: 0 requests).
- Latency: one call, sequential, in interleaved rounds (the median of the rounds'
  medians, and the 90th percentile): uncached (a request to the emulator on loopback)
  against a hit in memory, on disk and over loopback Redis.
- Every answer read from a cache equals the service's own (its JSON, byte for byte).

Entry point for the runner: ``run(quick: bool) -> Section``. Needs ``redis-server`` on PATH
and redis-py for the Redis parts.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._report import Row, Section
from ._server import ROOT, RedisServer, ServerProcess, run_together

__all__ = ["run"]

DOCUMENTS = 300
QUERIES = 60
ZIPF_S = 1.1
PROCESSES = 4
AGENTS = 8  # calls in flight at once in each process
GOAL_PER_KEY = 1.02
_WORDS = ("grace", "nature", "faith", "reason", "charity", "hope", "liturgy", "council")
_WORDS += ("marriage", "family", "labour", "peace", "conscience", "mercy")


def _queries() -> list[str]:
    pairs = [f"{a} {b}" for i, a in enumerate(_WORDS) for b in _WORDS[i + 1 :]]
    return pairs[:QUERIES]


def _ids() -> list[str]:
    from magisterium_async.testing import SyntheticCorpus

    corpus = SyntheticCorpus(size=DOCUMENTS)  # the server's: same size, same seed
    return [corpus.id_at(n) for n in range(DOCUMENTS)]


def workload(seed: int, fetches: int, searches: int) -> list[tuple[str, str]]:
    """One agent process's calls, in order: ``("fetch", id)`` and ``("search", query)``."""
    rng = random.Random(seed)
    ids = _ids()
    weights = [1 / (rank**ZIPF_S) for rank in range(1, DOCUMENTS + 1)]
    calls = [("fetch", i) for i in rng.choices(ids, weights, k=fetches)]
    calls += [("search", rng.choice(_queries())) for _ in range(searches)]
    rng.shuffle(calls)
    return calls


def _requests(server: ServerProcess) -> int:
    by_skill = server.stats()["by_skill"]
    return sum(
        sum(by_skill.get(skill, {}).values()) for skill in ("document_fetch", "document_search")
    )


def _processes(
    server: ServerProcess, cache: str, seeds: list[list[int]], fetches: int, searches: int
) -> list[dict[str, Any]]:
    """Run one worker process per entry of ``seeds`` (each runs those seeds' workloads in
    turn), released together; their reports."""
    env = {**os.environ, "MAGISTERIUM_TOKEN": server.token, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_cache",
                server.base_url,
                cache,
                ",".join(map(str, own)),
                str(fetches),
                str(searches),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for own in seeds
    ]
    return run_together(procs, timeout=600)


def _agent_run(
    server: ServerProcess, cache: str, seeds: list[list[int]], fetches: int, searches: int
) -> dict[str, Any]:
    before = _requests(server)
    started = time.monotonic()
    reports = _processes(server, cache, seeds, fetches, searches)
    wall = time.monotonic() - started
    keys = {tuple(k) for r in reports for k in r["keys"]}
    sent = _requests(server) - before
    return {
        "requests": sent,
        "distinct_keys": len(keys),
        "per_key": sent / len(keys),
        "calls": sum(r["calls"] for r in reports),
        "errors": sum(r["errors"] for r in reports),
        "hits": sum(r["stats"]["hits"] for r in reports),
        "coalesced": sum(r["stats"]["coalesced"] for r in reports),
        "misses": sum(r["stats"]["misses"] for r in reports),
        "wall": wall,
    }


async def _coalescing(server: ServerProcess, shared: bool) -> tuple[int, int]:
    from magisterium_async import AsyncMagisterium, CachePolicy, RateLimits

    policy = None if shared else CachePolicy(rules={})
    document = _ids()[0]
    async with AsyncMagisterium(
        token=server.token,
        base_url=server.base_url,
        rate_limits=RateLimits.unlimited(),
        cache_policy=policy,
    ) as client:
        before = server.stats()["by_skill"]
        await asyncio.gather(*(client.fetch(document) for _ in range(50)))
        await asyncio.gather(*(client.search("grace nature") for _ in range(50)))
        after = server.stats()["by_skill"]

    def delta(skill: str) -> int:
        return sum(after.get(skill, {}).values()) - sum(before.get(skill, {}).values())

    return delta("document_fetch"), delta("document_search")


async def _latency(
    server: ServerProcess, caches: dict[str, str | None], calls: int, rounds: int
) -> dict[str, dict[str, float]]:
    """Seconds per sequential ``fetch`` of one document, by cache: the median of each
    round's median (the modes interleaved round by round, so a busy moment of the machine
    falls on all of them), and the 90th percentile of every call."""
    from magisterium_async import AsyncMagisterium, RateLimits

    document = _ids()[1]
    clients = {
        name: AsyncMagisterium(
            token=server.token,
            base_url=server.base_url,
            rate_limits=RateLimits.unlimited(),
            cache=cache,
        )
        for name, cache in caches.items()
    }
    medians: dict[str, list[float]] = {name: [] for name in caches}
    every: dict[str, list[float]] = {name: [] for name in caches}
    try:
        for client in clients.values():
            for _ in range(5):  # connections open, the answer kept
                await client.fetch(document)
        for _ in range(rounds):
            for name, client in clients.items():
                times = []
                for _ in range(calls):
                    started = time.perf_counter()
                    await client.fetch(document)
                    times.append(time.perf_counter() - started)
                medians[name].append(statistics.median(times))
                every[name].extend(times)
    finally:
        for client in clients.values():
            await client.aclose()
    return {
        name: {
            "median": statistics.median(medians[name]),
            "p90": sorted(every[name])[int(0.9 * (len(every[name]) - 1))],
            "round_medians": medians[name],
        }
        for name in caches
    }


async def _same_answers(
    server: ServerProcess, caches: dict[str, str], seeds: list[int], fetches: int, searches: int
) -> dict[str, Any]:
    """For every key the workloads used: the service's answer, and each cache's, as JSON."""
    import msgspec

    from magisterium_async import AsyncMagisterium, RateLimits

    keys = sorted({k for seed in seeds for k in workload(seed, fetches, searches)})

    async def answers(cache: str | None) -> tuple[list[bytes], dict[str, int]]:
        async with AsyncMagisterium(
            token=server.token,
            base_url=server.base_url,
            rate_limits=RateLimits.unlimited(),
            cache=cache,
        ) as client:
            out = []
            for kind, value in keys:
                result = await (client.fetch(value) if kind == "fetch" else client.search(value))
                out.append(msgspec.json.encode(result))
            stats = client.cache_stats
            return out, {"hits": stats.hits, "misses": stats.misses}

    service, _ = await answers(None)
    report: dict[str, Any] = {"keys": len(keys)}
    for name, cache in caches.items():
        cached, stats = await answers(cache)
        report[name] = {"equal": cached == service, **stats}
    return report


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def run(quick: bool) -> Section:
    fetches, searches = (100, 25) if quick else (400, 100)
    latency_calls, rounds = (50, 3) if quick else (200, 7)
    seeds = [[seed] for seed in range(1, PROCESSES + 1)]
    section = Section(
        "cache",
        "Paying for each answer once (shared calls, caches)",
        setup=(
            f"emulator in its own process, limits lifted, {DOCUMENTS} synthetic documents; "
            f"{PROCESSES} agent processes, each {fetches} fetches Zipf(s={ZIPF_S}) over "
            f"{DOCUMENTS} ids + {searches} searches over {QUERIES} queries (own seed), "
            f"{AGENTS} calls in flight per process; private redis-server on loopback"
        ),
    )
    have_redis = shutil.which("redis-server") is not None
    data: dict[str, Any] = {}
    with (
        ServerProcess("emulator", "--synthetic", str(DOCUMENTS)) as server,
        tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp,
    ):
        # 1. Identical calls in flight.
        shared = asyncio.run(_coalescing(server, shared=True))
        alone = asyncio.run(_coalescing(server, shared=False))
        data["coalescing"] = {"shared": shared, "not_shared": alone}
        section.rows.append(
            Row(
                "50 identical fetches / searches at once",
                "magisterium_async (default)",
                f"{shared[0]} / {shared[1]} requests",
                f"sharing off: {alone[0]} / {alone[1]}",
            )
        )
        section.goal(
            "50 concurrent identical fetches, and 50 searches: 1 request each",
            shared == (1, 1),
            f"{shared[0]} fetch, {shared[1]} search requests",
        )

        # 2. The agent workload: uncached, then one Redis cache for the four.
        uncached = _agent_run(server, "none", seeds, fetches, searches)
        data["uncached"] = uncached
        section.rows.append(
            Row(
                f"agent workload, {PROCESSES} processes, no cache",
                "magisterium_async",
                f"{uncached['requests']} requests",
                f"{uncached['per_key']:.2f} per distinct key ({uncached['distinct_keys']} keys, "
                f"{uncached['calls']} calls)",
            )
        )
        redis_url = None
        redis = RedisServer() if have_redis else None
        try:
            if redis is not None:
                redis_url = redis.url
                cached = _agent_run(server, redis_url, seeds, fetches, searches)
                data["redis"] = cached
                section.rows.append(
                    Row(
                        f"agent workload, {PROCESSES} processes, one Redis cache",
                        "magisterium_async",
                        f"{cached['requests']} requests",
                        f"{cached['per_key']:.3f} per distinct key; "
                        f"{uncached['requests'] / max(cached['requests'], 1):.1f}x fewer than "
                        f"uncached; {cached['hits']} hits, {cached['coalesced']} coalesced",
                    )
                )
                section.goal(
                    f"shared Redis cache: at most {GOAL_PER_KEY} requests per distinct key",
                    cached["per_key"] <= GOAL_PER_KEY and cached["errors"] == 0,
                    f"{cached['requests']} requests for {cached['distinct_keys']} keys = "
                    f"{cached['per_key']:.3f} (uncached {uncached['per_key']:.2f})",
                )
            else:
                section.note("redis-server is not installed: the Redis parts did not run")

            # 3. On disk: four processes share a file; a new one runs it all again.
            path = str(Path(tmp) / "answers.sqlite")
            first = _agent_run(server, path, seeds, fetches, searches)
            again = _agent_run(server, path, [[s for [s] in seeds]], fetches, searches)
            data["disk"] = {"first": first, "again": again}
            section.rows.append(
                Row(
                    "agent workload on one SQLite file, then again by a new process",
                    "magisterium_async",
                    f"{first['requests']} then {again['requests']} requests",
                    f"first: {first['per_key']:.3f} per distinct key; again: "
                    f"{again['hits']} hits of {again['calls']} calls",
                )
            )
            section.goal(
                "disk cache: the same workload run again by a new process sends 0 requests",
                again["requests"] == 0 and again["errors"] == 0,
                f"{again['requests']} requests",
            )

            # 4. Latency of one call.
            modes: dict[str, str | None] = {
                "uncached": None,
                "memory": "memory",
                "disk": str(Path(tmp) / "l.sqlite"),
            }
            if redis_url is not None:
                modes["redis"] = redis_url
            latency = asyncio.run(_latency(server, modes, latency_calls, rounds))
            data["latency"] = latency
            base = latency["uncached"]["median"]
            for name, figures in latency.items():
                section.rows.append(
                    Row(
                        f"one fetch, {name}" + ("" if name == "uncached" else " hit"),
                        "magisterium_async",
                        f"median {_us(figures['median'])}",
                        f"p90 {_us(figures['p90'])}"
                        + (
                            ""
                            if name == "uncached"
                            else f"; {base / figures['median']:.0f}x faster than uncached"
                        ),
                    )
                )

            # 5. What the caches answer is what the service answers.
            caches = {"disk": path}
            if redis_url is not None:
                caches["redis"] = redis_url
            same = asyncio.run(
                _same_answers(server, caches, [s for [s] in seeds], fetches, searches)
            )
            data["same_answers"] = same
            equal = all(same[name]["equal"] for name in caches)
            section.goal(
                "answers from the cache equal the service's",
                equal,
                ", ".join(
                    f"{name}: {same[name]['hits']} of {same['keys']} from the cache, "
                    f"{'equal' if same[name]['equal'] else 'DIFFERENT'}"
                    for name in caches
                ),
            )
        finally:
            if redis is not None:
                redis.stop()
    section.data = data
    return section


# The worker process ---------------------------------------------------------------------


async def _worker(
    base_url: str, cache: str, seeds: list[int], fetches: int, searches: int
) -> dict[str, Any]:
    from magisterium_async import AsyncMagisterium, RateLimits

    calls = [call for seed in seeds for call in workload(seed, fetches, searches)]
    errors = 0
    async with AsyncMagisterium(
        base_url=base_url,
        rate_limits=RateLimits.unlimited(),
        cache=None if cache == "none" else cache,
    ) as client:
        pending = iter(calls)

        async def agent() -> None:
            nonlocal errors
            for kind, value in pending:
                try:
                    if kind == "fetch":
                        await client.fetch(value)
                    else:
                        await client.search(value)
                except Exception:
                    errors += 1

        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started = time.monotonic()
        await asyncio.gather(*(agent() for _ in range(AGENTS)))
        wall = time.monotonic() - started
        stats = client.cache_stats
    return {
        "keys": sorted(set(calls)),
        "calls": len(calls),
        "errors": errors,
        "wall": wall,
        "stats": {"hits": stats.hits, "misses": stats.misses, "coalesced": stats.coalesced},
    }


if __name__ == "__main__":
    url, cache_arg, seed_list, fetch_count, search_count = sys.argv[1:6]
    report = asyncio.run(
        _worker(
            url,
            cache_arg,
            [int(s) for s in seed_list.split(",")],
            int(fetch_count),
            int(search_count),
        )
    )
    print(json.dumps(report), flush=True)
