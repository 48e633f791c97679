"""The waiting line of one pool: whose turn is next when the pool may start a request.

A *waiter* is a call waiting for its turn. Its *priority* is ``"interactive"`` (a person is
waiting: single calls, by default) or ``"bulk"`` (``search_many``, ``fetch_many``,
``harvest``); its *fairness key* (``None`` unless the caller set one) names whom it
serves. Turns go:

1. every waiting interactive call before every waiting bulk call;
2. within one priority, round-robin over fairness keys, a key that arrives going ahead of
   the key that just had its turn: one key's thousand calls never hold another key's
   first call back;
3. within one key, first come first served.

A cancelled waiter is dropped when it reaches the front.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Line", "Waiter"]

T = TypeVar("T")


class Waiter(Generic[T]):
    """One call waiting: ``seq`` orders arrivals over every pool, ``since`` is when it
    began waiting, ``future`` gets what its turn hands it; ``kind`` is what the rule
    paces by: ``"b"`` bulk, ``"k"`` an interactive call with a fairness key, ``"i"``
    another interactive call."""

    __slots__ = ("bulk", "future", "key", "kind", "seq", "since")

    def __init__(self, seq: int, since: float, kind: str, key: str | None) -> None:
        self.seq, self.since, self.kind, self.key = seq, since, kind, key
        self.bulk = kind == "b"
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()


class Line(Generic[T]):
    """The waiters of one pool, by priority, fairness key and arrival."""

    __slots__ = ("_keys", "_served")

    def __init__(self) -> None:
        # Per priority (interactive, bulk): key -> its waiters; the dict's order is the
        # rotation (the first key is served next, then goes to the back).
        self._keys: tuple[dict[str | None, deque[Waiter[T]]], ...] = ({}, {})
        self._served: list[str | bool | None] = [False, False]  # the key last served

    def __bool__(self) -> bool:
        """Whether anyone waits (cancelled waiters not yet dropped included)."""
        return any(queue for keys in self._keys for queue in keys.values())

    def waiting(self) -> int:
        """How many calls wait (cancelled ones excluded)."""
        return sum(not w.future.done() for keys in self._keys for q in keys.values() for w in q)

    def push(self, waiter: Waiter[T]) -> None:
        """A new waiter joins at the back of its key's line."""
        rank = int(waiter.bulk)
        keys, key = self._keys[rank], waiter.key
        if key not in keys:
            served = self._served[rank]
            keys[key] = deque()
            if served is not False and served in keys and len(keys) > 1:
                # A newcomer goes ahead of the key that just had its turn (once).
                keys[served] = keys.pop(served)
                self._served[rank] = False
        keys[key].append(waiter)

    def head(self) -> Waiter[T] | None:
        """The waiter whose turn is next (cancelled ones dropped on the way), or ``None``."""
        for keys in self._keys:
            while keys:
                key = next(iter(keys))
                queue = keys[key]
                while queue and queue[0].future.done():
                    queue.popleft()
                if queue:
                    return queue[0]
                del keys[key]
        return None

    def pop(self) -> Waiter[T]:
        """Take the head (:meth:`head` first); its key goes to the back of the rotation."""
        rank = 0 if self._keys[0] else 1
        keys = self._keys[rank]
        key = next(iter(keys))
        queue = keys.pop(key)
        waiter = queue.popleft()
        if queue:
            keys[key] = queue  # to the back of the rotation
        self._served[rank] = key
        return waiter

    def remove(self, waiter: Waiter[T]) -> None:
        """Take out a waiter that stopped waiting (cancelled)."""
        queue = self._keys[int(waiter.bulk)].get(waiter.key)
        if queue is not None and waiter in queue:
            queue.remove(waiter)

    def drain(self) -> list[Waiter[T]]:
        """Take every waiter out (the pool is closing)."""
        out = [w for keys in self._keys for queue in keys.values() for w in queue]
        for keys in self._keys:
            keys.clear()
        return out
