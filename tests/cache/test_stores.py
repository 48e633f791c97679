"""The stores: bytes by key, bounded, least recently used first out; the file refuses what
it did not make; SQLite shared by processes; Redis shared by clients."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from magisterium_async._cache import (
    APPLICATION_ID,
    CLAIMS,
    PREFIX,
    DiskAnswers,
    MemoryAnswers,
    RedisAnswers,
    StoreUnavailable,
    open_store,
)
from magisterium_async._config import CachePolicy
from magisterium_async._errors import CacheError, MagisteriumError
from magisterium_async._redis import RedisUnavailable
from tests.helpers.redis_server import RedisServer

NOW = 1_000_000.0
LATER = NOW + 3600
WORKER = Path(__file__).parents[1] / "workers" / "cache_worker.py"


# Memory -------------------------------------------------------------------------------


async def test_memory_evicts_the_least_recently_used_past_its_entries() -> None:
    store = MemoryAnswers(max_entries=3, max_bytes=1 << 20)
    for key in "abc":
        await store.put(key, key.encode(), LATER, NOW)
    assert await store.get("a", NOW) == b"a"  # a is now the most recently used
    await store.put("d", b"d", LATER, NOW)
    assert await store.get("b", NOW) is None
    assert [await store.get(k, NOW) for k in "acd"] == [b"a", b"c", b"d"]
    assert store.entries == 3


async def test_memory_is_bounded_in_bytes_and_keeps_nothing_larger_than_itself() -> None:
    store = MemoryAnswers(max_entries=100, max_bytes=30)
    await store.put("a", b"x" * 9, LATER, NOW)  # 10 bytes with its key
    await store.put("b", b"x" * 9, LATER, NOW)
    await store.put("c", b"x" * 9, LATER, NOW)
    assert store.entries == 3  # 30 bytes: full, nothing out
    await store.put("d", b"x" * 9, LATER, NOW)
    assert await store.get("a", NOW) is None
    await store.put("b", b"y" * 4, LATER, NOW)  # replaced: its old size is given back
    await store.put("e", b"y" * 4, LATER, NOW)  # so this fits beside c, d and b
    assert [await store.get(k, NOW) for k in "cdbe"] == [b"x" * 9, b"x" * 9, b"y" * 4, b"y" * 4]
    await store.put("huge", b"x" * 100, LATER, NOW)
    assert await store.get("huge", NOW) is None
    assert store.entries == 4


# Disk ---------------------------------------------------------------------------------


def disk(path: Path, max_entries: int = 100, max_bytes: int = 1 << 20) -> DiskAnswers:
    return DiskAnswers(path, max_entries=max_entries, max_bytes=max_bytes)


async def test_a_file_keeps_answers_for_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first = disk(path)
    await first.put("k", b"answer", LATER, NOW)
    await first.aclose()
    second = disk(path)
    assert await second.get("k", NOW) == b"answer"
    assert second.entries == 1
    await second.aclose()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


async def test_a_file_evicts_the_expired_then_the_least_recently_used(tmp_path: Path) -> None:
    store = disk(tmp_path / "c.sqlite", max_entries=3)
    await store.put("old", b"1", NOW + 10, NOW)
    await store.put("a", b"2", LATER, NOW + 1)
    await store.put("b", b"3", LATER, NOW + 2)
    await store.get("a", NOW + 20)  # used last; "old" has expired by now
    await store.put("c", b"4", LATER, NOW + 21)  # 4 > 3: the expired one goes
    assert await store.get("old", NOW + 22) is None
    await store.put("d", b"5", LATER, NOW + 23)  # then the least recently used: b
    assert await store.get("b", NOW + 24) is None
    assert [await store.get(k, NOW + 25) for k in "acd"] == [b"2", b"4", b"5"]
    assert store.entries == 3
    await store.aclose()


async def test_a_file_is_bounded_in_bytes(tmp_path: Path) -> None:
    store = disk(tmp_path / "c.sqlite", max_bytes=30)
    for i, key in enumerate("abcd"):
        await store.put(key, b"x" * 9, LATER, NOW + i)
    assert await store.get("a", NOW + 9) is None
    assert store.entries == 3
    await store.put("huge", b"x" * 100, LATER, NOW + 10)
    assert await store.get("huge", NOW + 11) is None
    await store.aclose()


async def test_two_connections_to_one_file_see_each_other_s_answers(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    one, two = disk(path), disk(path)
    await one.put("from-one", b"1", LATER, NOW)
    await two.put("from-two", b"2", LATER, NOW)
    assert await two.get("from-one", NOW) == b"1"
    assert await one.get("from-two", NOW) == b"2"
    await one.aclose()
    await two.aclose()


@pytest.mark.slow
def test_processes_writing_one_file_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    names = ["p0", "p1", "p2"]
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), path, name, "100"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for name in names
    ]
    for worker in workers:  # every one is running before any writes
        assert worker.stdin is not None
        worker.stdin.write("\n")
        worker.stdin.flush()
    reports = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        reports.append(json.loads(out))
    assert all(r["own_intact"] for r in reports)
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM answers").fetchone()[0] == 300
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def test_a_second_process_reads_what_the_first_kept(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}

    def run(name: str, others: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(WORKER), path, name, "20"],
            input=others + "\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    assert run("first", "")["seen_of_others"] == 0
    assert run("second", "first")["seen_of_others"] == 20


def _untouched(path: Path) -> tuple[bytes, float]:
    return path.read_bytes(), path.stat().st_mtime


def test_a_database_the_cache_did_not_make_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "harvest.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE queries (id INTEGER PRIMARY KEY, query TEXT)")
    db.execute("INSERT INTO queries (query) VALUES ('grace')")
    db.commit()
    db.close()
    before = _untouched(path)
    with pytest.raises(CacheError, match="did not make") as caught:
        disk(path)
    assert isinstance(caught.value, MagisteriumError)
    assert str(path) in str(caught.value)
    assert _untouched(path) == before
    assert not (tmp_path / "harvest.sqlite-wal").exists()


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes, not a cache\n" * 10)
    before = _untouched(path)
    with pytest.raises(CacheError, match="not a cache file"):
        disk(path)
    assert _untouched(path) == before


def test_a_directory_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="directory"):
        disk(tmp_path)
    with pytest.raises(CacheError, match="does not exist"):
        disk(tmp_path / "missing" / "c.sqlite")


async def test_an_empty_file_becomes_a_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.touch()
    store = disk(path)
    await store.put("k", b"v", LATER, NOW)
    assert await store.get("k", NOW) == b"v"
    await store.aclose()


async def test_a_corrupt_file_fails_as_unavailable_not_as_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store = disk(path)
    await store.put("k", b"v" * 5000, LATER, NOW)
    await store.aclose()
    raw = bytearray(path.read_bytes())
    raw[100:] = b"\xff" * (len(raw) - 100)  # the header stays: it is still marked ours
    path.write_bytes(bytes(raw))
    for name in ("c.sqlite-wal", "c.sqlite-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    broken = disk(path)
    with pytest.raises(StoreUnavailable):
        await broken.get("k", NOW)
    await broken.aclose()


async def test_a_closed_file_store_is_unavailable(tmp_path: Path) -> None:
    store = disk(tmp_path / "c.sqlite")
    await store.aclose()
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.get("k", NOW)


# Redis --------------------------------------------------------------------------------


@pytest.fixture
def fake_redis(memory_redis: Any) -> Any:
    from fakeredis import FakeAsyncRedis

    return FakeAsyncRedis(server=memory_redis)


async def test_redis_keeps_an_answer_for_its_freshness_under_its_own_prefix(
    fake_redis: Any,
) -> None:
    store = RedisAnswers(fake_redis)
    await store.put("k", b"answer", NOW + 90, NOW)
    assert await store.claim("k", 5, "a") == (b"answer", False)
    ttl = await fake_redis.pttl(PREFIX + "{k}")
    assert 89_000 < ttl <= 90_000
    assert store.entries is None
    await store.aclose()


async def test_an_unreachable_redis_is_unavailable_and_its_password_never_shown() -> None:
    pytest.importorskip("redis")
    from tests.helpers.redis_server import _free_port

    url = f"redis://user:s3cret-pass@127.0.0.1:{_free_port()}/0"
    store = RedisAnswers(url)
    assert "s3cret-pass" not in repr(store)
    with pytest.raises(RedisUnavailable) as caught:
        await store.claim("k", 5, "a")
    assert "s3cret-pass" not in str(caught.value)
    await store.aclose()


def test_a_cache_url_that_cannot_be_right_is_refused_at_once() -> None:
    pytest.importorskip("redis")
    with pytest.raises(CacheError):
        open_store("redis://127.0.0.1:notaport/0", CachePolicy())


@pytest.mark.redis
async def test_two_clients_of_one_redis_server_share_its_answers(
    redis_server: RedisServer,
) -> None:
    one, two = RedisAnswers(redis_server.url), RedisAnswers(redis_server.url)
    await one.put("k", b"answer", NOW + 60, NOW)
    assert await two.claim("k", 5, "a") == (b"answer", False)
    redis_server.stop()
    with pytest.raises(RedisUnavailable):
        await two.claim("k", 5, "a")
    await one.aclose()
    await two.aclose()


def test_open_store_names_each_kind(tmp_path: Path) -> None:
    policy = CachePolicy(max_entries=5)
    assert open_store(None, policy) is None
    assert isinstance(open_store("memory", policy), MemoryAnswers)
    assert isinstance(open_store(str(tmp_path / "c.sqlite"), policy), DiskAnswers)
    assert isinstance(open_store(tmp_path / "d.sqlite", policy), DiskAnswers)
    with pytest.raises(TypeError):
        open_store(42, policy)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        open_store("  ", policy)


async def test_redis_claims_are_taken_once_and_given_up_by_an_answer_or_a_release(
    fake_redis: Any,
) -> None:
    store = RedisAnswers(fake_redis)
    assert await store.claim("k", 5, "a") == (None, True)
    assert await store.claim("k", 5, "b") == (None, False)  # held by another
    assert await store.claim("k", 5, "a") == (None, True)  # its own, taken again
    assert await fake_redis.exists(CLAIMS + "{k}") == 1
    await store.put("k", b"answer", NOW + 60, NOW)  # the answer gives the claim up
    assert await fake_redis.exists(CLAIMS + "{k}") == 0
    # An answer already there is the claim's answer, and leaves no claim behind.
    assert await store.claim("k", 5, "b") == (b"answer", False)
    assert await fake_redis.exists(CLAIMS + "{k}") == 0
    assert await store.claim("j", 5, "a") == (None, True)
    await store.release("j", "b")  # not b's to give up
    assert await store.claim("j", 5, "b") == (None, False)
    await store.release("j", "a")
    assert await store.claim("j", 5, "b") == (None, True)
    assert 0 < await fake_redis.pttl(CLAIMS + "{j}") <= 5000
    await store.aclose()
