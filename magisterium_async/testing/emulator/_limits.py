"""Server-side rate limiting per token and pool, in whatever time the clock tells."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Protocol

from magisterium_async._clock import Clock
from magisterium_async.testing.emulator._config import RateLimitConfig

__all__ = ["RateLimiter", "pool_of"]


def pool_of(skill: str) -> str:
    """The quota pool a skill draws on."""
    return "expensive" if skill == "catholic_qa" else "default"


class _Window(Protocol):
    def acquire(self, now: float) -> float | None: ...


class _SlidingLog:
    """Admitted times of the last period: no interval ``(t - period, t]`` holds more."""

    __slots__ = ("limit", "period", "times")

    def __init__(self, limit: float, period: float, now: float) -> None:
        self.limit = int(limit)
        self.period = period
        self.times: deque[float] = deque()

    def acquire(self, now: float) -> float | None:
        times = self.times
        horizon = now - self.period
        while times and times[0] <= horizon:
            times.popleft()
        if len(times) < self.limit:
            times.append(now)
            return None
        return times[0] + self.period - now


class _FixedWindow:
    """A counter reset at every multiple of ``period`` on the clock."""

    __slots__ = ("count", "limit", "period", "start")

    def __init__(self, limit: float, period: float, now: float) -> None:
        self.limit = int(limit)
        self.period = period
        self.start = -math.inf
        self.count = 0

    def acquire(self, now: float) -> float | None:
        start = math.floor(now / self.period) * self.period
        if start != self.start:
            self.start = start
            self.count = 0
        if self.count < self.limit:
            self.count += 1
            return None
        return start + self.period - now


class _TokenBucket:
    """``limit`` tokens, full at first, refilled at ``limit / period`` a second."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, limit: float, period: float, now: float) -> None:
        self.capacity = max(limit, 1.0)
        self.rate = limit / period
        self.tokens = self.capacity
        self.stamp = now

    def acquire(self, now: float) -> float | None:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0 - 1e-9:
            self.tokens = max(self.tokens - 1.0, 0.0)
            return None
        return (1.0 - self.tokens) / self.rate


_WINDOWS: dict[str, Callable[[float, float, float], _Window]] = {
    "sliding": _SlidingLog,
    "fixed": _FixedWindow,
    "token_bucket": _TokenBucket,
}


class RateLimiter:
    """One window per ``(token, pool)``; ``None`` config lifts every limit."""

    __slots__ = ("_clock", "_config", "_windows")

    def __init__(self, config: RateLimitConfig | None, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._windows: dict[tuple[str, str], _Window] = {}

    def acquire(self, key: str, pool: str) -> float | None:
        """Admit one request (``None``) or say how many seconds until one would be."""
        config = self._config
        if config is None:
            return None
        limit = config.limit_for(pool)
        if limit is None:
            return None
        now = self._clock.now()
        window = self._windows.get((key, pool))
        if window is None:
            window = _WINDOWS[config.algorithm](limit, config.period, now)
            self._windows[key, pool] = window
        return window.acquire(now)

    def retry_after(self, seconds: float) -> int | float:
        """The ``retryAfter`` to send for a wait of ``seconds``, rounded as configured."""
        if self._config is not None and self._config.retry_after_rounding == "exact":
            return max(math.ceil(seconds * 1000.0) / 1000.0, 0.001)
        return max(math.ceil(seconds), 1)

    def reset(self) -> None:
        """Forget every window: all quotas full again."""
        self._windows.clear()
