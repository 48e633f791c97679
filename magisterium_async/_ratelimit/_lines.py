"""The waiting lines of one pool: who starts next when the pool may start one.

A *waiter* is a call waiting for its turn. Its *priority* is ``"interactive"`` (a person is
waiting: single calls, by default) or ``"bulk"`` (``search_many``, ``fetch_many``,
``harvest``); its *fairness key* (``None`` unless the caller set one) names whom it serves.
The line hands out turns in this order:

1. every waiting interactive call before every waiting bulk call;
2. within one priority, round-robin over fairness keys (one turn per key in rotation, so a
   key with a thousand calls waiting never holds another key's first call back); a key
   that arrives goes ahead of the key that just had its turn, so a newcomer's first call
   takes the next start even behind a key that waits alone;
3. within one key, first come first served.

Cancelled waiters are dropped lazily, when they reach the front. Each operation costs
O(1) but for :meth:`WaitingLine.requeue` and :meth:`WaitingLine.remove`, which are rare.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

from magisterium_async._config import Priority

__all__ = ["PRIORITIES", "Priority", "Waiter", "WaitingLine"]

T = TypeVar("T")

PRIORITIES: tuple[Priority, ...] = ("interactive", "bulk")
_RANK = {"interactive": 0, "bulk": 1}


class Waiter(Generic[T]):
    """One call waiting for its turn: ``seq`` orders arrivals over every pool, ``since``
    is when it began waiting (clock time); ``future`` gets what its turn hands it (the
    line never looks inside: a pool's waiters get a permit)."""

    __slots__ = ("future", "key", "rank", "seq", "since")

    def __init__(self, seq: int, since: float, priority: Priority, key: str | None) -> None:
        self.seq = seq
        self.since = since
        self.rank = _RANK[priority]
        self.key = key
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    @property
    def priority(self) -> Priority:
        """``"interactive"`` or ``"bulk"``."""
        return PRIORITIES[self.rank]


class WaitingLine(Generic[T]):
    """The waiters of one pool, by priority, fairness key and arrival."""

    __slots__ = ("_classes", "_count", "_served")

    def __init__(self) -> None:
        # One dict per priority: fairness key -> its waiters, oldest first. The dict's
        # order is the rotation: the first key is served next, then moves to the back.
        self._classes: tuple[dict[str | None, deque[Waiter[T]]], ...] = ({}, {})
        self._count = 0  # waiters held, cancelled ones not yet dropped included
        # Per priority: the key that had the last turn (None: none yet, or a newcomer
        # already went ahead of it); while it is last in the rotation, a key that arrives
        # goes ahead of it.
        self._served: list[tuple[str | None] | None] = [None, None]

    def __bool__(self) -> bool:
        return self._count > 0

    def waiting(self) -> int:
        """How many calls wait (cancelled ones excluded)."""
        return sum(
            1 for keys in self._classes for line in keys.values() for w in line
            if not w.future.done()
        )  # fmt: skip

    def held(self) -> int:
        """How many calls wait, cancelled ones not yet dropped included (O(1))."""
        return self._count

    def keyed(self) -> bool:
        """Whether a call with a fairness key waits (cancelled ones not yet dropped may
        count; O(1))."""
        return any(len(keys) > 1 or (bool(keys) and None not in keys) for keys in self._classes)

    def push(self, waiter: Waiter[T]) -> None:
        """A new waiter joins at the back of its key's line."""
        rank, key = waiter.rank, waiter.key
        keys = self._classes[rank]
        line = keys.get(key)
        if line is None:
            line = deque()
            served = self._served[rank]
            if served is not None and keys and next(reversed(keys)) == served[0]:
                # A newcomer goes ahead of the key that just had its turn (once).
                back = keys.pop(served[0])
                keys[key] = line
                keys[served[0]] = back
                self._served[rank] = None
            else:
                keys[key] = line
        line.append(waiter)
        self._count += 1

    def head(self) -> Waiter[T] | None:
        """The waiter whose turn is next, or ``None``."""
        if not self._count:
            return None
        for keys in self._classes:
            while keys:
                key = next(iter(keys))
                line = keys[key]
                while line and line[0].future.done():
                    line.popleft()  # cancelled, its task not yet run to say so
                    self._count -= 1
                if line:
                    return line[0]
                del keys[key]
        return None

    def pop(self) -> Waiter[T]:
        """Take the head (call :meth:`head` first); its key goes to the back of the rotation."""
        interactive, bulk = self._classes
        rank = 0 if interactive else 1
        keys = interactive if interactive else bulk
        key = next(iter(keys))
        line = keys[key]
        waiter = line.popleft()
        self._count -= 1
        if not line:
            del keys[key]
        elif len(keys) > 1:
            keys[key] = keys.pop(key)  # to the back of the rotation
        self._served[rank] = (key,)
        return waiter

    def requeue(self, waiter: Waiter[T]) -> None:
        """A waiter let through too early comes back in its place: ahead of later arrivals
        of its key, and its key first in the rotation."""
        keys = self._classes[waiter.rank]
        line = keys.pop(waiter.key, None) or deque()
        at = 0
        while at < len(line) and line[at].seq < waiter.seq:
            at += 1
        line.insert(at, waiter)
        rest = list(keys.items())
        keys.clear()
        keys[waiter.key] = line
        keys.update(rest)
        self._count += 1

    def remove(self, waiter: Waiter[T]) -> None:
        """Take out a waiter that is no longer waiting (cancelled)."""
        line = self._classes[waiter.rank].get(waiter.key)
        if line is not None and waiter in line:
            line.remove(waiter)
            self._count -= 1
            if not line:
                del self._classes[waiter.rank][waiter.key]

    def drain(self) -> list[Waiter[T]]:
        """Take every waiter out (the scheduler is closing)."""
        out = [w for keys in self._classes for line in keys.values() for w in line]
        for keys in self._classes:
            keys.clear()
        self._count = 0
        self._served = [None, None]
        return out
