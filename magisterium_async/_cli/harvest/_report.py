"""What a harvest tells its user, computed in one place so that it agrees: its figures
(:class:`Tally`), the status line on a terminal (:func:`status`) and the summary when it
ends (:func:`summary`). "This run" is this process; "all runs" adds what the state held
when it began.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from magisterium_async._cli._errors import describe
from magisterium_async._cli._output import Output, duration, plural, quoted, waiting_text
from magisterium_async._config import RateLimits
from magisterium_async._harvest import Harvest, StateSummary
from magisterium_async._ratelimit import PoolStats

__all__ = ["Sink", "Tally", "status", "summary"]

RATE_AFTER = 10.0
"""Seconds a run must last before it shows a rate of documents a minute."""


class Sink(Protocol):
    """Where the documents go, as the figures count them (:class:`JsonlWriter` is one)."""

    written: int
    """Documents this run wrote."""
    skipped: int
    """Documents handed over that the output held already (not written again)."""
    existing: int
    """Documents the output held when this run began."""


class Tally:
    """A harvest's figures, read live: this run's (``run``'s stats, what the ``sink``
    wrote), all runs' (what the state held ``before``), the pace and the ETA."""

    def __init__(
        self,
        run: Harvest,
        sink: Sink,
        *,
        total: int | None,
        quota: RateLimits,
        before: StateSummary | None = None,
        pool: Callable[[], PoolStats] | None = None,
    ) -> None:
        self.run = run
        self.sink = sink
        self.total = total
        """Distinct queries in the input, when it can be counted (not stdin)."""
        self.quota = quota
        self._pool = pool
        held = before or StateSummary({}, {}, 0, None)
        self._searched_before = held.queries.get("searched", 0)
        self._found_before = sum(held.documents.values())
        self._delivered_before = held.documents.get("delivered", 0)
        self._to_fetch_before = held.documents.get("pending", 0) + held.documents.get("failed", 0)

    @property
    def queries_searched_before(self) -> int:
        """Distinct queries of the input an earlier run answered (not searched again)."""
        return self.run.stats.skipped_queries - self.run.stats.repeated_queries

    @property
    def queries_done(self) -> int:
        """Distinct queries of the input answered, over all runs (a failed search is not
        done: ``--resume`` tries it again)."""
        return self.run.stats.searched + self.queries_searched_before

    @property
    def documents(self) -> int:
        """Documents written over all runs: in the output before this run (the file's,
        or delivered, as the state says), and by it."""
        return max(self.sink.existing, self._delivered_before) + self.sink.written

    @property
    def per_minute(self) -> float | None:
        """Documents written a minute by this run: over one quota period at least, so the
        burst a fresh quota allows does not read as the pace; with the quota lifted, only
        once the run has lasted :data:`RATE_AFTER` seconds."""
        elapsed = self.run.stats.elapsed
        if math.isfinite(self.quota.default):
            elapsed = max(elapsed, self.quota.period)
        return None if elapsed < RATE_AFTER else self.sink.written * 60 / elapsed

    def waiting_for_quota(self) -> float | None:
        """Seconds until the quota lets the next request go, while requests wait for it."""
        pool = None if self._pool is None else self._pool()
        if pool is None or not pool.waiting or pool.next_start_in <= 0:
            return None
        return pool.next_start_in

    def eta(self) -> float | None:
        """Seconds left (``None``: cannot tell yet): the searches and fetches left at the
        pool's pace, after the wait for the quota while requests wait for it. The fetches
        left are those of ids found and not fetched, and those the searches left should
        find, at the rate of new ids per search so far (this run's, else the state's)."""
        if self.total is None:
            return None
        stats, failures = self.run.stats, self.run.failures
        failed = sum(1 for failure in failures if failure.kind == "search")
        searches = max(self.total - self.queries_done - failed, 0)
        attempted = stats.fetched + stats.not_found + len(failures) - failed
        fetches: float = max(self._to_fetch_before + stats.unique_ids - attempted, 0)
        if searches:
            if stats.searched:
                fetches += searches * stats.unique_ids / stats.searched
            elif self._searched_before:
                fetches += searches * self._found_before / self._searched_before
            else:
                return None
        left = searches + fetches
        rate = self.quota.default if self._pool is None else self._pool().current_rate
        if math.isfinite(rate):
            pace = rate / self.quota.period
        else:  # the quota lifted: the pace this run kept
            done = stats.searched + stats.fetched + stats.not_found + len(failures)
            pace = done / stats.elapsed if done and stats.elapsed > 0 else 0.0
        if not left or not pace:
            return 0.0 if not left else None
        wait = self.waiting_for_quota()
        # While waiting, the next request goes when the quota says; the rest follow it.
        return left / pace if wait is None else wait + (left - 1) / pace


