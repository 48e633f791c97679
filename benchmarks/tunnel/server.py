"""The wind tunnel's server: one account's quota as a server keeps it, in virtual time.

Each pool is a :class:`Window` of one kind (``fixed``: a counter reset at every multiple
of the period; ``sliding``: no interval of one period holds more admissions; ``bucket``: a
token bucket, full at first, refilled at the limit per period), whose limit may change
mid-run. A request travels one way (``latency`` plus up to ``jitter``), is admitted or
refused (HTTP 429 with ``retryAfter``, rounded up to whole seconds as the service sends
it), and its answer travels back. Another party may spend the same quota (:class:`Other`),
and a share of requests may be refused at random whatever the quota (``spurious``, with a
fixed ``retryAfter``).

Every arrival is recorded (:class:`Arrival`), so a scenario's figures are read from what
the server saw.
"""

from __future__ import annotations

import json
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from magisterium_async.testing import MockRequest, MockResponse, VirtualClock

Kind = Literal["fixed", "sliding", "bucket"]

_HITS = {"results": [{"id": "d1", "url": "https://example.org/d1", "title": "A document"}]}
_TASK = {
    "kind": "task",
    "id": "t",
    "contextId": "c",
    "status": {"state": "completed"},
    "artifacts": [
        {"artifactId": "a", "name": "search_results", "parts": [{"kind": "data", "data": _HITS}]}
    ],
}
_ANSWER = {
    **_TASK,
    "artifacts": [
        {
            "artifactId": "a",
            "name": "catholic_qa_response",
            "parts": [{"kind": "text", "text": "An answer."}],
        }
    ],
}


class Window:
    """One pool's quota at the server: ``limit(t)`` admissions per ``period`` seconds."""

    def __init__(self, kind: Kind, period: float, limit: Callable[[float], int]) -> None:
        self.kind = kind
        self.period = period
        self.limit = limit
        self._times: deque[float] = deque()  # sliding: admissions in the last period
        self._index, self._count = -1, 0  # fixed: the current window and its count
        self._tokens, self._stamp = float(limit(0.0)), 0.0  # bucket

    def wait(self, now: float) -> float:
        """Seconds until a request arriving at ``now`` would be admitted (0: now)."""
        limit, period = self.limit(now), self.period
        if self.kind == "fixed":
            index = math.floor(now / period + 1e-9)
            count = self._count if index == self._index else 0
            return 0.0 if count < limit else (index + 1) * period - now
        if self.kind == "sliding":
            times = self._times
            while times and times[0] <= now - period:
                times.popleft()
            if len(times) < limit:
                return 0.0
            return times[len(times) - limit] + period - now
        tokens = min(float(limit), self._tokens + (now - self._stamp) * limit / period)
        return 0.0 if tokens >= 1 - 1e-9 else (1 - tokens) * period / limit

    def take(self, now: float) -> float:
        """Admit a request arriving at ``now`` (returns 0.0), or the seconds until one
        would be (the request is refused)."""
        wait = self.wait(now)
        if wait > 0:
            return wait
        if self.kind == "fixed":
            index = math.floor(now / self.period + 1e-9)
            if index != self._index:
                self._index, self._count = index, 0
            self._count += 1
        elif self.kind == "sliding":
            self._times.append(now)
        else:
            limit = self.limit(now)
            tokens = min(float(limit), self._tokens + (now - self._stamp) * limit / self.period)
            self._tokens, self._stamp = max(tokens - 1, 0.0), now
        return 0.0


@dataclass(frozen=True)
class Arrival:
    """One request as the server saw it."""

    time: float
    pool: str
    admitted: bool
    who: str  # "ours" or "other"
    spurious: bool = False


@dataclass
class Server:
    """The quota of one account: a :class:`Window` per pool, the network, random 429s."""

    clock: VirtualClock
    windows: dict[str, Window]
    rng: random.Random
    latency: float = 0.025
    jitter: float = 0.015
    spurious: float = 0.0
    spurious_wait: float = 1.0
    arrivals: list[Arrival] = field(default_factory=list)
    others: random.Random = field(default_factory=random.Random)  # the other party's own

    def arrive(self, pool: str, who: str) -> float:
        """A request of ``who`` reaches the server now: 0.0 if admitted, else its wait."""
        now = self.clock.now()
        if who == "ours" and self.spurious and self.rng.random() < self.spurious:
            self.arrivals.append(Arrival(now, pool, False, who, spurious=True))
            return self.spurious_wait  # said as it is: a fixed wait, whatever the quota
        wait = self.windows[pool].take(now)
        self.arrivals.append(Arrival(now, pool, wait == 0, who))
        return wait

    async def handle(self, request: MockRequest) -> MockResponse:
        """The transport's handler: the way there, the quota, the way back."""
        body = json.loads(request.content)
        skill = body["params"]["message"].get("metadata", {}).get("skillId")
        pool = "expensive" if skill in (None, "catholic_qa") else "default"
        await self.clock.sleep(self.latency + self.rng.uniform(0, self.jitter))
        wait = self.arrive(pool, "ours")
        await self.clock.sleep(self.latency)
        if wait > 0:
            data = {"retryAfter": self.retry_after(wait)}
            return MockResponse.error(request, -32003, "Rate limit exceeded", data, status=429)
        return MockResponse.result(request, _ANSWER if pool == "expensive" else _TASK)

    def retry_after(self, wait: float) -> float:
        """``retryAfter`` for a wait: whole seconds, rounded up, as the service sends them,
        where windows are long; to the millisecond where a window is a second (as the
        real-time benchmarks' server), since a whole second would be a whole window."""
        period = next(iter(self.windows.values())).period
        if period < 10:
            return math.ceil(wait * 1000 - 1e-6) / 1000
        return max(math.ceil(wait - 1e-9), 1)

    def ours(self, pool: str = "default") -> list[Arrival]:
        """Our requests to ``pool``, in arrival order."""
        return [a for a in self.arrivals if a.who == "ours" and a.pool == pool]


@dataclass(frozen=True)
class Other:
    """Another party on the same account (the user's MCP calls): ``steady`` spends
    ``share`` of the limit, evenly; ``bursts`` spends ``share`` of it at once at the
    start of a window, in one window of two chosen at random; ``spent`` spends the whole
    quota of the first ``windows`` windows as each opens (before our first request)."""

    mode: Literal["steady", "bursts", "spent"]
    share: float = 0.4
    windows: int = 1

    async def run(self, server: Server, pool: str, period: float, limit: int, until: float) -> None:
        clock = server.clock
        if self.mode == "steady":
            gap = period / max(self.share * limit, 1e-9)
            await clock.sleep(gap / 2)
            while clock.now() < until:
                server.arrive(pool, "other")
                await clock.sleep(gap)
        elif self.mode == "bursts":
            index = 0
            while index * period < until:
                if server.others.random() < 0.5:
                    for _ in range(max(1, round(self.share * limit))):
                        server.arrive(pool, "other")
                index += 1
                await clock.sleep(index * period - clock.now())
        else:
            for index in range(self.windows):
                await clock.sleep(index * period - clock.now())
                while server.windows[pool].wait(clock.now()) == 0:
                    server.arrive(pool, "other")
