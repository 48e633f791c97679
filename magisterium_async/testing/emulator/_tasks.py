"""Finished tasks, kept encoded for ``tasks/get`` until their time to live runs out."""

from __future__ import annotations

from collections import deque

from magisterium_async._clock import Clock

__all__ = ["TERMINAL_STATES", "TaskStore"]

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


class TaskStore:
    """Tasks by id, each with its state and its encoded JSON, expiring after ``ttl``.

    A queue keeps ids in insertion order, which is expiry order for a clock that does not
    go back, so purging the expired ones costs only what it removes.
    """

    __slots__ = ("_clock", "_entries", "_max_tasks", "_order", "_ttl")

    def __init__(self, ttl: float, clock: Clock, max_tasks: int | None = None) -> None:
        self._ttl = ttl
        self._clock = clock
        self._max_tasks = max_tasks
        self._entries: dict[str, tuple[float, str, bytes]] = {}
        self._order: deque[tuple[float, str]] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, task_id: str, state: str, body: bytes) -> None:
        """Keep a task (its encoded JSON) from now until ``ttl`` has passed."""
        now = self._clock.now()
        self._purge(now)
        expires = now + self._ttl
        self._entries[task_id] = (expires, state, body)
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
            return None
        return state, body

    def _drop_oldest(self) -> None:
        expires, task_id = self._order.popleft()
        entry = self._entries.get(task_id)
        if entry is not None and entry[0] == expires:
            del self._entries[task_id]

    def _purge(self, now: float) -> None:
        order = self._order
        while order and order[0][0] <= now:
            self._drop_oldest()

    def clear(self) -> None:
        """Forget every task."""
        self._entries.clear()
        self._order.clear()
