"""A quota shared by processes on one account, through the public API.

Processes are clients in one event loop, each with its own Redis client: on an in-memory
Redis running the same scripts (fakeredis), in virtual time, for what the shared rule does; on
a real ``redis-server`` for what an outage, a restart and a refusal do.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
from tests.conftest import TOKEN, artifact, data, task_json
from tests.helpers.redis_server import RedisServer

BASE = "https://a2a.example/api"
PRO = m.RateLimits.pro()  # 15 a minute; the margin is 1 s

Arrivals = list[tuple[str, float]]  # (query, when the server saw it)


class Server:
    """A server of one account's quota: a fixed window of ``limit`` a minute (``None``: no
    quota), answering a search after 50 ms; each arrival recorded."""

    def __init__(self, clock: VirtualClock, limit: int | None = None) -> None:
        self.clock, self.limit = clock, limit
        self.arrivals: Arrivals = []
        self.window, self.count = -1, 0

    async def __call__(self, request: MockRequest) -> MockResponse:
        await self.clock.sleep(0.025)
        now = self.clock.now()
        query = request.json["params"]["message"]["parts"][0]["text"]
        self.arrivals.append((query, now))
        window = math.floor(now / 60)
        if window != self.window:
            self.window, self.count = window, 0
        self.count += 1
        refused = self.limit is not None and self.count > self.limit
        await self.clock.sleep(0.025)
        if refused:
            wait = {"retryAfter": math.ceil((window + 1) * 60 - now)}
            return MockResponse.error(request, -32003, "Rate limit exceeded", wait, status=429)
        hits = artifact("search_results", data({"results": []}))
        return MockResponse.result(request, task_json(artifacts=[hits]))


def processes(
    memory_redis: object, clock: VirtualClock, server: Server, n: int, **kw: Any
) -> list[m.AsyncMagisterium]:
    from fakeredis import FakeAsyncRedis

    kw.setdefault("rate_limits", PRO)
    return [
        m.AsyncMagisterium(
            TOKEN,
            base_url=BASE,
            clock=clock,
            transport=MockTransport(server),
            shared_quota=m.SharedQuota(FakeAsyncRedis(server=memory_redis)),
            **kw,
        )
        for _ in range(n)
    ]


def most_in_a_minute(times: list[float]) -> int:
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u < t + 60.0) for i, t in enumerate(times))


async def test_four_processes_never_exceed_the_quota_together(memory_redis: object) -> None:
    clock = VirtualClock()
    server = Server(clock)
    clients = processes(memory_redis, clock, server, 4)
    await asyncio.gather(*(c.search(f"p{i}-{j}") for i, c in enumerate(clients) for j in range(15)))
    for client in clients:
        await client.aclose()
    times = [t for _, t in server.arrivals]
    assert len(times) == 60 and most_in_a_minute(times) == 15
    # And the whole quota is used: four windows' worth, the last window's starts handed
    # round-robin over the processes a moment apart.
    assert max(times) < 3 * 61 + 5


async def test_a_window_one_process_found_short_lowers_every_process(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    server = Server(clock, limit=10)  # told 15, the server allows 10
    first, second = processes(memory_redis, clock, server, 2)
    await asyncio.gather(*(first.search(f"a{j}") for j in range(15)))
    assert (await second.quota()).default.limit == 10.0  # what the first learned is shared
    await asyncio.gather(
        *(c.search(f"{i}-{j}") for i, c in enumerate((first, second)) for j in range(10))
    )
    refused = len(server.arrivals) - 35
    assert refused == 5  # the first window's overshoot, and no more
    for client in (first, second):
        await client.aclose()


async def test_an_interactive_call_in_one_process_goes_before_bulk_in_others(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    server = Server(clock)
    person, *harvests = processes(memory_redis, clock, server, 3)

    async def bulk(client: m.AsyncMagisterium, name: str) -> None:
        async for _ in client.search_many([f"{name}{j}" for j in range(60)], concurrency=30):
            pass

    jobs = [asyncio.ensure_future(bulk(c, f"h{i}-")) for i, c in enumerate(harvests)]
    # Three windows on, the harvests are paced (a run of bulk starts longer than two
    # windows), a start every 4 s; whatever bulk waits in the other processes, a person's
    # call takes the next one.
    await clock.sleep(3 * 61.0 + 10.0)
    asked = clock.now()
    await person.search("person")
    waited = dict(server.arrivals)["person"] - asked
    assert waited <= 60.0 / 15 + 1.0  # one quota interval, not a window
    await asyncio.gather(*jobs)
    assert most_in_a_minute([t for _, t in server.arrivals]) <= 15
    for client in (person, *harvests):
        await client.aclose()


async def test_bulk_in_one_process_leaves_the_last_free_start_to_a_person_in_another(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    server = Server(clock)
    person, harvest = processes(memory_redis, clock, server, 2)

    async def bulk() -> None:
        async for _ in harvest.search_many([f"h{j}" for j in range(40)], concurrency=16):
            pass

    job = asyncio.ensure_future(bulk())  # a window's burst: 15 at once
    await clock.sleep(20.0)
    # Three calls wait for the next window, where they go first and bulk is paced behind
    # them: the window's starts are taken early, and its last free one is left until the
    # next is an interval away (bulk taking it would leave the next call 10 s).
    await asyncio.gather(*(person.search(f"early{j}") for j in range(3)))
    await clock.sleep(112.0 - clock.now())
    await person.search("late")
    waited = dict(server.arrivals)["late"] - 112.0
    assert waited <= 60.0 / 15  # one quota interval at most
    await job
    assert most_in_a_minute([t for _, t in server.arrivals]) <= 15
    for client in (person, harvest):
        await client.aclose()


async def test_quota_reads_every_processs_starts_and_the_shared_pause(
    memory_redis: object,
) -> None:
    clock = VirtualClock()
    server = Server(clock)
    first, second = processes(memory_redis, clock, server, 2)
    await asyncio.gather(*(first.search(f"q{j}") for j in range(15)))
    await clock.sleep(10.0)
    quota = await second.quota()  # the other process, which sent nothing itself
    assert quota.shared and second.stats.default.sent == 0
    assert (quota.default.used, quota.default.left) == (15, 0)
    assert quota.default.next_start_in == pytest.approx(51.0, abs=0.1)
    assert quota.expensive == m.PoolQuota("expensive", 2.0, 2.0, 60.0, 0, 2, 0.0, shared=True)
    for client in (first, second):
        await client.aclose()


async def test_the_keys_name_the_account_by_hash_and_hold_no_token(memory_redis: object) -> None:
    from fakeredis import FakeAsyncRedis

    clock = VirtualClock()
    (client,) = processes(memory_redis, clock, Server(clock), 1)
    await client.search("grace")
    await client.aclose()
    keys = [k.decode() for k in await FakeAsyncRedis(server=memory_redis).keys("*")]
    assert keys and all(TOKEN not in k for k in keys)
    tags = {k[k.index("{") : k.index("}") + 1] for k in keys}
    assert len(tags) == 1  # one hash tag: every key of the account in one Cluster slot


async def test_without_redis_calls_go_on_alone_and_say_so(caplog: pytest.LogCaptureFixture) -> None:
    gone = RedisServer()  # a port nobody listens on
    clock = VirtualClock()
    server = Server(clock)
    notices: list[str] = []

    def heard(event: m.PoolEvent) -> None:
        if event.kind == "notice":
            notices.append(getattr(event, "message", ""))

    client = m.AsyncMagisterium(
        TOKEN,
        base_url=BASE,
        clock=clock,
        transport=MockTransport(server),
        rate_limits=m.RateLimits(4, 2, period=60.0),
        shared_quota=m.SharedQuota(gone.url, workers=2, timeout=0.2),
        on_event=heard,
    )
    async with client:
        await asyncio.gather(*(client.search(f"q{j}") for j in range(4)))
    assert any("did not answer" in n for n in notices)
    times = [t for _, t in server.arrivals]
    # Alone: a window first (others' starts may be in it), then half the quota (workers=2).
    assert min(times) >= 61.0 and most_in_a_minute(times) <= 2


async def test_a_redis_that_refuses_the_password_fails_the_calls_saying_so(
    redis_server: RedisServer,
) -> None:
    redis_server.options += ["--requirepass", "right"]
    redis_server.restart()
    url = f"redis://:wrong@127.0.0.1:{redis_server.port}/0"
    clock = VirtualClock()
    server = Server(clock)
    client = m.AsyncMagisterium(
        TOKEN,
        base_url=BASE,
        clock=clock,
        transport=MockTransport(server),
        shared_quota=m.SharedQuota(url),
    )
    async with client:
        results = await asyncio.gather(
            *(client.search(f"q{j}") for j in range(3)), return_exceptions=True
        )
    assert all(isinstance(r, m.SharedQuotaError) for r in results), results
    assert all("refused" in str(r) and "wrong" not in str(r) for r in results)
    assert server.arrivals == []  # nothing was sent


async def test_a_redis_restarted_empty_pauses_a_window_and_never_overruns(
    redis_server: RedisServer,
) -> None:
    clock = VirtualClock()
    server = Server(clock)
    clients = [
        m.AsyncMagisterium(
            TOKEN,
            base_url=BASE,
            clock=clock,
            transport=MockTransport(server),
            rate_limits=PRO,
            shared_quota=m.SharedQuota(redis_server.url),
        )
        for _ in range(2)
    ]
    await asyncio.gather(*(c.search(f"a{i}-{j}") for i, c in enumerate(clients) for j in range(7)))
    redis_server.restart()  # the shared log is lost: the 14 starts are unknown to Redis
    await clock.sleep(5.0)
    await asyncio.gather(*(c.search(f"b{i}-{j}") for i, c in enumerate(clients) for j in range(7)))
    for client in clients:
        await client.aclose()
    assert most_in_a_minute([t for _, t in server.arrivals]) <= 15


async def test_a_state_overwritten_with_something_else_is_taken_as_lost(
    memory_redis: object,
) -> None:
    """A key whose value is not a state (torn, or written by another program): no call
    fails; the pools pause a window, as after a Redis that lost its state."""
    from fakeredis import FakeAsyncRedis

    clock = VirtualClock()
    server = Server(clock)
    (client,) = processes(memory_redis, clock, server, 1)
    await asyncio.gather(*(client.search(f"a{j}") for j in range(5)))
    admin = FakeAsyncRedis(server=memory_redis)
    [key] = await admin.keys("*:default:state")
    await admin.set(key, b"\x00not json")
    await client.search("b")
    await client.aclose()
    assert server.arrivals[-1][1] >= 61.0  # the window the lost starts may still be in
    assert most_in_a_minute([t for _, t in server.arrivals]) <= 15


async def test_closing_wakes_every_waiting_call(memory_redis: object) -> None:
    clock = VirtualClock()
    (client,) = processes(memory_redis, clock, Server(clock), 1, rate_limits=m.RateLimits(1, 1))
    await client.search("first")
    waiting = [asyncio.ensure_future(client.search(f"q{j}")) for j in range(3)]
    await asyncio.sleep(0)
    await client.aclose()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, m.ClientClosedError) for r in results)
