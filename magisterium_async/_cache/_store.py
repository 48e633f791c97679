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

__all__ = ["MemoryStore", "SharedStore", "Store", "StoreUnavailable"]


class StoreUnavailable(Exception):
    """The store cannot be read or written now (unreachable, corrupt): why, with nothing
    secret in it."""


class Store(Protocol):
    """Bytes by key, bounded, the least recently used evicted first."""

    shared: bool
    """Whether several hosts use it at once: then it is a :class:`SharedStore`."""

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
        """Keep ``value`` under ``key``; it may be dropped once ``expires`` has passed
        (a shared store gives up the key's claim with it)."""
        ...

    async def aclose(self) -> None:
        """Let go of connections and files. Idempotent."""
        ...


class SharedStore(Store, Protocol):
    """A store several hosts share, which also shares their calls in flight: a caller
    about to ask the service *claims* the key, and callers elsewhere wait for its answer
    instead of sending the same request."""

    async def claim(self, key: str, seconds: float, owner: str) -> tuple[bytes | None, bool]:
        """The bytes under ``key`` if there are some now; else claim ``key`` for
        ``seconds`` under ``owner`` (a token of the claimant's own): ``True`` if no one
        else held it (a claim of ``owner``'s own is renewed: then send, and :meth:`put` or
        :meth:`release`), ``False`` if someone does (wait for it). In one step, so an
        answer that lands just before the claim is never asked for again."""
        ...

    async def peek(self, key: str, now: float) -> tuple[bytes | None, bool]:
        """The bytes under ``key`` (or ``None``), and whether someone holds its claim."""
        ...

    async def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key`` without an answer to keep (the call failed,
        or it is not kept); a claim someone else holds now is left alone."""
        ...


class MemoryStore:
    """Answers in this process's memory: an LRU bounded in entries and bytes."""

    shared = False

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
