"""What the emulator saw: counters by method, skill and outcome, and a list of arrivals.

Outcomes, one per request:

- ``ok``: a completed task, or a task answered by ``tasks/get``;
- ``failed``: a task that ended ``failed`` (the skill raised);
- ``rate_limited``: the emulator's own quota answered -32003 / HTTP 429;
- ``unauthorized``: -32004 / HTTP 401 (missing or unknown token);
- ``forbidden``: -32005 / HTTP 403 (a free-plan token);
- ``error``: any other JSON-RPC error (-32700, -32600, -32601, -32602, -32001, -32002);
- ``fault``: an injected fault replaced or corrupted the answer (a 5xx, a dropped
  connection, a truncated or malformed body, a forced 429, a forced -32603).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from magisterium_async.testing.emulator.oauth._records import OAuthCounts

__all__ = ["OUTCOMES", "Arrival", "Stats", "max_in_window"]

OUTCOMES = ("ok", "failed", "rate_limited", "unauthorized", "forbidden", "error", "fault")


@dataclass(slots=True)
class Arrival:
    """One request as it arrived.

    ``time`` is the emulator clock when the request arrived; ``token`` the first 12 hex
    digits of the SHA-256 of the bearer token (``None`` without one); ``input`` what the
    skill was asked (the query, the document id, the date); ``admitted`` whether the quota
    let it through to a skill; ``fault`` the injected fault's name, if any (latency
    included); ``outcome`` is filled in when the answer leaves.
    """

    time: float
    method: str | None = None
    skill: str | None = None
    token: str | None = None
    input: str | None = None
    outcome: str | None = None
    admitted: bool = False
    fault: str | None = None


class Stats:
    """Request counters keyed by ``(method, skill, outcome)``, and the authorization
    server's counters in :attr:`oauth` (tokens issued, refreshes, ``invalid_grant``
    answers, revocations, ...)."""

    __slots__ = ("_counts", "oauth")

    def __init__(self) -> None:
        self._counts: Counter[tuple[str | None, str | None, str]] = Counter()
        self.oauth = OAuthCounts()

    def record(self, method: str | None, skill: str | None, outcome: str) -> None:
        """Count one answered request."""
        self._counts[method, skill, outcome] += 1

    def count(
        self, *, method: str | None = None, skill: str | None = None, outcome: str | None = None
    ) -> int:
        """How many requests matched every filter given (``None`` matches anything)."""
        return sum(
            number
            for (m, s, o), number in self._counts.items()
            if (method is None or m == method)
            and (skill is None or s == skill)
            and (outcome is None or o == outcome)
        )

    @property
    def total(self) -> int:
        """How many requests were answered (or dropped) in all."""
        return sum(self._counts.values())

    def by_outcome(self) -> dict[str, int]:
        """Totals per outcome."""
        totals: Counter[str] = Counter()
        for (_, _, outcome), number in self._counts.items():
            totals[outcome] += number
        return dict(totals)

    def as_dict(self) -> dict[tuple[str | None, str | None, str], int]:
        """Every counter, keyed by ``(method, skill, outcome)``."""
        return dict(self._counts)

    def reset(self) -> None:
        """Forget every count."""
        self._counts.clear()
        self.oauth.reset()

    def __repr__(self) -> str:
        return f"Stats(total={self.total}, by_outcome={self.by_outcome()})"


def max_in_window(times: Iterable[float], period: float) -> int:
    """The most ``times`` that fall in any half-open interval ``[t, t + period)``.

    For example, ``max_in_window((a.time for a in emu.arrivals if a.admitted and
    a.skill != "catholic_qa"), 60.0)`` must not exceed the default pool's limit.
    """
    ordered = sorted(times)
    best = start = 0
    for end, moment in enumerate(ordered):
        while ordered[start] <= moment - period:
            start += 1
        best = max(best, end - start + 1)
    return best
