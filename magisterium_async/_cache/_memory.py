"""Answers in memory, and what every store raises when it cannot do its job.

A store keeps bytes by key and knows nothing of answers: the front
(:class:`~magisterium_async._cache._answers.AnswerCache`) says how long each is fresh and
reads only fresh ones. Each store (:class:`MemoryAnswers`, ``DiskAnswers``,
``RedisAnswers``) offers ``where`` and ``entries`` (for messages and stats), ``get``,
``put`` and ``aclose``; every method takes ``now`` (wall-clock seconds) from the front, so
freshness and use are reckoned on one clock, injected in tests. A store that cannot do its
job raises :class:`StoreUnavailable`; the front then goes without it.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["MemoryAnswers", "StoreUnavailable"]


class StoreUnavailable(Exception):
    """The store cannot be read or written now (unreachable, corrupt): why, with nothing
    secret in it."""


class MemoryAnswers:
    """Answers in this process's memory: an LRU bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def __repr__(self) -> str:
        return f"<MemoryAnswers {len(self._items)} entries, {self._bytes} bytes>"

    @property
    def where(self) -> str:
        return "memory"

    @property
    def entries(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        """Bytes held (keys and values)."""
        return self._bytes

    async def get(self, key: str, now: float) -> bytes | None:
        """The bytes kept under ``key`` (now counted as used), or ``None``."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        """Keep ``value`` under ``key``; it may be dropped once ``expires`` has passed."""
        size = len(key) + len(value)
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(key) + len(old)
        if size > self._max_bytes:
            return  # larger than the whole cache: not kept
        self._items[key] = value
        self._bytes += size
        while len(self._items) > self._max_entries or self._bytes > self._max_bytes:
            evicted, dropped = self._items.popitem(last=False)
            self._bytes -= len(evicted) + len(dropped)

    async def aclose(self) -> None:
        self._items.clear()
        self._bytes = 0