def _rate(rate: float | None, unit: str) -> str:
    if rate is None:
        return ""
    return f" · {rate:.0f} {unit}" if rate >= 100 else f" · {rate:.1f} {unit}"


def _both(figure: str, all_runs: int, this_run: int) -> str:
    """``figure`` (all runs), and this run's count when it differs."""
    return figure if all_runs == this_run else f"{figure} ({this_run} this run)"


def status(tally: Tally, wall: Callable[[], float] = time.time) -> str:
    """The status line: queries and documents (all runs, this run), documents a minute,
    429s, the wait for the quota and the ETA."""
    stats, written = tally.run.stats, tally.sink.written
    queries = f"{tally.queries_done}" + (f"/{tally.total}" if tally.total is not None else "")
    parts = [
        f"queries {_both(queries, tally.queries_done, stats.searched)}",
        f"docs {_both(str(tally.documents), tally.documents, written)}"
        + _rate(tally.per_minute, "docs/min"),
    ]
    if stats.not_found:
        parts.append(f"not found {stats.not_found}")
    if stats.failed:
        parts.append(f"failed {stats.failed}")
    parts.append(f"429s {stats.rate_limited}")
    wait = tally.waiting_for_quota()
    if wait is not None:
        parts.append(waiting_text(wait, wall))
    eta = tally.eta()
    parts.append(f"ETA {duration(eta) if eta is not None else '?'}")
    return " · ".join(parts)


_HEAD = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}


def summary(
    output: Output,
    tally: Tally,
    *,
    ending: str,
    out: str | None,
    state: str | None,
    emulator: bool,
    changed: str | None = None,
    rebuild: str = "",
) -> None:
    """The summary of a harvest, when it ends: ``ending`` ``done``, ``stopped`` or
    ``interrupted``; ``changed``: how ``out`` was changed under the harvest while it
    wrote it; ``rebuild``: the command that writes it again from the state."""
    run, stats = tally.run, tally.run.stats
    written, skipped, rate = tally.sink.written, tally.sink.skipped, tally.per_minute
    fields = dataclasses.asdict(stats)
    del fields["started"], fields["finished"]
    record: dict[str, Any] = {"ending": ending, "out": out, "state": state, **fields}
    record.update(
        written=written,
        already_in_file=skipped,
        queries_total=tally.total,
        queries_done=tally.queries_done,
        documents_total=tally.documents,
        documents_per_minute=None if rate is None else round(rate, 2),
        elapsed=stats.elapsed,
        output_changed=changed,
    )

    def lines() -> list[str]:
        before, repeated = tally.queries_searched_before, stats.repeated_queries
        notes = [f"skipped {before} searched before"] if before else []
        if repeated:
            notes.append(f"{repeated} repeated in the input, counted once")
        said = f" ({'; '.join(notes)})" if notes else ""
        head = f"{_HEAD[ending]} {plural(written, 'document')}"
        if stats.searched:
            head += f" from {plural(stats.searched, 'query', 'queries')}"
        elif written:
            head += ", from earlier searches"
        text = [
            f"{head} in {duration(stats.elapsed)} → {out or 'stdout'}",
            f"  this run: searched {stats.searched}{said} · results {stats.results}"
            f" · found {stats.unique_ids} new · fetched {stats.fetched} · not found "
            f"{stats.not_found} · failed {stats.failed} · 429s {stats.rate_limited}"
            + _rate(rate, "documents/min"),
        ]
        if state is not None or tally.total is not None:
            # "1 of 1 query done", "23 of 30 queries done": the noun follows the total.
            counted = tally.total if tally.total is not None else tally.queries_done
            queries = f"{tally.queries_done}" + (f" of {counted}" if tally.total else "")
            where = f"in {out}" if out is not None else "delivered"
            text.append(
                f"  all runs: {queries} {'query' if counted == 1 else 'queries'} done · "
                f"{plural(tally.documents, 'document')} {where}"
            )
        if skipped:
            text.append(f"  {skipped} already in {out}, not written again")
        if changed is not None:
            text.append(
                f"  {out} was changed while the harvest wrote it ({changed}): it does not hold "
                "what the figures say. Nothing is lost: the state holds every document; "
                f"rebuild the output from it, sending nothing: `{rebuild}`"
            )
        if run.failures:
            first = run.failures[0]
            words = describe(first.error)
            if len(words) > 400:  # a server may echo the query
                words = f"{words[:400]}… ({len(words):,} characters)"
            text.append(f"  first failure ({first.kind} {quoted(str(first.input))}): {words}")
        if state is not None and (ending != "done" or run.failures):
            text.append(f"  run the same command with --resume to continue (state: {state})")
        if emulator:
            text.append(
                "  served offline by the bundled emulator; sign in with `magisterium-async "
                "login` and drop --emulator to harvest the real service"
            )
        return text

    output.summary(record, lines)
