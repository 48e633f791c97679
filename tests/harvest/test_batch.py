"""search_many / fetch_many: one item per input, bounded, lazy, ordered on demand, cancellable."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from magisterium_async import (
    AsyncMagisterium,
    Document,
    MagisteriumError,
    RateLimits,
    SearchResult,
    TaskFailedError,
)
from magisterium_async._harvest import BatchItem, fetch_many, search_many
from magisterium_async.testing import Emulator, EmulatorConfig, Fault


def stray_tasks() -> set[asyncio.Task[Any]]:
    """Tasks other than the test's own, ignoring the emulator's connection handlers."""
    current = asyncio.current_task()
    return {
        t
        for t in asyncio.all_tasks()
        if t is not current and "aiohttp/web_" not in t.get_coro().cr_code.co_filename  # type: ignore[union-attr]
    }


async def settle() -> None:
    """Wait for the batch runners, cancelled by garbage collection, to finish; then nothing
    may be left. (The timeout only turns a runner that was not cancelled into a failure.)"""
    runners = {t for t in stray_tasks() if t.get_coro().__qualname__ == "_run"}  # type: ignore[union-attr]
    assert runners
    _, pending = await asyncio.wait(runners, timeout=10)
    assert not pending
    assert not stray_tasks()


class FakeClient:
    """Searches and fetches answered in memory, with knobs for failures and timing."""

    def __init__(
        self,
        *,
        fail: set[str] = frozenset(),  # type: ignore[assignment]
        crash: set[str] = frozenset(),  # type: ignore[assignment]
        hang: set[str] = frozenset(),  # type: ignore[assignment]
        steps: dict[str, int] | None = None,
    ) -> None:
        self.fail = fail
        self.crash = crash
        self.hang = hang
        self.steps = steps or {}
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.hanging = asyncio.Event()

    async def _call(self, value: str) -> None:
        self.calls.append(value)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(self.steps.get(value, 1)):
                await asyncio.sleep(0)
            if value in self.hang:
                self.hanging.set()
                await asyncio.Event().wait()
            if value in self.crash:
                raise RuntimeError(f"bug on {value}")
            if value in self.fail:
                raise MagisteriumError(f"failed on {value}")
        finally:
            self.in_flight -= 1

    async def search(self, query: str) -> list[SearchResult]:
        if not isinstance(query, str):
            raise TypeError("query must be a str")
        await self._call(query)
        return [SearchResult(id=f"{query}-{k}", url="https://x", title=query) for k in range(2)]

    async def fetch(self, document_id: str) -> Document | None:
        await self._call(document_id)
        if document_id.startswith("missing"):
            return None
        return Document(id=document_id, title=None, author=None, ref=None, text="text")


def endless(pulled: list[int]) -> Iterator[str]:
    for i in itertools.count():
        pulled.append(i)
        yield f"q{i}"


async def test_one_item_per_input_failures_are_items() -> None:
    client = FakeClient(fail={"b"})
    items = [item async for item in search_many(client, ["a", "b", "", 7, "c"])]  # type: ignore[list-item]
    by_input: dict[object, BatchItem[str, list[SearchResult]]] = {i.input: i for i in items}
    assert set(by_input) == {"a", "b", "", 7, "c"}
    assert by_input["a"].ok and by_input["a"].result is not None
    assert [r.id for r in by_input["c"].result or []] == ["c-0", "c-1"]
    assert isinstance(by_input["b"].error, MagisteriumError) and not by_input["b"].ok
    assert by_input["b"].result is None
    assert isinstance(by_input[7].error, TypeError)
    assert not stray_tasks()


async def test_fetch_many_missing_is_none_not_error() -> None:
    async with fetch_many(FakeClient(), ["d1", "missing-1"]) as items:
        got = {item.input: item async for item in items}
    assert got["missing-1"] == BatchItem("missing-1", None, None)
    assert got["d1"].ok and got["d1"].result is not None and got["d1"].result.id == "d1"


async def test_unexpected_exception_propagates_and_stops_everything() -> None:
    client = FakeClient(crash={"q3"}, hang={"q5"})
    pulled: list[int] = []
    with pytest.raises(RuntimeError, match="bug on q3"):
        async with search_many(client, endless(pulled), concurrency=4) as items:
            async for _ in items:
                pass
    assert not stray_tasks()


async def test_bounded_in_flight_and_lazy_endless_input() -> None:
    client = FakeClient()
    pulled: list[int] = []
    got = 0
    async with search_many(client, endless(pulled), concurrency=5) as items:
        async for _ in items:
            got += 1
            if got == 100:
                break
    assert client.max_in_flight <= 5
    # Nothing is read far ahead of the consumer: what is in flight plus one waiting.
    assert len(pulled) <= 100 + 5 + 1
    assert not stray_tasks()


async def test_async_iterable_input() -> None:
    async def queries() -> AsyncGenerator[str, None]:
        for i in range(10):
            yield f"q{i}"

    source = queries()
    items = [item async for item in search_many(FakeClient(), source)]
    await source.aclose()
    assert sorted(item.input for item in items) == sorted(f"q{i}" for i in range(10))


async def test_a_single_string_is_refused() -> None:
    with pytest.raises(TypeError, match="single string"):
        search_many(FakeClient(), "grace")
    with pytest.raises(ValueError):
        search_many(FakeClient(), ["a"], concurrency=0)


async def test_ordered_yields_in_input_order() -> None:
    inputs = [f"q{i}" for i in range(12)]
    # Later inputs finish first.
    steps = {q: 30 - 2 * i for i, q in enumerate(inputs)}
    unordered = [i.input async for i in search_many(FakeClient(steps=steps), inputs, concurrency=4)]
    assert sorted(unordered) == sorted(inputs) and unordered != inputs
    client = FakeClient(steps=steps)
    ordered = [i.input async for i in search_many(client, inputs, concurrency=4, ordered=True)]
    assert ordered == inputs
    assert client.max_in_flight <= 4


async def test_ordered_reorder_buffer_is_bounded() -> None:
    # The first item never finishes: the rest may run only a bounded distance ahead.
    client = FakeClient(hang={"q0"})
    pulled: list[int] = []
    batch = search_many(client, endless(pulled), concurrency=3, ordered=True)
    consumer = asyncio.create_task(anext(batch))
    await client.hanging.wait()
    await anyio.wait_all_tasks_blocked()  # everything that can run has run
    assert len(client.calls) == 6  # 2 x concurrency: in flight or waiting their turn
    assert not consumer.done()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    await batch.aclose()
    assert not stray_tasks()


async def test_break_in_async_with_stops_all_work() -> None:
    client = FakeClient(hang={"q7"})
    async with search_many(client, [f"q{i}" for i in range(20)], concurrency=8) as items:
        async for _ in items:
            break
    assert not stray_tasks()


async def test_bare_break_cancels_on_garbage_collection() -> None:
    client = FakeClient(hang={"q7"})
    async for _ in search_many(client, [f"q{i}" for i in range(20)], concurrency=8):
        break
    await settle()


async def test_cancelling_the_consumer_stops_all_work() -> None:
    client = FakeClient(hang={"q2"})
    got: list[BatchItem[str, list[SearchResult]]] = []

    async def consume() -> None:
        async with search_many(client, ["q0", "q1", "q2"]) as items:
            async for item in items:
                got.append(item)

    task = asyncio.create_task(consume())
    await client.hanging.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not stray_tasks()


async def test_aclose_is_idempotent_and_ends_iteration() -> None:
    batch = fetch_many(FakeClient(), ["a", "b"])
    assert (await anext(batch)).ok
    await batch.aclose()
    await batch.aclose()
    with pytest.raises(RuntimeError, match="this batch has ended"):  # never a quiet end
        await anext(batch)
    assert not stray_tasks()


# Against the emulator ------------------------------------------------------------------


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        yield emu


async def test_emulator_search_and_fetch_many(emulator: Emulator) -> None:
    async with AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, rate_limits=RateLimits.unlimited()
    ) as client:
        queries = ["grace", "__fail__: broken", "the Eucharist", "human dignity"]
        results = {i.input: i async for i in client.search_many(queries, ordered=True)}
        assert isinstance(results["__fail__: broken"].error, TaskFailedError)
        ids = {r.id for i in results.values() for r in (i.result or [])}
        assert ids
        fetched = [i async for i in client.fetch_many([*ids, "no-such-document"])]
        documents = {i.input: i.result for i in fetched}
        assert documents.pop("no-such-document") is None
        assert all(d is not None and d.id == k for k, d in documents.items())
    assert emulator.stats.count(skill="document_fetch") == len(ids) + 1


async def test_emulator_aclose_during_a_slow_request(emulator: Emulator) -> None:
    # Short, so that stopping the emulator does not wait long for the slow handler.
    emulator.script(Fault.latency(0.3), skill="document_fetch")
    async with AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, rate_limits=RateLimits.unlimited()
    ) as client:
        batch = fetch_many(client, ["1", "2"])
        first = await anext(batch)
        assert first.input in {"1", "2"}
        await batch.aclose()  # the other fetch is still waiting on the slow answer
        assert not stray_tasks()
    assert client.is_closed
