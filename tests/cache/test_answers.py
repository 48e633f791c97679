"""The front: hits, misses and shared calls counted; freshness on an injected wall clock;
"not found" kept briefly, failures never; a relative day not past its day; a store that
fails bypassed with one warning."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from magisterium_async._cache import (
    BYPASS_SECONDS,
    CLAIM_SECONDS,
    CLAIMS,
    AnswerCache,
    CacheStats,
    DiskAnswers,
    MemoryAnswers,
    RedisAnswers,
    StoreUnavailable,
    request_key,
)
from magisterium_async._config import CachePolicy
from magisterium_async._errors import APIConnectionError
from magisterium_async._models import Artifact, DataPart, Part, Task, TaskStatus, TextPart

ORIGIN = "https://www.magisterium.com/api/v1/a2a"
UTC = dt.timezone.utc
# 2026-12-02 10:00 UTC: fourteen hours before the day ends.
MORNING = dt.datetime(2026, 12, 2, 10, tzinfo=UTC).timestamp()


class Wall:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self, now: float = MORNING) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def task(text: str = "the text", *, state: str = "completed", name: str = "document") -> Task:
    """A task as the service answers ``name``'s skill (a document has its metadata, a
    search its results, "Document not found." neither)."""
    parts: list[Part] = [TextPart(text=text)]
    if name == "document" and text != "Document not found.":
        parts.append(DataPart(data={"id": "doc-1", "title": "A document"}))
    elif name == "search_results":
        parts = [DataPart(data={"results": []})]
    artifact = Artifact(artifact_id="a-1", name=name, parts=parts)
    return Task(id="t-1", context_id="c-1", status=TaskStatus(state=state), artifacts=[artifact])


class Service:
    """A call's request: ``send`` counts the calls asked to send (``turns``: each waits
    for ``line`` first, its turn in the pool's line) and the requests that left, then
    answers ``answer`` (after ``gate``, when set) or raises ``error``."""

    def __init__(self, answer: Task | None = None) -> None:
        self.turns = self.requests = 0
        self.answer = answer or task()
        self.error: BaseException | None = None
        self.gate: asyncio.Event | None = None
        self.line: asyncio.Event | None = None

    async def send(self) -> Task:
        self.turns += 1
        if self.line is not None:
            await self.line.wait()
        self.requests += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.answer


FETCH: list[Part] = [DataPart(data={"id": "doc-1"})]


def front(store: Any = "memory", wall: Wall | None = None, **policy: Any) -> AnswerCache:
    if store == "memory":
        store = MemoryAnswers(1000, 1 << 20)
    return AnswerCache(store, CachePolicy(**policy), ORIGIN, wall=wall or Wall(), tz=UTC)


async def ask(
    cache: AnswerCache,
    service: Service,
    skill: str = "document_fetch",
    parts: Sequence[Part] = FETCH,
    context_id: str | None = None,
) -> tuple[Task, str]:
    return await cache.answer(skill, parts, context_id, service.send())


async def test_a_second_identical_call_is_a_hit_and_sends_nothing() -> None:
    cache, service = front(), Service()
    first, how = await ask(cache, service)
    assert how == "miss"
    second, how = await ask(cache, service)
    assert how == "hit"
    assert service.requests == 1
    assert second == first
    assert second is not first  # a task of its own
    assert cache.stats == CacheStats(hits=1, misses=1, coalesced=0, entries=1)


async def test_other_inputs_skills_contexts_and_services_are_other_answers() -> None:
    store = MemoryAnswers(1000, 1 << 20)
    cache, service = AnswerCache(store, CachePolicy(), ORIGIN, wall=Wall(), tz=UTC), Service()
    await ask(cache, service)
    await ask(cache, service, parts=[DataPart(data={"id": "doc-2"})])
    await ask(cache, service, skill="saint_lookup", parts=[TextPart(text="doc-1")])
    await ask(cache, service, context_id="ctx-9")
    other = AnswerCache(store, CachePolicy(), "http://127.0.0.1:8000/a2a", wall=Wall(), tz=UTC)
    await ask(other, service)
    assert service.requests == 5


def test_the_key_is_a_hash_of_what_makes_calls_the_same_and_of_nothing_else() -> None:
    a = request_key(ORIGIN, "document_fetch", [DataPart(data={"id": "x", "v": 1})], None)
    b = request_key(ORIGIN, "document_fetch", [DataPart(data={"v": 1, "id": "x"})], None)
    assert a == b  # the order of a data part's keys does not matter
    assert len(a) == 64
    assert int(a, 16) >= 0
    assert a != request_key(ORIGIN, "document_fetch", [DataPart(data={"id": "x"})], None)


async def test_fifty_concurrent_identical_calls_send_one_request() -> None:
    cache, service = front(), Service()
    service.gate = asyncio.Event()
    calls = [asyncio.create_task(ask(cache, service)) for _ in range(50)]
    for _ in range(5):
        await asyncio.sleep(0)
    service.gate.set()
    answers = await asyncio.gather(*calls)
    assert service.requests == 1
    assert sorted(how for _, how in answers) == ["coalesced"] * 49 + ["miss"]
    assert len({id(t) for t, _ in answers}) == 50  # every caller its own task
    assert all(t == service.answer for t, _ in answers)
    assert cache.stats == CacheStats(hits=0, misses=1, coalesced=49, entries=1)


async def test_a_miss_sends_once_and_a_hit_or_a_joiner_never() -> None:
    cache, service = front(), Service()
    service.gate = asyncio.Event()
    calls = [asyncio.create_task(ask(cache, service)) for _ in range(3)]
    for _ in range(5):
        await asyncio.sleep(0)
    service.gate.set()
    await asyncio.gather(*calls)
    assert (service.turns, service.requests) == (1, 1)  # the leader's; the joiners' none
    assert (await ask(cache, service))[1] == "hit"
    assert service.turns == 1  # a kept answer takes no turn in the pool's line


def queued() -> Service:
    """A service whose line (the pool's) lets nobody through until ``line`` is set."""
    service = Service()
    service.line = asyncio.Event()
    return service


async def test_a_leader_cancelled_while_it_waits_for_its_turn_leaves_one_request_to_the_rest() -> (
    None
):
    cache, service = front(), queued()
    leader = asyncio.create_task(ask(cache, service))
    for _ in range(3):
        await asyncio.sleep(0)
    joiners = [asyncio.create_task(ask(cache, service)) for _ in range(2)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert (service.turns, service.requests) == (1, 0)
    leader.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert leader.cancelled()
    service.line.set()
    answers = await asyncio.gather(*joiners)
    assert service.requests == 1  # begun again by one of the two, once
    assert sorted(how for _, how in answers) == ["coalesced", "miss"]
    assert len(cache._flights) == 0


async def test_a_lone_leader_cancelled_in_line_sends_nothing_and_the_next_call_leads() -> None:
    cache, service = front(), queued()
    leader = asyncio.create_task(ask(cache, service))
    for _ in range(3):
        await asyncio.sleep(0)
    leader.cancel()
    await asyncio.gather(leader, return_exceptions=True)
    assert (service.requests, len(cache._flights)) == (0, 0)
    service.line.set()
    assert (await ask(cache, service))[1] == "miss"


async def test_a_cancelled_caller_never_cancels_the_others_who_send_for_themselves() -> None:
    cache, service = front(), Service()
    service.gate = asyncio.Event()
    first = asyncio.create_task(ask(cache, service))
    await asyncio.sleep(0)  # its request has left
    second = asyncio.create_task(ask(cache, service))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    service.gate.set()
    assert (await second)[1] == "miss"  # its own request: the first one's went with it
    assert first.cancelled()
    assert (await ask(cache, service))[1] == "hit"
    assert service.requests == 2


async def test_a_failure_reaches_every_joiner_as_its_own_exception() -> None:
    cache, service = front(), Service()
    service.gate, service.error = asyncio.Event(), APIConnectionError("reset")
    calls = [asyncio.create_task(ask(cache, service)) for _ in range(3)]
    for _ in range(5):
        await asyncio.sleep(0)
    service.gate.set()
    errors = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(e, APIConnectionError) and str(e) == "reset" for e in errors)
    assert len({id(e) for e in errors}) == 3  # each its own
    assert all(e.__traceback__ is not None for e in errors)
    assert service.requests == 1


async def test_calls_are_shared_in_flight_without_a_store_too() -> None:
    cache, service = front(store=None), Service()
    service.gate = asyncio.Event()
    calls = [asyncio.create_task(ask(cache, service, skill="document_search")) for _ in range(5)]
    await asyncio.sleep(0)
    service.gate.set()
    await asyncio.gather(*calls)
    await ask(cache, service, skill="document_search")
    assert service.requests == 2  # once in flight together; once more afterwards
    assert cache.stats == CacheStats(hits=0, misses=2, coalesced=4, entries=None)


async def test_catholic_qa_is_neither_kept_nor_shared_unless_asked() -> None:
    cache, service = front(), Service(task(name="catholic_qa_response"))
    assert not cache.covers("catholic_qa")
    service.gate = asyncio.Event()
    calls = [asyncio.create_task(ask(cache, service, skill="catholic_qa")) for _ in range(3)]
    await asyncio.sleep(0)
    service.gate.set()
    await asyncio.gather(*calls)
    assert service.requests == 3
    policy = CachePolicy().with_rule("catholic_qa", fresh=3600, coalesce=True)
    asked = AnswerCache(MemoryAnswers(10, 1 << 20), policy, ORIGIN, wall=Wall(), tz=UTC)
    assert asked.covers("catholic_qa")
    await ask(asked, service, skill="catholic_qa")
    await ask(asked, service, skill="catholic_qa")
    assert service.requests == 4


async def test_an_answer_stays_fresh_for_its_skill_s_time_and_no_longer() -> None:
    wall = Wall()
    cache, service = front(wall=wall), Service(task(name="search_results"))
    await ask(cache, service, skill="document_search")
    wall.now += 3599
    assert (await ask(cache, service, skill="document_search"))[1] == "hit"
    wall.now += 2
    assert (await ask(cache, service, skill="document_search"))[1] == "miss"
    assert service.requests == 2
    service.answer = task()
    await ask(cache, service)  # a document: thirty days
    wall.now += 29 * 86400
    assert (await ask(cache, service))[1] == "hit"
    wall.now += 2 * 86400
    assert (await ask(cache, service))[1] == "miss"


async def test_not_found_is_kept_briefly_and_failures_never() -> None:
    wall = Wall()
    cache, service = front(wall=wall), Service(task("Document not found."))
    await ask(cache, service)
    wall.now += 599
    assert (await ask(cache, service))[1] == "hit"
    wall.now += 2
    assert (await ask(cache, service))[1] == "miss"
    service.answer = task("it failed", state="failed")
    other = [DataPart(data={"id": "doc-2"})]
    await ask(cache, service, parts=other)
    await ask(cache, service, parts=other)
    service.error = APIConnectionError("reset")
    with pytest.raises(APIConnectionError):
        await ask(cache, service, parts=[DataPart(data={"id": "doc-3"})])
    service.error = None
    service.answer = task()
    assert (await ask(cache, service, parts=[DataPart(data={"id": "doc-3"})]))[1] == "miss"
    assert service.requests == 6


async def test_a_relative_day_is_not_kept_past_the_day_it_was_asked_on() -> None:
    wall = Wall()
    cache, service = front(wall=wall), Service(task(name="mass_readings"))
    today = [TextPart(text="today")]
    await ask(cache, service, skill="liturgical_readings", parts=today)
    wall.now += 13 * 3600  # 23:00, the same day
    assert (await ask(cache, service, skill="liturgical_readings", parts=today))[1] == "hit"
    wall.now += 2 * 3600  # 01:00 the next day: "today" is another day
    assert (await ask(cache, service, skill="liturgical_readings", parts=today))[1] == "miss"
    christmas = [TextPart(text="2026-12-25")]
    await ask(cache, service, skill="liturgical_readings", parts=christmas)
    wall.now += 20 * 86400
    assert (await ask(cache, service, skill="liturgical_readings", parts=christmas))[1] == "hit"
    assert service.requests == 3


async def test_a_relative_day_is_another_key_on_another_day_in_a_shared_store() -> None:
    # Two hosts in different time zones share one store: each reads its own "today".
    store, service = MemoryAnswers(100, 1 << 20), Service(task(name="martyrology"))
    east = AnswerCache(
        store, CachePolicy(), ORIGIN, wall=Wall(), tz=dt.timezone(dt.timedelta(hours=14))
    )
    west = AnswerCache(store, CachePolicy(), ORIGIN, wall=Wall(), tz=UTC)
    today = [TextPart(text="today")]
    await ask(east, service, skill="saints_of_the_day", parts=today)
    await ask(west, service, skill="saints_of_the_day", parts=today)
    assert service.requests == 2


class Broken:
    """A store that fails every call, counting them."""

    where = "redis://cache.example:6379/0"
    entries = None

    def __init__(self) -> None:
        self.calls = 0

    async def get(self, key: str, now: float) -> bytes | None:
        self.calls += 1
        raise StoreUnavailable("ConnectionError: refused")

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        self.calls += 1
        raise StoreUnavailable("ConnectionError: refused")

    async def aclose(self) -> None:
        pass


async def test_a_failing_store_is_bypassed_with_one_warning_and_tried_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wall, store = Wall(), Broken()
    cache, service = front(store=store, wall=wall), Service()
    with caplog.at_level(logging.DEBUG, "magisterium_async.cache"):
        for _ in range(5):
            assert (await ask(cache, service))[1] == "miss"
        assert store.calls == 1  # the first get failed; the rest went without it
        wall.now += BYPASS_SECONDS
        await ask(cache, service)
        assert store.calls == 2  # tried again, failed again: bypassed anew, no put
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "calls go to the service without it" in warnings[0].getMessage()
    assert service.requests == 6


async def test_a_store_that_comes_back_is_used_again_and_said_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wall = Wall()
    store = MemoryAnswers(100, 1 << 20)
    cache, service = front(store=store, wall=wall), Service()
    working_get = store.get

    async def refuse(key: str, now: float) -> bytes | None:
        raise StoreUnavailable("down")

    store.get = refuse  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, "magisterium_async.cache"):
        await ask(cache, service)
        store.get = working_get  # type: ignore[method-assign]
        wall.now += BYPASS_SECONDS
        await ask(cache, service)
        assert (await ask(cache, service))[1] == "hit"
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


