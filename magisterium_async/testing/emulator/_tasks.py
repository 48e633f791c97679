"""Finished tasks, kept encoded for ``tasks/get`` until their time to live runs out."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from typing import NamedTuple

from magisterium_async._clock import Clock

__all__ = ["TERMINAL_STATES", "Listed", "TaskStore"]

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


class Listed(NamedTuple):
    """A kept task as a listing sees it: its position, whose it is, and its JSON."""

    seq: int
    owner: str | None
    context_id: str | None
    state: str
    timestamp: str | None
    body: bytes


class TaskStore:
    """Tasks by id, each with its state and its encoded JSON, expiring after ``ttl``.

    A queue keeps ids in insertion order, which is expiry order for a clock that does not
    go back, so purging the expired ones costs only what it removes.
    """

    __slots__ = ("_clock", "_entries", "_listed", "_max_tasks", "_order", "_seq", "_ttl")

    def __init__(self, ttl: float, clock: Clock, max_tasks: int | None = None) -> None:
        self._ttl = ttl
        self._clock = clock
        self._max_tasks = max_tasks
        self._entries: dict[str, tuple[float, str, bytes]] = {}
        self._order: deque[tuple[float, str]] = deque()
        self._listed: dict[str, Listed] = {}
        self._seq = itertools.count(1)

    def __len__(self) -> int:
        return len(self._entries)

    def put(
        self,
        task_id: str,
        state: str,
        body: bytes,
        *,
        owner: str | None = None,
        context_id: str | None = None,
        timestamp: str | None = None,
    ) -> None:
        """Keep a task (its encoded JSON) from now until ``ttl`` has passed; ``owner``,
        ``context_id`` and ``timestamp`` (its status's) are what a listing filters on."""
        now = self._clock.now()
        self._purge(now)
        expires = now + self._ttl
        self._entries[task_id] = (expires, state, body)
        self._listed[task_id] = Listed(next(self._seq), owner, context_id, state, timestamp, body)
        self._order.append((expires, task_id))
        if self._max_tasks is not None:
            while len(self._entries) > self._max_tasks:
                self._drop_oldest()

    def get(self, task_id: str) -> tuple[str, bytes] | None:
        """``(state, encoded task)``, or ``None`` when unknown or expired."""
        entry = self._entries.get(task_id)
        if entry is None:
            return None
        expires, state, body = entry
        if self._clock.now() >= expires:
            del self._entries[task_id]
            self._listed.pop(task_id, None)
            return None
        return state, body

    def newest_first(self, owner: str | None) -> Iterator[Listed]:
        """The live tasks of ``owner``, the last kept first."""
        self._purge(self._clock.now())
        return (task for task in reversed(self._listed.values()) if task.owner == owner)

    def _drop_oldest(self) -> None:
        expires, task_id = self._order.popleft()
        entry = self._entries.get(task_id)
        if entry is not None and entry[0] == expires:
            del self._entries[task_id]
            self._listed.pop(task_id, None)

    def _purge(self, now: float) -> None:
        order = self._order
        while order and order[0][0] <= now:
            self._drop_oldest()

    def clear(self) -> None:
        """Forget every task."""
        self._entries.clear()
        self._listed.clear()
        self._order.clear()
