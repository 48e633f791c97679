"""The first round of a metered pool: what it starts before its first answer.

Told a rate above the server's, a pool would refill the slots its first successes free
before the 429s of the same burst come back, and each refill is one more 429 (the first
burst against a hidden 10/s: 16 instead of 6). So once the first answer is in, the next
starts wait until every request of the first round is answered, or
:data:`~._tuning.ROUND_HOLD_ROUND_TRIPS` of that first round trip at most (one slow
request must not hold the pool): by then the answers say what the server allows.

The pool owns one :class:`FirstRound` until the round is over, then drops it.
"""

from __future__ import annotations

import math

from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._tuning import ROUND_HOLD_ROUND_TRIPS

__all__ = ["FirstRound"]


class FirstRound:
    """The starts of the first round, and when the hold after its first answer ends."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.ends = math.inf  # the most the hold lasts: set by the first answer

    def started(self, start: Start) -> None:
        """A request of the first round started."""
        self.starts.append(start)

    def holds(self, now: float) -> bool | None:
        """Whether starts wait for the round's answers now; ``None``: the round is over
        (the pool drops it)."""
        if self.ends == math.inf:
            return False  # no answer yet: still the first round
        if now < self.ends and not all(s.done for s in self.starts):
            return True
        return None

    def answered(self, started: float, now: float) -> bool:
        """A request sent at ``started`` is over at ``now``; whether the round is over."""
        if self.ends == math.inf:
            self.ends = now + ROUND_HOLD_ROUND_TRIPS * (now - started)
        return all(s.done for s in self.starts)

    def held_until(self) -> float:
        """When the hold ends at the latest (``-inf``: no hold yet)."""
        return self.ends if self.ends != math.inf else -math.inf