async def test_a_corrupt_entry_is_asked_for_again_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryAnswers(100, 1 << 20)
    cache, service = front(store=store), Service()
    key = request_key(ORIGIN, "document_fetch", FETCH, None)
    await store.put(key, b"\x93garbage", MORNING + 99, MORNING)
    with caplog.at_level(logging.WARNING, "magisterium_async.cache"):
        assert (await ask(cache, service))[1] == "miss"
        assert (await ask(cache, service))[1] == "hit"  # replaced by the fresh answer
        await store.put(key, b"junk", MORNING + 99, MORNING)
        assert (await ask(cache, service))[1] == "miss"
    assert len(caplog.records) == 1


async def test_an_unreachable_redis_never_fails_a_call() -> None:
    from tests.helpers.redis_server import _free_port

    pytest.importorskip("redis")
    cache = front(store=RedisAnswers(f"redis://127.0.0.1:{_free_port()}/0"))
    service = Service()
    assert (await ask(cache, service))[1] == "miss"
    assert service.requests == 1
    await cache.aclose()


async def test_a_cache_file_serves_a_new_front_as_it_would_a_new_process(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    first = front(store=DiskAnswers(path, 100, 1 << 20))
    service = Service()
    await ask(first, service)
    await first.aclose()
    second = front(store=DiskAnswers(path, 100, 1 << 20))
    found, how = await ask(second, service)
    assert how == "hit"
    assert found == service.answer
    assert second.stats.entries == 1
    await second.aclose()
    assert service.requests == 1


async def test_redis_entries_are_shared_by_fronts_and_read_back_equal(memory_redis: Any) -> None:
    from fakeredis import FakeAsyncRedis

    wall, service = Wall(), Service()
    one = front(store=RedisAnswers(FakeAsyncRedis(server=memory_redis)), wall=wall)
    two = front(store=RedisAnswers(FakeAsyncRedis(server=memory_redis)), wall=wall)
    original, _ = await ask(one, service)
    copy, how = await ask(two, service)
    assert (how, copy) == ("hit", original)
    assert msgspec.json.encode(copy) == msgspec.json.encode(original)
    wall.now += 31 * 86400  # stale by our clock, whatever Redis's says
    assert (await ask(two, service))[1] == "miss"


# Calls in flight shared between processes, over Redis ----------------------------------


class Host:
    """One process of a shared Redis cache: its own front, service and virtual sleeps."""

    def __init__(self, memory_redis: Any, wall: Wall, answer: Task | None = None) -> None:
        from fakeredis import FakeAsyncRedis

        self.wall = wall
        self.store = RedisAnswers(FakeAsyncRedis(server=memory_redis))
        self.slept = 0.0
        self.cache = AnswerCache(
            self.store, CachePolicy(), ORIGIN, wall=wall, tz=UTC, sleep=self.sleep
        )
        self.service = Service(answer)

    async def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.wall.now += seconds
        await asyncio.sleep(0)

    async def ask(self) -> tuple[Task, str]:
        return await ask(self.cache, self.service)


async def _until(condition: Any) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


async def test_a_process_waits_for_another_s_answer_instead_of_sending(memory_redis: Any) -> None:
    wall = Wall()
    one, two = Host(memory_redis, wall), Host(memory_redis, wall)
    one.service.gate = asyncio.Event()
    first = asyncio.create_task(one.ask())
    await _until(lambda: one.service.requests == 1)  # claimed, and sending
    second = asyncio.create_task(two.ask())
    await _until(lambda: two.slept > 0)  # waiting for the answer
    one.service.gate.set()
    (mine, how_one), (theirs, how_two) = await first, await second
    assert (how_one, how_two) == ("miss", "coalesced")
    assert theirs == mine
    assert (one.service.requests, two.service.requests) == (1, 0)
    assert two.cache.stats.coalesced == 1
    assert (await two.ask())[1] == "hit"


async def test_a_claim_given_up_by_a_failure_lets_the_waiter_send(memory_redis: Any) -> None:
    wall = Wall()
    one, two = Host(memory_redis, wall), Host(memory_redis, wall)
    one.service.gate = asyncio.Event()
    one.service.error = APIConnectionError("reset")
    first = asyncio.create_task(one.ask())
    await _until(lambda: one.service.requests == 1)
    second = asyncio.create_task(two.ask())
    await _until(lambda: two.slept > 0)
    one.service.gate.set()
    with pytest.raises(APIConnectionError):
        await first
    assert (await second)[1] == "miss"
    assert two.service.requests == 1
    assert two.slept < 1  # it went as soon as the claim was given up


async def test_an_answer_not_kept_gives_up_the_claim_too(memory_redis: Any) -> None:
    wall = Wall()
    failed = task("no", state="failed")
    one, two = Host(memory_redis, wall, failed), Host(memory_redis, wall, failed)
    one.service.gate = asyncio.Event()
    first = asyncio.create_task(one.ask())
    await _until(lambda: one.service.requests == 1)
    second = asyncio.create_task(two.ask())
    await _until(lambda: two.slept > 0)
    one.service.gate.set()
    assert (await first)[0].state == "failed"
    assert (await second)[1] == "miss"


async def test_a_claim_whose_holder_died_holds_nobody_up_past_its_time(memory_redis: Any) -> None:
    wall = Wall()
    dead, alive = Host(memory_redis, wall), Host(memory_redis, wall)
    key = request_key(ORIGIN, "document_fetch", FETCH, None)
    assert await dead.store.claim(key, 3600, "dead") == (None, True)  # claimed; then it died
    _, how = await alive.ask()
    assert how == "miss"
    assert alive.service.requests == 1
    assert CLAIM_SECONDS <= alive.slept < CLAIM_SECONDS + 1


async def test_a_closed_cache_is_left_alone_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache, service = front(store=DiskAnswers(tmp_path / "c.sqlite", 10, 1 << 20)), Service()
    await cache.aclose()
    with caplog.at_level(logging.DEBUG, "magisterium_async.cache"):
        assert (await ask(cache, service))[1] == "miss"
    assert caplog.records == []


async def _claims(memory_redis: Any) -> list[bytes]:
    from fakeredis import FakeAsyncRedis

    redis = FakeAsyncRedis(server=memory_redis)
    try:
        return [key async for key in redis.scan_iter(CLAIMS + "*")]
    finally:
        await redis.aclose()


async def test_a_leader_and_its_joiner_cancelled_together_in_line_leave_no_claim(
    memory_redis: Any,
) -> None:
    """``asyncio.timeout()`` around ``gather(fetch(x), fetch(x))`` fires while the first
    waits in the pool's line: nobody sends, and no claim is left for every other process
    to wait on."""
    host = Host(memory_redis, Wall())
    host.service.line = asyncio.Event()
    both = asyncio.gather(*(host.ask() for _ in range(2)))
    await _until(lambda: host.service.turns == 1)
    assert len(await _claims(memory_redis)) == 1  # the leader's, while it waits in line
    both.cancel()  # both callers, in one turn of the loop
    await asyncio.gather(both, return_exceptions=True)
    assert await _claims(memory_redis) == []
    assert host.service.requests == 0


async def test_a_leader_cancelled_in_line_leaves_its_claim_to_those_who_joined(
    memory_redis: Any,
) -> None:
    host = Host(memory_redis, Wall())
    host.service.line = asyncio.Event()
    leader = asyncio.create_task(host.ask())
    await _until(lambda: host.service.turns == 1)
    joiner = asyncio.create_task(host.ask())
    for _ in range(5):
        await asyncio.sleep(0)
    leader.cancel()
    await asyncio.gather(leader, return_exceptions=True)
    host.service.line.set()
    # The joiner leads now and is served at once: no wait on its own process's claim
    # (which would be 10 s).
    assert await joiner == (host.service.answer, "miss")
    assert (host.service.requests, host.slept) == (1, 0)


class Slow(RedisAnswers):
    """Redis whose claims are taken at once but whose replies (claims' and releases')
    come only when ``reply`` is set, every command a turn of the loop away."""

    def __init__(self, memory_redis: Any) -> None:
        from fakeredis import FakeAsyncRedis

        super().__init__(FakeAsyncRedis(server=memory_redis))
        self.taken, self.reply = asyncio.Event(), asyncio.Event()
        self.reply.set()

    async def claim(self, key: str, seconds: float, owner: str) -> tuple[bytes | None, bool]:
        await asyncio.sleep(0)
        got = await super().claim(key, seconds, owner)
        self.taken.set()
        await self.reply.wait()
        return got

    async def release(self, key: str, owner: str) -> None:
        await asyncio.sleep(0)
        await self.reply.wait()
        await super().release(key, owner)


async def test_the_rest_of_a_leader_cancelled_before_its_claim_s_reply_finds_the_claim_its_own(
    memory_redis: Any,
) -> None:
    host = Host(memory_redis, Wall())
    host.cache.store = store = Slow(memory_redis)
    store.reply.clear()
    leader = asyncio.create_task(host.ask())
    await store.taken.wait()  # Redis took the claim; its reply is on the way
    joiner = asyncio.create_task(host.ask())
    for _ in range(5):
        await asyncio.sleep(0)  # it joins the leader's flight
    leader.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    store.reply.set()
    await asyncio.gather(leader, return_exceptions=True)
    assert (await joiner)[1] == "miss"
    assert host.service.requests == 1
    assert host.slept == 0  # no wait on its own process's claim (it would be 10 s)
    await host.cache.aclose()
    assert await _claims(memory_redis) == []  # the answer took its place


async def test_a_leader_cancelled_twice_while_it_lets_its_claim_go_strands_no_one(
    memory_redis: Any,
) -> None:
    host = Host(memory_redis, Wall())
    host.cache.store = store = Slow(memory_redis)
    host.service.line = asyncio.Event()
    leader = asyncio.create_task(host.ask())  # claims, then waits in line
    await _until(lambda: host.service.turns == 1)
    store.reply.clear()
    leader.cancel()  # nobody joined: it lets its claim go, slowly
    for _ in range(5):
        await asyncio.sleep(0)
    leader.cancel()  # and is cancelled again on the way
    await asyncio.gather(leader, return_exceptions=True)
    assert len(host.cache._flights) == 0  # a later call leads
    store.reply.set()
    host.service.line.set()
    assert (await host.ask())[1] == "miss"  # the claim left behind is its client's own
    assert host.slept == 0


@pytest.mark.parametrize("steps", range(12))
async def test_a_leader_cancelled_in_line_then_its_joiner_leave_no_claim(
    memory_redis: Any, steps: int
) -> None:
    """The call begun again by the leader's joiner, cancelled at any step (before it ran,
    while it looks in the store again, while it claims, while it waits in line), gives the
    claim up."""
    host = Host(memory_redis, Wall())
    host.cache.store = Slow(memory_redis)
    host.service.line = asyncio.Event()
    leader = asyncio.create_task(host.ask())
    await _until(lambda: host.service.turns == 1)
    joiner = asyncio.create_task(host.ask())
    for _ in range(5):
        await asyncio.sleep(0)
    leader.cancel()
    for _ in range(steps):
        await asyncio.sleep(0)
    joiner.cancel()
    await asyncio.gather(leader, joiner, return_exceptions=True)
    for _ in range(20):
        await asyncio.sleep(0)
    assert await _claims(memory_redis) == []
    assert len(host.cache._flights) == 0
