"""A harvest's figures, read live: this run's, all runs', the pace and the ETA.

:class:`Tally` reads this run's figures (the harvest's stats, what the sink wrote, the
pool's pace) and adds what the state held when the run began (:class:`Before`): done,
left, the rate and the ETA. The status line and the summary (:mod:`._summary`) word
what it says, so they agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from magisterium_async._config import RateLimits
from magisterium_async._harvest import Harvest, StateSummary
from magisterium_async._ratelimit import PoolStats

__all__ = ["RATE_AFTER", "Before", "Counted", "Tally"]

RATE_AFTER = 10.0
"""Seconds a run must last before it shows a rate of documents a minute."""


class Counted(Protocol):
    """Where the documents go, as far as the report is concerned."""

    @property
    def written(self) -> int: ...

    @property
    def skipped(self) -> int: ...


@dataclass(frozen=True)
class Before:
    """What the harvest's state held when this run began (all 0 for a new harvest)."""

    queries_searched: int = 0
    documents_found: int = 0
    documents_delivered: int = 0
    documents_to_fetch: int = 0
    """Found, and not fetched yet (or failed): this run fetches them first."""

    @classmethod
    def of(cls, summary: StateSummary) -> Before:
        """The figures of a state's :meth:`~HarvestState.summary`."""
        documents = summary.documents
        return cls(
            queries_searched=summary.queries.get("searched", 0),
            documents_found=sum(documents.values()),
            documents_delivered=documents.get("delivered", 0),
            documents_to_fetch=documents.get("pending", 0) + documents.get("failed", 0),
        )


class Tally:
    """A harvest's figures, read live: this run's, all runs', the rate and the ETA.

    Computed here only, so the status line and the summary agree. "All runs" adds what
    the state held at the start (:class:`Before`); "this run" is this process since it
    started.
    """

    def __init__(
        self,
        run: Harvest,
        sink: Counted,
        *,
        total: int | None,
        quota: RateLimits,
        before: Before | None = None,
        pool: Callable[[], PoolStats] | None = None,
        in_file: bool = False,
    ) -> None:
        self.run = run
        self.sink = sink
        self.total = total
        """Distinct queries in the input, when it can be counted (not stdin)."""
        self.quota = quota
        self.before = before or Before()
        self._pool = pool
        self._in_file = in_file

    def _failed(self, kind: str) -> int:
        return sum(1 for failure in self.run.failures if failure.kind == kind)

    @property
    def queries_this_run(self) -> int:
        """Queries searched by this run."""
        return self.run.stats.searched

    @property
    def queries_searched_before(self) -> int:
        """Distinct queries of the input an earlier run answered (not searched again)."""
        stats = self.run.stats
        return stats.skipped_queries - stats.repeated_queries

    @property
    def queries_done(self) -> int:
        """Distinct queries of the input answered, over all runs: searched now or before
        (a query repeated in the input counts once; a failed search is not done:
        ``--resume`` tries it again)."""
        return self.run.stats.searched + self.queries_searched_before

    @property
    def documents_this_run(self) -> int:
        """Documents written by this run."""
        return self.sink.written

    @property
    def documents(self) -> int:
        """Documents written over all runs: in the output file, or delivered before."""
        existing = getattr(self.sink, "existing", None) if self._in_file else None
        before = existing if isinstance(existing, int) else self.before.documents_delivered
        return before + self.sink.written

    @property
    def per_minute(self) -> float | None:
        """Documents written a minute, by this run: over at least one quota period, so
        the burst a fresh quota allows does not read as the pace. With the quota lifted,
        over the time elapsed, and only once that is :data:`RATE_AFTER` seconds at least
        (``None`` before: a rate over a fraction of a second means nothing)."""
        elapsed = self.run.stats.elapsed
        if math.isfinite(self.quota.default):
            elapsed = max(elapsed, self.quota.period)
        if elapsed < RATE_AFTER:
            return None
        return self.sink.written * 60 / elapsed

    def waiting_for_quota(self) -> float | None:
        """Seconds until the quota lets the next request go, while requests wait for it
        (``None``: none waits for quota)."""
        if self._pool is None:
            return None
        pool = self._pool()
        return pool.next_start_in if pool.waiting and pool.next_start_in > 0 else None

    def requests_left(self) -> float | None:
        """Searches and fetches still to send (``None``: cannot tell yet).

        The queries not answered yet; the ids found (now or by an earlier run) and not
        fetched yet; and the ids the searches left should find, at the rate of new ids
        per search so far (this run's, else the state's).
        """
        if self.total is None:
            return None
        stats = self.run.stats
        taken = self.queries_done + self._failed("search")
        searches_left = max(self.total - taken, 0)
        attempted = stats.fetched + stats.not_found + self._failed("fetch")
        known = self.before.documents_to_fetch + stats.unique_ids
        fetches_left: float = max(known - attempted, 0)
        if searches_left:
            if stats.searched:
                per_search = stats.unique_ids / stats.searched
            elif self.before.queries_searched:
                per_search = self.before.documents_found / self.before.queries_searched
            else:
                return None
            fetches_left += searches_left * per_search
        return searches_left + fetches_left

    def requests_per_second(self) -> float | None:
        """The pace of the default pool: its quota in force (lower after a 429), or with
        the quota lifted, the pace this run has kept."""
        rate = self.quota.default
        if self._pool is not None:
            rate = self._pool().current_rate
        if not math.isinf(rate):
            return rate / self.quota.period
        stats = self.run.stats
        done = stats.searched + self._failed("search") + stats.fetched + stats.not_found
        done += self._failed("fetch")
        return done / stats.elapsed if done and stats.elapsed > 0 else None

    def eta(self) -> float | None:
        """Seconds left: the requests left at the pool's pace, after the wait for the
        quota when requests wait for it (``None``: cannot tell)."""
        left = self.requests_left()
        if left is None:
            return None
        if left == 0:
            return 0.0
        pace = self.requests_per_second()
        if not pace:
            return None
        wait = self.waiting_for_quota()
        # While waiting, the next request goes when the quota says; the rest follow it.
        return left / pace if wait is None else wait + max(left - 1, 0) / pace

    def record(self) -> dict[str, Any]:
        """The figures for a JSON summary (``documents_per_minute``: ``None`` while
        :attr:`per_minute` is)."""
        rate = self.per_minute
        return {
            "queries_total": self.total,
            "queries_done": self.queries_done,
            "documents_total": self.documents,
            "documents_per_minute": None if rate is None else round(rate, 2),
        }
