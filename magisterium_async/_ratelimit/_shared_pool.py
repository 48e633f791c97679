"""One metered pool of a shared quota: what the client knows of it (:class:`PoolState`) and
the pool's limiter and remote gate on it (:class:`SharedPool`)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from magisterium_async._config import Priority, RateLimits
from magisterium_async._ratelimit._judge import Verdict
from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._scripts import POOL_KEYS

if TYPE_CHECKING:
    from magisterium_async._ratelimit._shared import SharedLimiter

__all__ = ["PoolState", "SharedPool"]


class PoolState:
    """One pool's side of the shared limiter: its limits, what it last read of the shared
    rule, its own recent starts (for the fallback), and outcomes not yet written."""

    __slots__ = (
        "allowed",
        "asked_at",
        "keys",
        "limit",
        "margin",
        "next_at",
        "outcomes",
        "period",
        "rate",
        "rejoin",
        "starts",
        "window",
    )  # fmt: skip

    def __init__(self, limits: RateLimits, pool: str, base: str) -> None:
        starts, window = limits.window_for(pool)  # the local pool's arithmetic, shared
        self.limit = starts if starts else math.inf
        self.window = window
        self.period = limits.period
        self.margin = limits.margin
        self.rate = self.allowed = self.limit
        self.keys = [f"{base}:{pool}:{name}" for name in POOL_KEYS]
        self.starts: deque[float] = deque()  # this process's starts, on the client's clock
        self.rejoin = False
        self.asked_at = 0.0  # when Redis last answered (Redis time, s)
        self.next_at = -math.inf  # when Redis said to ask again (the client's clock)
        self.outcomes: list[str] = []

    @property
    def span(self) -> float:
        return self.window + self.margin


class SharedPool:
    """One metered pool on a :class:`SharedLimiter`: the pool's limiter (the rate it reads
    from Redis; what it learns goes there) and its remote gate (Redis admits each start)."""

    def __init__(self, shared: SharedLimiter, pool: str, limits: RateLimits) -> None:
        self.shared = shared
        self.pool = pool
        self._state: PoolState = shared._pools[pool]

    @property
    def rate(self) -> float:
        state = self._state
        return state.rate * state.period / state.window if state.window else math.inf

    @property
    def stepping_up(self) -> bool:
        return self._state.rate > self._state.allowed

    def next_start(self, now: float) -> float:
        # Redis decides, in admit(); this is only when it said to ask again (for stats).
        return self._state.next_at

    def paced_start(self, now: float, waiting: int) -> float:
        return -math.inf  # Redis admits each start: the shared line takes the turns

    def start(self, start: Start) -> None:
        return None  # the admission wrote it

    def forget(self, start: Start) -> None:
        if start.ticket is not None:
            self.shared.outcome(self.pool, "forget", start.ticket)

    def learn(self, verdict: Verdict) -> None:
        self.shared.learn(self.pool, verdict)

    async def admit(self, line: Callable[[], tuple[Priority, int]]) -> str:
        return await self.shared.admit(self.pool, line)

    def give_back(self, ticket: str) -> None:
        self.shared.outcome(self.pool, "forget", ticket)

    def answered(self, start: Start) -> None:
        if start.ticket is not None:
            kind = "429" if start.limited else "ok"
            self.shared.outcome(self.pool, kind, start.ticket, start.wait)

    async def aclose(self) -> None:
        await self.shared.aclose()
