"""The cache in the client's call path: before the pool, shared by views, harvests and
batches; seen in cache_stats, spans and metrics; a broken cache never fails a call."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import magisterium_async as m
from magisterium_async._cache import AnswerCache, DiskAnswers
from magisterium_async._config import CachePolicy
from magisterium_async.testing import Emulator, EmulatorConfig

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

DOC = "10234"


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        yield emulator


def client(emu: Emulator, **options: Any) -> m.AsyncMagisterium:
    options.setdefault("rate_limits", m.RateLimits.unlimited())
    return m.AsyncMagisterium(token=emu.token, base_url=emu.base_url, **options)


def sent(emu: Emulator, skill: str) -> int:
    return emu.stats.count(skill=skill)


async def test_fifty_identical_fetches_and_searches_send_one_request_each(emu: Emulator) -> None:
    async with client(emu) as c:
        documents = await asyncio.gather(*(c.fetch(DOC) for _ in range(50)))
        results = await asyncio.gather(*(c.search("grace") for _ in range(50)))
        assert (sent(emu, "document_fetch"), sent(emu, "document_search")) == (1, 1)
        assert all(d == documents[0] for d in documents)
        assert all(r == results[0] for r in results)
        assert c.cache_stats == m.CacheStats(hits=0, misses=2, coalesced=98, entries=None)
        await c.fetch(DOC)  # no cache: once landed, the next call sends again
        assert sent(emu, "document_fetch") == 2


async def test_each_lookup_readings_and_saints_are_shared_too(emu: Emulator) -> None:
    async with client(emu) as c:
        for skill in ("pope_lookup", "saint_lookup"):
            tasks = await asyncio.gather(
                *(c.send_message("John Paul II", skill_id=skill) for _ in range(5))
            )
            assert sent(emu, skill) == 1
            assert len({id(t) for t in tasks}) == 5  # a task of its own each
        await asyncio.gather(*(c.mass_readings("2026-03-19") for _ in range(5)))
        await asyncio.gather(*(c.saints("today") for _ in range(5)))
        assert sent(emu, "liturgical_readings") == sent(emu, "saints_of_the_day") == 1


async def test_catholic_qa_is_not_shared_unless_the_policy_asks(emu: Emulator) -> None:
    async with client(emu) as c:
        await asyncio.gather(*(c.ask("What is grace?") for _ in range(3)))
        assert sent(emu, "catholic_qa") == 3
    policy = m.CachePolicy().with_rule("catholic_qa", coalesce=True)
    async with client(emu, cache_policy=policy) as c:
        answers = await asyncio.gather(*(c.ask("What is grace?") for _ in range(3)))
        assert sent(emu, "catholic_qa") == 4
        assert answers[0] == answers[1] == answers[2]


async def test_calls_that_differ_in_input_or_context_are_not_shared(emu: Emulator) -> None:
    async with client(emu) as c:
        await asyncio.gather(c.fetch(DOC), c.fetch("10326"), c.search("grace"))
        await asyncio.gather(
            c.send_message(m.DataPart(data={"id": DOC}), skill_id="document_fetch"),
            c.send_message(
                m.DataPart(data={"id": DOC}), skill_id="document_fetch", context_id="other"
            ),
        )
        assert sent(emu, "document_fetch") == 4


async def test_a_cached_answer_spends_no_quota_and_sends_nothing(emu: Emulator) -> None:
    # One request an hour: a second request would wait an hour; a hit does not.
    async with client(emu, cache="memory", rate_limits=m.RateLimits(1, 1, period=3600)) as c:
        first = await c.fetch(DOC)
        second = await c.fetch(DOC)
        assert second == first
        assert second is not first
        assert c.stats.default.sent == 1
        assert sent(emu, "document_fetch") == 1
        assert c.cache_stats == m.CacheStats(hits=1, misses=1, coalesced=0, entries=1)


async def test_typed_calls_and_send_message_share_their_answers(emu: Emulator) -> None:
    async with client(emu, cache="memory") as c:
        document = await c.fetch(DOC)
        task = await c.send_message(m.DataPart(data={"id": DOC}), skill_id="document_fetch")
        assert sent(emu, "document_fetch") == 1
        assert task.artifact("document") is not None
        assert document is not None and document.id == DOC


async def test_not_found_is_kept_and_read_back_as_none(emu: Emulator) -> None:
    async with client(emu, cache="memory") as c:
        assert await c.fetch("no-such-document") is None
        assert await c.fetch("no-such-document") is None
        assert sent(emu, "document_fetch") == 1


async def test_views_batches_and_harvests_use_the_client_s_cache(
    emu: Emulator, tmp_path: Path
) -> None:
    async with client(emu, cache="memory") as c:
        await c.with_options(priority="bulk").fetch(DOC)
        items = [item async for item in c.fetch_many([DOC, DOC, "10326"])]
        assert all(item.error is None for item in items)
        assert sent(emu, "document_fetch") == 2
        first = [d.id async for d in c.harvest(["grace", "Lumen Gentium"], state=tmp_path / "1")]
        fetched = sent(emu, "document_fetch")
        second = [
            d.id async for d in c.harvest(["Lumen Gentium", "marriage"], state=tmp_path / "2")
        ]
        # The second harvest searched "marriage" alone and fetched only what it had not.
        assert sent(emu, "document_search") == 3
        new = set(second) - set(first) - {DOC, "10326"}
        assert sent(emu, "document_fetch") == fetched + len(new)
        # The cache never changes a harvest's output: every document found, once.
        assert len(first) == len(set(first)) and len(second) == len(set(second))
        assert {"10234", "10326"} <= set(first) & set(second)


async def test_a_failure_reaches_every_shared_caller_as_its_own_error(emu: Emulator) -> None:
    from magisterium_async.testing import Fault

    emu.script(Fault.http_500(), skill="document_fetch")
    async with client(emu, max_retries=0) as c:
        errors = await asyncio.gather(*(c.fetch(DOC) for _ in range(5)), return_exceptions=True)
    assert sent(emu, "document_fetch") == 1
    assert all(isinstance(e, m.APIResponseError | m.JSONRPCError) for e in errors), errors
    assert len({id(e) for e in errors}) == 5


async def test_a_cancelled_caller_does_not_cancel_the_request_of_the_others(
    emu: Emulator,
) -> None:
    async with client(emu, cache="memory") as c:
        calls = [asyncio.create_task(c.fetch(DOC)) for _ in range(3)]
        await asyncio.sleep(0)
        calls[0].cancel()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        assert results[1] == results[2] is not None
        assert sent(emu, "document_fetch") == 1


async def test_a_cache_file_serves_the_next_client_without_a_request(
    emu: Emulator, tmp_path: Path
) -> None:
    path = tmp_path / "answers.sqlite"
    async with client(emu, cache=path) as c:
        original = await c.fetch(DOC)
        hits = await c.search("grace")
    async with client(emu, cache=str(path)) as c:
        assert await c.fetch(DOC) == original
        assert await c.search("grace") == hits
        assert c.cache_stats.hits == 2
        assert c.cache_stats.entries == 2
    assert (sent(emu, "document_fetch"), sent(emu, "document_search")) == (1, 1)


async def test_the_cache_the_environment_names_serves_the_next_client_unless_cache_is_given(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "answers.sqlite"
    monkeypatch.setenv("MAGISTERIUM_CACHE", f" {path} ")
    async with client(emu) as c:
        original = await c.fetch(DOC)
    async with client(emu) as c:
        assert await c.fetch(DOC) == original
        assert c.cache_stats.hits == 1
    assert sent(emu, "document_fetch") == 1
    async with client(emu, cache="memory") as c:  # the argument wins over the variable
        assert await c.fetch(DOC) == original
        assert c.cache_stats.hits == 0
    assert sent(emu, "document_fetch") == 2
    monkeypatch.setenv("MAGISTERIUM_CACHE", "  ")  # blank: no cache
    async with client(emu) as c:
        await c.fetch(DOC)
        assert (c.cache_stats.hits, c.cache_stats.entries) == (0, None)  # None: no cache
    assert sent(emu, "document_fetch") == 3


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{tmp}/no/such/dir/answers.sqlite", "does not exist"),
        ("{tmp}/state.sqlite", "did not make"),
        ("redis+sentinel://u:hunter2@127.0.0.1:26379", "no SERVICE name"),
        ("memcached://127.0.0.1:11211", "unknown scheme"),
    ],
)
def test_a_bad_cache_in_the_environment_is_refused_at_construction_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    if "state.sqlite" in value:
        sqlite3.connect(tmp_path / "state.sqlite").execute("CREATE TABLE t (x)").connection.close()
    monkeypatch.setenv("MAGISTERIUM_CACHE", value.format(tmp=tmp_path))
    with pytest.raises(m.CacheError, match=r"^\$MAGISTERIUM_CACHE: ") as raised:
        m.AsyncMagisterium(token="t")
    assert reason in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_a_cache_file_the_cache_did_not_make_is_refused_at_construction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(m.CacheError, match="did not make"):
        m.AsyncMagisterium(token="t", cache=path)
    with pytest.raises(TypeError, match="cache_policy"):
        m.AsyncMagisterium(token="t", cache_policy={"fetch": 1})  # type: ignore[arg-type]


async def test_an_unreachable_redis_cache_never_fails_a_call(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("redis")
    from tests.helpers.redis_server import _free_port

    url = f"redis://:hunter2@127.0.0.1:{_free_port()}/0"
    with caplog.at_level(logging.WARNING, "magisterium_async.cache"):
        async with client(emu, cache=url) as c:
            for _ in range(3):
                assert await c.fetch(DOC) is not None
    assert sent(emu, "document_fetch") == 3
    assert len(caplog.records) == 1
    assert "hunter2" not in caplog.text
    assert "***" in caplog.text


@pytest.mark.redis
async def test_clients_naming_one_redis_share_its_answers(emu: Emulator, redis_server: Any) -> None:
    async with client(emu, cache=redis_server.url) as one:
        original = await one.fetch(DOC)
    async with client(emu, cache=redis_server.url) as two:
        assert await two.fetch(DOC) == original
        assert two.cache_stats.hits == 1
    assert sent(emu, "document_fetch") == 1


# Telemetry ---------------------------------------------------------------------------


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


async def test_spans_and_the_counter_say_how_each_call_was_answered(
    emu: Emulator, exporter: InMemorySpanExporter, tracer_provider: TracerProvider, reader: Any
) -> None:
    meter_provider = MeterProvider(metric_readers=[reader])
    async with client(
        emu, cache="memory", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as c:
        await asyncio.gather(c.fetch(DOC), c.fetch(DOC))  # a miss, and one coalesced
        await c.fetch(DOC)  # a hit
        await c.ask("What is grace?")  # not covered: no attribute
    spans = exporter.get_finished_spans()
    cache = [s.attributes.get("magisterium.cache") for s in spans]  # type: ignore[union-attr]
    assert sorted(x for x in cache if x) == ["coalesced", "hit", "miss"]
    assert cache.count(None) == 1
    hit = next(s for s in spans if s.attributes.get("magisterium.cache") == "hit")  # type: ignore[union-attr]
    assert hit.attributes["magisterium.attempts"] == 0  # type: ignore[index]
    assert hit.attributes["magisterium.skill.id"] == "document_fetch"  # type: ignore[index]
    assert hit.attributes["a2a.task.state"] == "completed"  # type: ignore[index]
    data = reader.get_metrics_data()
    points = {
        (dict(p.attributes)["skill"], dict(p.attributes)["outcome"]): p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "magisterium.client.cache"
        for p in metric.data.data_points
    }
    assert points == {
        ("document_fetch", "miss"): 1,
        ("document_fetch", "coalesced"): 1,
        ("document_fetch", "hit"): 1,
    }
    meter_provider.shutdown()


async def test_answers_read_back_from_the_cache_are_the_service_s(tmp_path: Path) -> None:
    # Encoded, a Task read back from the store is byte for byte the one the service sent.
    task = m.Task(
        id="t",
        context_id="c",
        status=m.TaskStatus(state="completed"),
        artifacts=[
            m.Artifact(
                artifact_id="a",
                name="document",
                parts=[m.TextPart(text="é"), m.DataPart(data={"id": "d", "big": 2**70})],
            )
        ],
        metadata={"nested": {"x": [1, 2.5, None]}},
    )
    cache = AnswerCache(DiskAnswers(tmp_path / "c.sqlite", 10, 1 << 20), CachePolicy(), "o")

    async def send() -> m.Task:
        return task

    parts = [m.DataPart(data={"id": "d"})]
    assert await cache.answer("document_fetch", parts, None, send()) == (task, "miss")
    found, how = await cache.answer("document_fetch", parts, None, send())
    assert how == "hit" and found is not task
    assert msgspec.json.encode(found) == msgspec.json.encode(task)
    await cache.aclose()
