"""Where answers are kept: what every store offers, and the store in memory.

A store keeps bytes by key and knows nothing of answers: the front
(:class:`~magisterium_async._cache._front.AnswerCache`) says how long each is fresh and
reads only fresh ones. Every method takes ``now`` (wall-clock seconds) from the front, so
freshness and use are reckoned on one clock, injected in tests. A store that cannot do
its job raises :class:`StoreUnavailable`; the front then goes without it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

__all__ = ["MemoryStore", "Store", "StoreUnavailable"]


class StoreUnavailable(Exception):
    """The store cannot be read or written now (unreachable, corrupt): why, with nothing
    secret in it."""


class Store(Protocol):
    """Bytes by key, bounded, the least recently used evicted first."""

    @property
    def where(self) -> str:
        """What the store is, for messages: ``"memory"``, a path, a masked URL."""
        ...

    @property
    def entries(self) -> int | None:
        """Answers held, as last seen; ``None`` when the store cannot say cheaply."""
        ...

    async def get(self, key: str, now: float) -> bytes | None:
        """The bytes kept under ``key`` (now counted as used), or ``None``."""
        ...

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        """Keep ``value`` under ``key``; it may be dropped once ``expires`` has passed."""
        ...

    async def aclose(self) -> None:
        """Let go of connections and files. Idempotent."""
        ...


class MemoryStore:
    """Answers in this process's memory: an LRU bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def __repr__(self) -> str:
        return f"<MemoryStore {len(self._items)} entries, {self._bytes} bytes>"

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
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
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
