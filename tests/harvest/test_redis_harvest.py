"""A harvest shared through Redis, in one process: each worker's runs yield each document once.

The multi-process behaviour (kill -9, Redis restarted) is in test_redis; here two workers
share one job through a real ``redis-server`` and one of them stops early and resumes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magisterium_async import AsyncMagisterium, RateLimits
from magisterium_async._harvest._harvest import Harvest, harvest
from magisterium_async._harvest._redis_harvest import (
    CoordinatedClient,
    Coordinator,
    claimed_queries,
    worker_identity,
)
from magisterium_async.testing import Emulator, EmulatorConfig, SyntheticCorpus
from tests.helpers.redis_server import RedisServer

from .test_harvest import QUERIES, collect, expected_ids, recorded

JOB = "test-job"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        rate_limits=None, corpus=SyntheticCorpus(5000, seed=3, search_space=800)
    )
    async with Emulator(config) as emu:
        yield emu


def fetches(emulator: Emulator, since: int = 0) -> Counter[str | None]:
    return Counter(a.input for a in emulator.arrivals[since:] if a.skill == "document_fetch")


async def run_worker(
    client: AsyncMagisterium, redis: RedisServer, state: Path, limit: int | None = None
) -> tuple[list[str], Harvest]:
    """One run of a worker with ``state``: the ids it yielded, and the harvest."""
    coordinator = Coordinator(redis.url, JOB, worker_identity(state))
    try:
        await coordinator.hydrate(state)
        h = harvest(
            CoordinatedClient(client, coordinator),
            claimed_queries(QUERIES, coordinator),
            state=state,
        )
        ids = await collect(h, limit)
    finally:
        await coordinator.aclose()
    return ids, h


async def test_a_stopped_worker_resumes_without_repeats(
    emulator: Emulator, redis_server: RedisServer, tmp_path: Path
) -> None:
    async with AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, rate_limits=RateLimits.unlimited()
    ) as client:
        expected = await expected_ids(client, QUERIES)
        start = len(emulator.arrivals)
        a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
        first, _ = await run_worker(client, redis_server, a, limit=5)
        _, fetched = recorded(a)
        others, _ = await run_worker(client, redis_server, b)
        since = len(emulator.arrivals)
        rest, again = await run_worker(client, redis_server, a)
    # Worker a: each document once over its two runs; with b, each document once overall.
    assert len(rest) == len(set(rest)) and not set(first) & set(rest)
    assert again.stats.resumed > 0  # it held documents fetched and not delivered
    assert not set(first + rest) & set(others)
    assert sorted(first + rest + others) == sorted(expected)
    # Nothing a recorded is fetched again, and b fetches nothing twice; a fetches again
    # only what was in flight when it stopped (16 fetches, their answers in 2 x 16 slots).
    assert not set(fetches(emulator, since)) & fetched
    twice = {i for i, n in fetches(emulator, start).items() if n > 1}
    assert max(fetches(emulator, start).values()) <= 2
    assert twice <= set(rest) and len(twice) <= 2 * 16
