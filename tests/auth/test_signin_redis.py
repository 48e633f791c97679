"""Many processes, no shared files, one sign-in in one Redis: the issue's done-when.

Each worker (``redis_auth_worker.py``) is its own process with its own HOME and config
directory, as on its own host; the only thing they share is the Redis URL in
``$MAGISTERIUM_CREDENTIALS``. The emulator's authorization server rotates refresh tokens
and revokes the whole sign-in when a spent one comes back (reuse detection), so a single
reuse would show as ``invalid_grant`` and failed calls. Redis runs with ``appendonly yes``
and is killed and restarted mid-run.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    OAuthCounts,
    RateLimitConfig,
    max_in_window,
)
from tests.cli.helpers import clean_env
from tests.helpers.oauth_fake import sign_in
from tests.helpers.redis_server import RedisServer
from tests.helpers.refresh_log import assert_one_refresh_per_lifetime

WORKER = Path(__file__).parents[1] / "workers" / "redis_auth_worker.py"


@dataclass
class SharedRun:
    """What the workers reported, how long they ran, and what the emulator saw."""

    reports: list[dict[str, Any]]
    oauth: OAuthCounts
    searches: list[float]  # when each search arrived, on the emulator's clock
    restarted: list[float]  # when each restart of Redis was over, on that clock


async def run_workers(
    config: EmulatorConfig,
    redis: RedisServer,
    homes: Path,
    *,
    workers: int,
    seconds: float,
    quota: list[str],
    restarts_at: list[float],
) -> SharedRun:
    """Sign in to Redis, start ``workers`` workers together (two calls at a time each),
    kill and restart Redis at ``restarts_at`` seconds into the run."""
    async with Emulator(config) as emulator:
        await sign_in(emulator, redis.url)
        procs: list[asyncio.subprocess.Process] = []
        try:
            for i in range(workers):
                procs.append(
                    await start_worker(emulator, redis, homes / f"host{i}", seconds, quota)
                )
            for proc in procs:
                assert proc.stdout is not None
                ready = await asyncio.wait_for(proc.stdout.readline(), 120)
                assert ready == b"READY\n", ready
            started = time.monotonic()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
            restarted = []
            for at in restarts_at:
                # When to kill Redis is the scenario's, not a synchronisation: the asserts
                # hold whenever it happens.
                await asyncio.sleep(started + at - time.monotonic())
                # In a thread: the emulator serving the workers runs on this loop.
                await asyncio.to_thread(redis.restart)
                restarted.append(config.clock.now())
            outputs = [await asyncio.wait_for(p.communicate(), seconds + 120) for p in procs]
        finally:
            for proc in procs:
                if proc.returncode is None:  # a failed run leaves no worker behind
                    proc.kill()
                    await proc.wait()
        searches = [a.time for a in emulator.arrivals if a.skill == "document_search"]
        oauth = emulator.stats.oauth
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
    return SharedRun([json.loads(out) for out, _ in outputs], oauth, searches, restarted)


async def start_worker(
    emulator: Emulator, redis: RedisServer, home: Path, seconds: float, quota: list[str]
) -> asyncio.subprocess.Process:
    """A worker as on a host of its own: its own HOME and config dir, the Redis URL its
    only link to the others."""
    await asyncio.to_thread(home.mkdir)
    env = clean_env(MAGISTERIUM_CREDENTIALS=redis.url, HOME=str(home))
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    pipe = asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), emulator.base_url, str(seconds), "2", *quota,
        stdin=pipe, stdout=pipe, stderr=pipe, env=env, cwd=home,
    )  # fmt: skip


def files_under(directory: Path) -> list[Path]:
    return [path for path in directory.rglob("*") if path.is_file()]


async def test_four_processes_on_four_homes_share_one_sign_in_through_redis(
    persistent_redis: RedisServer, tmp_path: Path
) -> None:
    lifetime = 2.0
    config = EmulatorConfig(rate_limits=None, token_lifetime=lifetime)
    run = await run_workers(
        config, persistent_redis, tmp_path, workers=4, seconds=10.0, quota=[], restarts_at=[5.0]
    )
    reports, oauth = run.reports, run.oauth
    assert [r["failed"] for r in reports] == [0, 0, 0, 0], [r["errors"] for r in reports]
    assert all(r["calls"] > 0 for r in reports)
    assert oauth.invalid_grants == 0 and oauth.refresh_reuses == 0
    assert oauth.refreshes == sum(r["refreshes"] for r in reports) >= 1  # it outlived a token
    # One refresh per token lifetime over all four, not one per process.
    assert_one_refresh_per_lifetime([t for r in reports for t in r["refreshed_at"]], lifetime)
    assert files_under(tmp_path) == []  # no host wrote a credentials file, or anything


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(300)  # 60 s of load, sixteen interpreters starting on two cores, the tail
async def test_a_soak_sixteen_processes_share_quota_and_sign_in_while_redis_restarts(
    persistent_redis: RedisServer, tmp_path: Path
) -> None:
    workers, seconds, limit, period, lifetime = 16, 60.0, 40, 2.0, 3.0
    config = EmulatorConfig(
        rate_limits=RateLimitConfig(default=limit, expensive=2, period=period, algorithm="sliding"),
        token_lifetime=lifetime,
    )
    quota = [persistent_redis.url, str(limit), str(period), str(workers)]
    run = await run_workers(
        config,
        persistent_redis,
        tmp_path,
        workers=workers,
        seconds=seconds,
        quota=quota,
        restarts_at=[seconds / 3, 2 * seconds / 3],
    )
    reports, oauth = run.reports, run.oauth
    errors = [e for r in reports for e in r["errors"]]
    # What README promises through a Redis outage: calls go on with the token in hand,
    # and the quota falls back to a local share; a failure would be a MagisteriumError
    # naming Redis, and with outages this short there is none.
    assert all(e["magisterium"] and "redis://" in e["message"] for e in errors), errors
    assert sum(r["failed"] for r in reports) == 0, errors
    assert oauth.invalid_grants == 0 and oauth.refresh_reuses == 0
    assert oauth.refreshes == sum(r["refreshes"] for r in reports)
    assert_one_refresh_per_lifetime([t for r in reports for t in r["refreshed_at"]], lifetime)
    # Real work went on through both restarts (the shared pools pace it, adaptively):
    # searches were answered after each restart was over.
    for restarted in run.restarted:
        assert any(t > restarted for t in run.searches), (restarted, run.searches[-1:])
    # The quota through both restarts: the server never saw more starts in a window than
    # the shared log allows plus what the fallback documents (README "One quota, many
    # processes"): a client that lost Redis starts its local share, limit / workers per
    # window, until it rejoins; all sixteen together, at most one more limit. A 429 this
    # causes is waited out and retried (none failed, above).
    assert max_in_window(run.searches, period) <= 2 * limit
