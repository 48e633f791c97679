"""``await client.quota()``: what is left of each pool's window and when the next start is
free, read without sending anything; from this process's limiter, or from the shared log
in Redis (in-memory Redis, virtual time), and this process's view when Redis is down."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._ratelimit import Scheduler
from magisterium_async.testing import MockTransport, VirtualClock
from tests.conftest import TOKEN
from tests.helpers.quota import Sent, service
from tests.helpers.redis_server import RedisServer

BASE = "https://a2a.example/api"


def client_on(clock: VirtualClock, sent: Sent, **kwargs: Any) -> m.AsyncMagisterium:
    kwargs.setdefault("rate_limits", m.RateLimits.pro())  # 15 a minute, a 1 s margin
    return m.AsyncMagisterium(
        token=TOKEN,
        base_url=BASE,
        clock=clock,
        transport=MockTransport(service(clock, sent)),
        **kwargs,
    )


async def test_a_fresh_client_has_its_whole_quota_left() -> None:
    async with client_on(VirtualClock(), []) as client:
        quota = await client.quota()
    assert quota == m.Quota(
        default=m.PoolQuota("default", 15.0, 15.0, 60.0, 0, 15, 0.0),
        expensive=m.PoolQuota("expensive", 2.0, 2.0, 60.0, 0, 2, 0.0),
    )
    assert not quota.shared and quota.pools == (quota.default, quota.expensive)


async def test_the_quota_counts_the_window_and_says_when_the_next_start_is_free() -> None:
    clock = VirtualClock()
    sent: Sent = []
    async with client_on(clock, sent) as client:
        await asyncio.gather(*(client.search(f"q{i}") for i in range(4)))
        quota = (await client.quota()).default
        assert (quota.used, quota.left, quota.next_start_in) == (4, 11, 0.0)
        await asyncio.gather(*(client.search(f"r{i}") for i in range(11)))
        await clock.advance(20.0)
        quota = (await client.quota()).default
        # The 15 starts at 0 leave the window (60 s + the 1 s margin) at 61.
        assert (quota.used, quota.left) == (15, 0)
        assert quota.next_start_in == pytest.approx(41.0)
        assert (await client.quota()).expensive.used == 0  # catholic_qa's pool is apart
        await clock.advance(41.0)
        quota = (await client.quota()).default
        assert (quota.used, quota.left, quota.next_start_in) == (0, 15, 0.0)
    assert len(sent) == 15  # reading the quota sent nothing


async def test_a_window_that_ran_out_shows_the_pause_and_the_lowered_rate() -> None:
    sched = Scheduler(m.RateLimits.pro(), max_concurrency=32, clock=(clock := VirtualClock()))
    pool = sched.pool("default")
    permits = [await pool.acquire() for _ in range(15)]
    await clock.advance(0.1)
    for permit in permits[10:]:  # the server's window held ten: the rest refused
        permit.rate_limited(59.9)
    for permit in permits:
        permit.release()
    await clock.advance(8)
    quota = (await sched.quota()).default
    assert (quota.limit, quota.configured, quota.used, quota.left) == (10.0, 15.0, 10, 0)
    assert quota.paused_for == pytest.approx(51.9)
    # Lowered to the ten it took: the next start waits for them to leave the span (61 s).
    assert quota.next_start_in == pytest.approx(52.9)
    await clock.advance(100)
    quota = (await sched.quota()).default
    assert (quota.used, quota.left, quota.next_start_in, quota.paused_for) == (0, 10, 0.0, 0.0)
    await sched.aclose()


async def test_an_unlimited_pool_says_so() -> None:
    limits = m.RateLimits(float("inf"), 2)
    async with client_on(VirtualClock(), [], rate_limits=limits) as client:
        quota = (await client.quota()).default
    assert quota.unlimited and quota.left is None and quota.next_start_in == 0.0


async def test_a_closed_client_refuses_to_read_its_quota() -> None:
    client = client_on(VirtualClock(), [])
    await client.aclose()
    with pytest.raises(m.ClientClosedError):
        await client.quota()


# A shared quota: every process's starts, from the log in Redis ---------------------------


def shared_clients(
    memory_redis: object, clock: VirtualClock, sent: Sent, **kwargs: Any
) -> tuple[m.AsyncMagisterium, m.AsyncMagisterium]:
    """Two clients (two processes) on one token, sharing its quota in one in-memory Redis
    (each with a redis-py client of its own, as an application passes one)."""
    from fakeredis import FakeAsyncRedis

    def client() -> m.AsyncMagisterium:
        quota = m.SharedQuota(FakeAsyncRedis(server=memory_redis))
        return client_on(clock, sent, shared_quota=quota, **kwargs)

    return client(), client()


async def test_a_shared_quota_counts_every_processs_starts(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    sent: Sent = []
    first, second = shared_clients(memory_redis, clock, sent)
    async with first, second:
        await asyncio.gather(*(first.search(f"q{i}") for i in range(15)))
        await clock.advance(10.0)
        quota = await second.quota()  # the other process, which sent nothing itself
        assert quota.shared and second.stats.default.sent == 0
        assert (quota.default.used, quota.default.left) == (15, 0)
        assert quota.default.next_start_in == pytest.approx(51.0)
        assert quota.expensive == m.PoolQuota("expensive", 2.0, 2.0, 60.0, 0, 2, 0.0, shared=True)
    assert len(sent) == 15


async def test_a_shared_pause_is_seen_by_every_process(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    sent: Sent = []
    first, second = shared_clients(memory_redis, clock, sent)
    async with first, second:
        await first.search("grace")
        # A window someone else spent: the first process's next start is refused.
        pool = first._scheduler.pool("default")
        permit = await pool.acquire()
        permit.rate_limited(30.0)
        permit.release()
        await clock.advance(0.0)
        quota = (await second.quota()).default  # the other process sees the pause
    assert quota.shared and quota.used == 1
    assert quota.paused_for == pytest.approx(30.0)
    assert (quota.next_start_in, quota.left) == (pytest.approx(30.0), 0)


async def test_an_unlimited_pool_beside_a_shared_one_leaves_the_quota_shared(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    limits = m.RateLimits(15, float("inf"))
    first, second = shared_clients(memory_redis, clock, [], rate_limits=limits)
    async with first, second:
        await first.search("grace")
        quota = await second.quota()
    assert quota.shared and quota.default.used == 1 and quota.expensive.unlimited


async def test_with_redis_down_the_quota_is_this_processs_view() -> None:
    clock = VirtualClock()
    sent: Sent = []
    nowhere = RedisServer()  # never started: connection refused
    shared = m.SharedQuota(nowhere.url, timeout=0.5)
    pytest.importorskip("redis", reason="needs redis-py")
    async with client_on(clock, sent, shared_quota=shared) as client:
        quota = await client.quota()
    assert not quota.shared and not quota.default.shared
    assert dataclasses.astuple(quota.default)[:6] == ("default", 15.0, 15.0, 60.0, 0, 15)
    assert sent == []


@pytest.mark.parametrize(
    "url",
    [
        "redis://:Sup3rS3cret@127.0.0.1:6379/0",
        "rediss://alice:Sup3rS3cret@127.0.0.1:6379/0",
        "redis+sentinel://alice:Sup3rS3cret@127.0.0.1:26379/primary",
        "redis+sentinel://127.0.0.1:26379/primary?sentinel_password=Sup3rS3cret",
    ],
)
def test_a_shared_quota_shows_its_url_with_the_password_masked(url: str) -> None:
    quota = m.SharedQuota(url)
    client = m.AsyncMagisterium(token="t", shared_quota=url)
    for shown in (repr(quota), str(quota), f"{client.shared_quota}", repr(client)):
        assert "Sup3rS3cret" not in shown
    assert "***" in repr(quota) and "workers=1" in repr(quota)
