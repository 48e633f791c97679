"""The harvest: every document once, failures recorded, resumable without spending twice."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sqlite3
import sys
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from magisterium_async import (
    AsyncMagisterium,
    ClientClosedError,
    Document,
    MagisteriumError,
    RateLimits,
    RetryPolicy,
    StateError,
    TaskFailedError,
)
from magisterium_async._errors import OutputFileError
from magisterium_async._harvest import (
    Harvest,
    HarvestedDocument,
    HarvestState,
    JsonlWriter,
    harvest,
    search_many,
)
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    Fault,
    FaultConfig,
    SyntheticCorpus,
)
from tests.helpers.harvest_fakes import FakeClient

WORKER = Path(__file__).parents[1] / "workers" / "harvest_worker.py"
QUERIES = [f"grace nature word{i}" for i in range(30)]
FAST_RETRIES = RetryPolicy(max_retries=2, initial_backoff=0.001, max_backoff=0.002)


def stray_tasks() -> set[asyncio.Task[Any]]:
    """Tasks other than the test's own, ignoring the emulator's connection handlers."""
    current = asyncio.current_task()
    return {
        t
        for t in asyncio.all_tasks()
        if t is not current and "aiohttp/web_" not in t.get_coro().cr_code.co_filename  # type: ignore[union-attr]
    }


def config(**faults: Any) -> EmulatorConfig:
    return EmulatorConfig(
        rate_limits=None,
        corpus=SyntheticCorpus(5000, seed=3, search_space=800),
        faults=FaultConfig(**faults) if faults else None,
    )


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(config()) as emu:
        yield emu


def connect(emulator: Emulator) -> AsyncMagisterium:
    return AsyncMagisterium(
        token=emulator.token,
        base_url=emulator.base_url,
        rate_limits=RateLimits.unlimited(),
        retry_policy=FAST_RETRIES,
    )


@pytest.fixture
async def client(emulator: Emulator) -> AsyncIterator[AsyncMagisterium]:
    async with connect(emulator) as c:
        yield c


def requests(emulator: Emulator, skill: str, since: int = 0) -> Counter[str | None]:
    """How often each input reached ``skill``, from arrival number ``since`` on."""
    return Counter(a.input for a in emulator.arrivals[since:] if a.skill == skill)


def recorded(state: Path) -> tuple[set[str], set[str]]:
    """Queries whose answer the state holds, and ids whose fetch it holds."""
    db = sqlite3.connect(state)
    try:
        queries = {q for (q,) in db.execute("SELECT query FROM queries WHERE status='searched'")}
        fetched = {
            i
            for (i,) in db.execute(
                "SELECT id FROM documents WHERE status IN ('fetched','delivered','not_found')"
            )
        }
    finally:
        db.close()
    return queries, fetched


async def expected_ids(client: AsyncMagisterium, queries: list[str]) -> set[str]:
    found: set[str] = set()
    async for item in search_many(client, queries):
        found.update(r.id for r in item.result or [])
    return found


async def collect(h: Harvest, limit: int | None = None) -> list[str]:
    ids: list[str] = []
    async with h:
        async for document in h:
            ids.append(document.id)
            if len(ids) == limit:
                break
    return ids


async def test_every_document_fetched_once_and_yielded_once(
    emulator: Emulator, client: AsyncMagisterium
) -> None:
    h = client.harvest(QUERIES + QUERIES[:3], concurrency=4)
    ids = await collect(h)
    assert len(ids) == len(set(ids))
    assert set(requests(emulator, "document_fetch").values()) == {1}
    assert set(requests(emulator, "document_search").values()) == {1}
    expected = await expected_ids(client, QUERIES)
    assert set(ids) == expected
    s = h.stats
    assert (s.queries, s.searched, s.skipped_queries) == (33, 30, 3)
    assert s.results == 300 and s.unique_ids == s.fetched == s.yielded == len(expected)
    assert (s.not_found, s.failed, s.rate_limited, s.resumed) == (0, 0, 0, 0)
    assert s.elapsed > 0 and h.failures == []
    assert not stray_tasks()


async def test_exactly_once_under_faults_then_resume_retries_failures(tmp_path: Path) -> None:
    async with Emulator(config()) as clean, connect(clean) as client:
        expected = await expected_ids(client, QUERIES)
    faults = config(
        seed=11, error_rate=0.2, drop_rate=0.05, rate_limit_rate=0.05, rate_limit_retry_after=0.0
    )
    state = tmp_path / "state.db"
    async with Emulator(faults) as emulator, connect(emulator) as client:
        # Random faults are mostly retried away; these two are not (a failed task is final).
        emulator.script(Fault.task_failed(), skill="document_search")
        emulator.script(Fault.task_failed(), skill="document_fetch")
        first = client.harvest(QUERIES, state=state)
        yielded = await collect(first)
        assert len(yielded) == len(set(yielded))
        assert first.stats.rate_limited > 0 and first.failures
        assert first.stats.failed == len(first.failures)
        assert all(isinstance(e, MagisteriumError) for _, _, e in first.failures)
        failed = {(kind, value) for kind, value, _ in first.failures}
        for _ in range(5):
            searched, fetched = recorded(state)
            assert fetched >= set(yielded)  # delivered, and acknowledged
            since = len(emulator.arrivals)
            again = client.harvest(QUERIES, state=state)
            more = await collect(again)
            assert not set(more) & set(yielded)  # nothing yielded twice across runs
            yielded += more
            searches = requests(emulator, "document_search", since)
            fetches = requests(emulator, "document_fetch", since)
            assert not set(searches) & searched and not set(fetches) & fetched
            assert {q for kind, q in failed if kind == "search"} <= set(searches)  # retried
            assert {i for kind, i in failed if kind == "fetch"} <= set(fetches)
            failed = {(kind, value) for kind, value, _ in again.failures}
            if not failed:
                break
        assert not failed
        assert sorted(yielded) == sorted(expected)
        assert not stray_tasks()


def held(state: Path) -> set[str]:
    """Ids the state holds fetched and not delivered."""
    db = sqlite3.connect(state)
    try:
        return {i for (i,) in db.execute("SELECT id FROM documents WHERE status = 'fetched'")}
    finally:
        db.close()


async def test_resumed_harvest_yields_every_document_once(
    emulator: Emulator, client: AsyncMagisterium, tmp_path: Path
) -> None:
    # The reported scenario: 30 queries, leave after 5 documents, harvest again.
    expected = await expected_ids(client, QUERIES)
    start = len(emulator.arrivals)
    state = tmp_path / "state.db"
    first = await collect(client.harvest(QUERIES, state=state), limit=5)
    assert not stray_tasks()
    searched, fetched = recorded(state)
    kept = held(state)
    assert kept  # fetched ahead of the consumer and not delivered: the case that repeated
    since = len(emulator.arrivals)

    h = client.harvest(QUERIES, state=state)
    rest = await collect(h)
    # At the consumer: each document once in the second run, none of the first run again,
    # and together exactly what the queries find.
    assert len(rest) == len(set(rest))
    assert not set(first) & set(rest)
    assert sorted(first + rest) == sorted(expected)
    assert (h.stats.yielded, h.stats.resumed) == (len(rest), len(kept))
    assert h.stats.fetched + h.stats.resumed == h.stats.yielded
    # At the emulator: what the first run recorded is never asked again; the documents it
    # held come from the state; every other fetch of the second run is one document.
    searches = requests(emulator, "document_search", since)
    fetches = requests(emulator, "document_fetch", since)
    assert not set(searches) & searched and not set(fetches) & fetched
    assert set(fetches.values()) == {1} and set(fetches) == set(rest) - kept
    assert set(requests(emulator, "document_search", start)) == set(QUERIES)

    since = len(emulator.arrivals)
    assert await collect(client.harvest(QUERIES, state=state)) == []
    assert len(emulator.arrivals) == since  # nothing left to ask


async def test_leaving_by_an_exception_keeps_the_document_in_hand(
    client: AsyncMagisterium, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    got: list[str] = []
    with pytest.raises(RuntimeError, match="consumer broke"):
        async with client.harvest(QUERIES[:5], state=state) as h:
            async for document in h:
                got.append(document.id)
                if len(got) == 3:
                    raise RuntimeError("consumer broke")
    rest = await collect(client.harvest(QUERIES[:5], state=state))
    # The first two were delivered (the consumer asked for more); the third was in hand.
    assert set(got) & set(rest) == {got[-1]} and len(rest) == len(set(rest))
    assert sorted(set(got) | set(rest)) == sorted(await expected_ids(client, QUERIES[:5]))


async def test_aclose_delivers_the_document_in_hand(
    client: AsyncMagisterium, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    h = client.harvest(QUERIES[:5], state=state)
    first = await anext(h)
    await h.aclose()
    rest = await collect(client.harvest(QUERIES[:5], state=state))
    assert first.id not in rest and len(rest) == len(set(rest))
    assert sorted([first.id, *rest]) == sorted(await expected_ids(client, QUERIES[:5]))


async def test_every_document_names_the_queries_that_found_it(
    client: AsyncMagisterium, tmp_path: Path
) -> None:
    finders: dict[str, list[str]] = {}
    async for item in search_many(client, QUERIES, ordered=True):
        for result in item.result or []:
            finders.setdefault(result.id, []).append(item.input)
    state = tmp_path / "state.db"
    # Sequentially with one search in flight, a query is answered before the documents
    # it finds are fetched: each document names at least its first finder, only real
    # finders, in input order.
    order = {q: i for i, q in enumerate(QUERIES)}
    async with client.harvest(QUERIES, state=state, concurrency=1) as h:
        async for document in h:
            assert isinstance(document, HarvestedDocument) and isinstance(document, Document)
            assert document.queries and set(document.queries) <= set(finders[document.id])
            assert document.queries[0] == finders[document.id][0]
            assert list(document.queries) == sorted(document.queries, key=order.__getitem__)
    # Once finished, found_by names every finder, in input order.
    for document_id, queries in finders.items():
        assert list(await h.found_by(document_id)) == queries
    assert await h.found_by("no such id") == ()


async def test_found_by_while_running_and_without_a_state(client: AsyncMagisterium) -> None:
    h = client.harvest(QUERIES[:3])
    async with h:
        document = await anext(h)
        assert set(document.queries) <= set(await h.found_by(document.id))
        assert document.queries
    with pytest.raises(StateError, match="state="):
        await h.found_by(document.id)


async def test_provenance_survives_resume(client: AsyncMagisterium, tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    await collect(client.harvest(QUERIES, state=state, acknowledge="manual"), limit=5)
    kept = held(state)
    assert kept
    h = client.harvest(QUERIES, state=state)
    resumed = {}
    async with h:
        async for document in h:
            if document.id in kept:
                resumed[document.id] = document.queries
    assert resumed.keys() == kept
    opened = await HarvestState.open(state)
    try:
        for document_id, queries in resumed.items():
            # Found in the first run, yielded in the second: named all the same.
            assert queries and set(queries) <= set(await opened.found_by(document_id))
    finally:
        await opened.aclose()


async def test_jsonl_records_carry_the_queries(client: AsyncMagisterium, tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    async with client.harvest(QUERIES[:3], concurrency=1) as h, JsonlWriter(path) as out:
        async for document in h:
            await out.write(document)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines and all(set(QUERIES[:3]) >= set(line["queries"]) for line in lines)
    assert {"id", "title", "author", "ref", "text", "extra", "queries"} == set(lines[0])


async def test_manual_acknowledgement_keeps_documents_until_acknowledged(
    emulator: Emulator, client: AsyncMagisterium, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    h = client.harvest(QUERIES[:5], state=state, acknowledge="manual")
    ids = await collect(h)
    since = len(emulator.arrivals)
    h = client.harvest(QUERIES[:5], state=state, acknowledge="manual")
    async with h:
        again = [d.id async for d in h]
        h.acknowledge(again[:-2])
    assert sorted(again) == sorted(ids) and h.stats.resumed == len(ids)
    assert len(emulator.arrivals) == since  # all from the state
    assert sorted(await collect(client.harvest(QUERIES[:5], state=state))) == sorted(again[-2:])


async def test_failures_recorded_or_raised(emulator: Emulator, client: AsyncMagisterium) -> None:
    queries = ["grace", "__fail__: broken", "nature"]
    h = client.harvest(queries)
    ids = await collect(h)
    assert ids and h.stats.failed == 1
    [(kind, query, error)] = h.failures
    assert (kind, query) == ("search", "__fail__: broken") and isinstance(error, TaskFailedError)

    emulator.script(Fault.task_failed(), skill="document_fetch")
    h = client.harvest(["grace"], on_error="raise")
    with pytest.raises(TaskFailedError):
        await collect(h)
    assert h.stats.failed == 1 and h.failures[0].kind == "fetch"
    assert not stray_tasks()


async def test_failed_items_are_retried_on_resume(
    emulator: Emulator, client: AsyncMagisterium, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    emulator.script(Fault.task_failed(), skill="document_fetch")
    h = client.harvest(["grace", "__fail__: broken"], state=state)
    ids = await collect(h)
    [failed_fetch] = [str(i) for kind, i, _ in h.failures if kind == "fetch"]
    h = client.harvest(["grace", "__fail__: broken"], state=state)
    assert await collect(h) == [failed_fetch]
    assert requests(emulator, "document_fetch")[failed_fetch] == 2
    assert requests(emulator, "document_search")["__fail__: broken"] == 2
    assert requests(emulator, "document_search")["grace"] == 1
    assert failed_fetch not in ids


async def test_rate_limits_are_counted(emulator: Emulator, client: AsyncMagisterium) -> None:
    emulator.script(*[Fault.rate_limit(0.0)] * 3, skill="document_fetch")
    h = client.harvest(["grace"])
    await collect(h)
    assert h.stats.rate_limited == 3 and h.stats.failed == 0


# With a client in memory ------------------------------------------------------------


def endless(pulled: list[int], prefix: str = "q") -> Iterator[str]:
    for i in itertools.count():
        pulled.append(i)
        yield f"{prefix}{i}"


async def test_not_found_and_bad_queries_are_counted() -> None:
    h = harvest(FakeClient(), ["missing", "a", 7, " "])  # type: ignore[list-item]
    ids = await collect(h)
    assert sorted(ids) == ["a/0", "a/1", "a/2"]
    assert h.stats.not_found == 3 and h.stats.failed == 2
    assert sorted(type(e).__name__ for _, _, e in h.failures) == ["TypeError", "ValueError"]


async def test_endless_input_is_read_lazily() -> None:
    pulled: list[int] = []
    ids = await collect(harvest(FakeClient(), endless(pulled), concurrency=4), limit=30)
    assert len(ids) == 30
    assert len(pulled) < 40  # bounded read-ahead, not the whole (endless) input
    assert not stray_tasks()


async def test_unexpected_errors_propagate(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    with pytest.raises(RuntimeError, match="bug"):
        await collect(harvest(FakeClient(crash="q1/1"), endless([]), state=state))
    assert not stray_tasks()
    db = sqlite3.connect(state)  # closed by the harvest: readable, and holds the run
    assert db.execute("SELECT count(*) FROM queries").fetchone()[0] > 0
    db.close()


async def test_cancelling_the_consumer_stops_everything(tmp_path: Path) -> None:
    client = FakeClient(hang="q2/0")
    got: list[str] = []

    async def consume() -> None:
        async with harvest(client, endless([]), state=tmp_path / "s.db") as h:
            async for document in h:
                got.append(document.id)

    task = asyncio.create_task(consume())
    await client.hanging.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not stray_tasks()


async def test_bare_break_cancels_on_garbage_collection() -> None:
    async for _ in harvest(FakeClient(hang="q5/0"), endless([])):
        break
    # The timeout only turns a runner that was not cancelled into a failure.
    runners = {t for t in stray_tasks() if t.get_coro().__qualname__ == "_run"}  # type: ignore[union-attr]
    assert runners
    _, pending = await asyncio.wait(runners, timeout=10)
    assert not pending
    assert not stray_tasks()


async def test_aclose_during_the_harvest(tmp_path: Path) -> None:
    h = harvest(FakeClient(), endless([]), state=tmp_path / "s.db")
    first = await anext(h)
    await h.aclose()
    await h.aclose()
    assert first.id == "q0/0" and not stray_tasks()
    with pytest.raises(RuntimeError, match="this harvest has ended"):
        await anext(h)


async def test_memory_stays_flat() -> None:
    tracemalloc.start()
    try:
        h = harvest(FakeClient(per_query=10, size=20_000), (f"q{i}" for i in range(100)))
        count = len(await collect(h))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 1000
    assert peak < 4_000_000  # holding every document would take 20 MB


# The JSON Lines writer --------------------------------------------------------------


def document(document_id: str) -> Document:
    return Document(id=document_id, title="T", author=None, ref=None, text="é\nx")


async def test_jsonl_writer_repairs_a_torn_tail_it_wrote_and_skips_what_it_holds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out.jsonl"
    async with JsonlWriter(path) as first:
        await first.write(document("a"))
    mark = first.mark
    assert mark is not None and mark.offset == path.stat().st_size
    with path.open("ab") as file:  # a crash in the middle of the next batch
        file.write(b'{"id":"b","te')
    durable: list[list[str]] = []
    pending = {"b"}  # handed to the writer, not acknowledged when the mark was recorded
    async with JsonlWriter(
        path, batch_size=2, on_durable=durable.append, mark=mark, pending=pending
    ) as out:
        assert out.cut == (mark.offset, mark.offset + 13)
        assert not await out.write(document("a"))
        assert await out.write(document("b"))
        assert durable == [["a", "b"]]
        assert await out.write(document("c"))
        assert not await out.write(document("c"))
    assert durable == [["a", "b"], ["c", "c"]]
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["a", "b", "c"]
    assert lines[1]["text"] == "é\nx" and (out.written, out.skipped) == (2, 2)
    assert out.mark is not None and out.mark.offset == path.stat().st_size


async def test_jsonl_writer_alters_no_file_it_cannot_tell_it_wrote(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    text = b"my notes\nthe last line, no newline"
    notes.write_bytes(text)
    with pytest.raises(OutputFileError, match="incomplete line"):
        await JsonlWriter(notes).open()
    assert notes.read_bytes() == text
    ours = tmp_path / "out.jsonl"
    async with JsonlWriter(ours) as out:
        await out.write(document("a"))
    assert out.mark is not None
    with pytest.raises(OutputFileError, match="less than"):
        await JsonlWriter(notes, mark=out.mark).open()
    other = tmp_path / "other.jsonl"  # as long as ours, other bytes
    other.write_bytes(b"x" * (out.mark.offset - 1) + b"\n")
    with pytest.raises(OutputFileError, match="another file is in its place"):
        await JsonlWriter(other, mark=out.mark).open()
    copy = tmp_path / "copy.jsonl"  # the same bytes in another file: a backup put back
    copy.write_bytes(ours.read_bytes())
    async with JsonlWriter(copy, mark=out.mark) as again:
        assert not await again.write(document("a"))
    assert copy.read_bytes() == ours.read_bytes()
    ours.write_bytes(ours.read_bytes().replace(b'"a"', b'"z"'))  # edited in place
    with pytest.raises(OutputFileError, match="it was edited since the harvest wrote it"):
        await JsonlWriter(ours, mark=out.mark).open()
    ours.write_bytes(b"")
    with pytest.raises(OutputFileError, match="less than"):
        await JsonlWriter(ours, mark=out.mark).open()
    assert notes.read_bytes() == text and ours.read_bytes() == b""
    ours.unlink()  # gone, with what the harvest had written: not made anew silently
    with pytest.raises(OutputFileError, match="does not exist, but the harvest wrote"):
        await JsonlWriter(ours, mark=out.mark).open()
    assert not ours.exists()


async def test_jsonl_writer_reads_no_device_and_bounds_what_it_keeps_of_a_line(
    tmp_path: Path,
) -> None:
    async with JsonlWriter("/dev/null") as out:  # a character device: never read
        await out.write(document("a"))
    assert out.mark is None and out.written == 1
    long = tmp_path / "long.jsonl"
    long.write_bytes(b'{"id": "x", "text": "' + b"y" * 3_000_000 + b'"}\n')
    async with JsonlWriter(long) as out:
        assert not await out.write(document("x"))


async def test_the_command_line_record_names_the_queries(tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    argv = ["harvest", "--emulator", "-q", "grace and nature", "-q", "the Eucharist"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "magisterium_async",
        *argv,
        "--out",
        str(out),
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records
    for record in records:
        assert list(record) == ["id", "title", "author", "ref", "text", "extra", "queries"]
        assert record["queries"] and set(record["queries"]) <= {"grace and nature", "the Eucharist"}


# Resume after kill -9 of a real process ---------------------------------------------


async def run_worker(emulator: Emulator, tmp_path: Path, *extra: str) -> Any:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        emulator.base_url,
        str(tmp_path / "state.db"),
        str(tmp_path / "out.jsonl"),
        "40",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "MAGISTERIUM_TOKEN": emulator.token},
    )


async def test_resume_after_kill_9(emulator: Emulator, tmp_path: Path) -> None:
    worker = await run_worker(emulator, tmp_path, "25")
    assert worker.stdout is not None
    lines = [await worker.stdout.readline() for _ in range(26)]
    assert lines[-1] == b"PAUSED\n"
    worker.kill()
    await worker.wait()
    searched, fetched = recorded(tmp_path / "state.db")
    assert searched and fetched
    since = len(emulator.arrivals)
    searches, fetches = (set(requests(emulator, s)) for s in ("document_search", "document_fetch"))

    worker = await run_worker(emulator, tmp_path)
    out, _ = await worker.communicate()
    assert worker.returncode == 0
    last = out.splitlines()[-1].decode()
    assert last.startswith("DONE") and "resumed=0" not in last  # some came from the state
    searches_again = set(requests(emulator, "document_search", since))
    fetches_again = set(requests(emulator, "document_fetch", since))
    # Nothing whose answer was recorded is asked again: only what was in flight or being
    # recorded at the kill (the worker's concurrency is 4; fetches also hold one of the
    # 2 x 4 delivery slots until recorded).
    assert not searches_again & searched and not fetches_again & fetched
    assert len(searches_again & searches) <= 3 * 4 and len(fetches_again & fetches) <= 2 * 4
    records = [
        json.loads(line)
        for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    ids = [record["id"] for record in records]
    assert len(ids) == len(set(ids))  # every document in the file exactly once
    assert all(record["queries"] for record in records)  # each names what found it
    assert set(ids) == set(requests(emulator, "document_fetch"))
    assert set(requests(emulator, "document_search")) == {
        f"grace nature word{i}" for i in range(40)
    }


async def test_resume_with_a_large_backlog_and_new_queries_completes(
    emulator: Emulator, client: AsyncMagisterium, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    first = await collect(client.harvest(QUERIES[:20], state=state, concurrency=1), limit=1)
    assert len(first) == 1
    rest = await collect(client.harvest(QUERIES, state=state, concurrency=1))
    assert set(first) | set(rest) == await expected_ids(client, QUERIES)


async def test_a_refused_token_stops_the_harvest_resumably(
    emulator: Emulator, tmp_path: Path
) -> None:
    from magisterium_async import AuthenticationError

    state = tmp_path / "state.db"
    calls = itertools.count()

    def token() -> str:  # valid for 40 requests, then refused: a sign-in that ran out
        return emulator.token if next(calls) < 40 else "revoked"

    async with AsyncMagisterium(
        token, base_url=emulator.base_url, rate_limits=RateLimits.unlimited()
    ) as signed_out:
        h = signed_out.harvest(QUERIES, state=state, concurrency=4)
        first: list[str] = []
        with pytest.raises(AuthenticationError):
            async with h:
                async for document in h:
                    first.append(document.id)
    assert h.stats.failed == 0 and h.failures == []  # stopped, not counted per item
    assert first
    searched, fetched = recorded(state)
    assert searched and fetched
    since = len(emulator.arrivals)
    async with connect(emulator) as client:
        h = client.harvest(QUERIES, state=state, concurrency=4)
        rest = await collect(h)
        searched_again = set(requests(emulator, "document_search", since))
        fetched_again = set(requests(emulator, "document_fetch", since))
        expected = await expected_ids(client, QUERIES)
    assert h.stats.failed == 0
    assert len(first) + len(rest) >= len(expected)
    assert set(first) | set(rest) == expected
    # The resumed run asks for nothing the stopped one recorded.
    assert not searched & searched_again
    assert not fetched & fetched_again


async def test_closing_the_client_stops_a_harvest_and_a_batch_left_by_a_bare_break(
    tmp_path: Path,
) -> None:
    from magisterium_async import AsyncMagisterium, RateLimits
    from magisterium_async.testing import Emulator, EmulatorConfig

    state = tmp_path / "h.sqlite"
    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        unlimited = RateLimits.unlimited()
        async with AsyncMagisterium(
            emu.token, base_url=emu.base_url, rate_limits=unlimited
        ) as client:
            harvest = client.harvest([f"grace {i}" for i in range(30)], state=state)
            batch = client.search_many([f"mercy {i}" for i in range(30)], concurrency=2)
            async for _ in harvest:
                break  # and kept: the variable holds it, nothing collects it
            async for _ in batch:
                break
        # Closed with the client: the state's lock is let go, and each says so once.
        assert sorted(os.listdir(tmp_path)) == ["h.sqlite"]
        for stopped in (harvest, batch):
            with pytest.raises(ClientClosedError, match="the client was closed while it ran"):
                await anext(stopped)
            with pytest.raises(RuntimeError, match="has ended"):  # said once; then it ended
                await anext(stopped)
        assert harvest.failures == []  # stopped, not failed call by call
        async with AsyncMagisterium(
            emu.token, base_url=emu.base_url, rate_limits=unlimited
        ) as again:
            resumed = [d.id async for d in again.harvest(["grace 0"], state=state)]
    assert len(resumed) == len(set(resumed))  # the state is whole and free


async def test_a_reader_in_another_task_hears_that_the_client_closed_never_a_quiet_end() -> None:
    from magisterium_async import AsyncMagisterium, RateLimits
    from magisterium_async.testing import Emulator, EmulatorConfig

    # A shutdown while a harvest runs must not look like a harvest that found everything.
    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        client = AsyncMagisterium(
            emu.token, base_url=emu.base_url, rate_limits=RateLimits.unlimited()
        )
        harvest = client.harvest([f"grace {i}" for i in range(40)], concurrency=2)
        got: list[str] = []
        first = asyncio.Event()

        async def read() -> None:
            async for document in harvest:
                got.append(document.id)
                first.set()

        reader = asyncio.create_task(read())
        await first.wait()
        await client.aclose()
        with pytest.raises(ClientClosedError, match="the client was closed while it ran"):
            await reader
    assert got and harvest.failures == []


@pytest.mark.parametrize("concurrency", [1, 1000])
async def test_the_tasks_alive_follow_the_work_not_the_concurrency_asked(concurrency: int) -> None:
    # One query, three documents: whatever the concurrency, a handful of tasks, never
    # 2 x concurrency made up front.
    peak = 0

    class Counting(FakeClient):
        async def fetch(self, document_id: str):  # type: ignore[no-untyped-def]
            nonlocal peak
            peak = max(peak, len(asyncio.all_tasks()))
            return await super().fetch(document_id)

    async with harvest(Counting(), ["a"], concurrency=concurrency) as h:
        ids = [d.id async for d in h]
    assert sorted(ids) == ["a/0", "a/1", "a/2"]
    assert peak < 30


@pytest.mark.parametrize("value", [0, 1001, 99_999_999_999])
def test_a_concurrency_out_of_range_is_refused_naming_it(value: int) -> None:
    with pytest.raises(ValueError, match=rf"^concurrency must be [<>]= 1(000)?, got {value}"):
        harvest(FakeClient(), ["a"], concurrency=value)
