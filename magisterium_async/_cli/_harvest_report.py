"""What a harvest tells its user: the live status line, and the summary when it ends.

One process and the parent of ``--workers`` word their summaries with the same pieces
(the first line, the figures, the hints), and both print them through :class:`Output`:
lines for people, or one JSON object with ``--json``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._config import RateLimits
from .._harvest import Harvest
from .._ratelimit import PoolStats
from .._state_store import StateSummary
from ._errors import describe
from ._output import Output
from ._status import duration, waiting_text

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.spinner import Spinner

    from .._redis_harvest import Coordinator

__all__ = [
    "Before",
    "Counted",
    "Status",
    "Tally",
    "combined_summary",
    "duration",
    "live",
    "summary",
]

_HEAD = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}
_EMULATOR_HINT = (
    "  served offline by the bundled emulator; sign in with `magisterium-async login` "
    "and drop --emulator to harvest the real service"
)


class Counted(Protocol):
    """Where the documents go, as far as the report is concerned."""

    @property
    def written(self) -> int: ...

    @property
    def skipped(self) -> int: ...


def seconds(elapsed: float) -> str:
    """An elapsed time: ``1.25s`` under 10 s, else as :func:`duration`."""
    return f"{elapsed:.2f}s" if elapsed < 10 else duration(elapsed)


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

    The one place they are computed, so the status line and the summary agree. "All
    runs" adds what the state held at the start (:class:`Before`) and, with ``--job``,
    what other workers took; "this run" is this process since it started.
    """

    def __init__(
        self,
        run: Harvest,
        sink: Counted,
        *,
        total: int | None,
        quota: RateLimits,
        before: Before | None = None,
        coordinator: Coordinator | None = None,
        pool: Callable[[], PoolStats] | None = None,
        in_file: bool = False,
    ) -> None:
        self.run = run
        self.sink = sink
        self.total = total
        """Queries in the input, when it can be counted (not stdin)."""
        self.quota = quota
        self.before = before or Before()
        self.coordinator = coordinator
        self._pool = pool
        self._in_file = in_file

    def _failed(self, kind: str) -> int:
        return sum(1 for failure in self.run.failures if failure.kind == kind)

    @property
    def queries_this_run(self) -> int:
        """Queries searched by this run."""
        return self.run.stats.searched

    @property
    def queries_done(self) -> int:
        """Queries answered, over all runs: searched now or before, or repeated (a failed
        search is not done: ``--resume`` tries it again)."""
        stats = self.run.stats
        return stats.searched + stats.skipped_queries

    @property
    def queries_elsewhere(self) -> int:
        """Queries another worker of the job took (``--job``)."""
        return self.coordinator.skipped_queries if self.coordinator is not None else 0

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
    def per_minute(self) -> float:
        """Documents written a minute, by this run: over at least one quota period, so
        the burst a fresh quota allows does not read as the pace (with the quota lifted,
        over the time elapsed)."""
        elapsed = self.run.stats.elapsed
        if elapsed <= 0:
            return 0.0
        if math.isfinite(self.quota.default):
            elapsed = max(elapsed, self.quota.period)
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
        taken = self.queries_done + self.queries_elsewhere + self._failed("search")
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
        """The figures for a JSON summary."""
        return {
            "queries_total": self.total,
            "queries_done": self.queries_done,
            "documents_total": self.documents,
            "documents_per_minute": round(self.per_minute, 2),
        }


def _rate_text(rate: float) -> str:
    """Documents a minute: ``12.5``, or ``340`` once they are many."""
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.1f}"


def _both(figure: str, all_runs: int, this_run: int) -> str:
    """``figure`` (all runs), and this run's count when it differs."""
    return figure if all_runs == this_run else f"{figure} ({this_run} this run)"


class Status:
    """The live status line: queries and documents (all runs, this run), documents a
    minute, 429s, the wait for the quota and the ETA."""

    def __init__(self, tally: Tally, wall: Callable[[], float] = time.time) -> None:
        self.tally = tally
        self._wall = wall
        self._spinner: Spinner | None = None

    def line(self) -> str:
        """The status as one line."""
        tally = self.tally
        stats = tally.run.stats
        queries = f"{tally.queries_done}" + (f"/{tally.total}" if tally.total is not None else "")
        parts = [
            f"queries {_both(queries, tally.queries_done, tally.queries_this_run)}",
            f"docs {_both(str(tally.documents), tally.documents, tally.documents_this_run)}",
            f"{_rate_text(tally.per_minute)} docs/min",
        ]
        if tally.queries_elsewhere:
            parts.append(f"{tally.queries_elsewhere} queries to other workers")
        if stats.not_found:
            parts.append(f"not found {stats.not_found}")
        if stats.failed:
            parts.append(f"failed {stats.failed}")
        parts.append(f"429s {stats.rate_limited}")
        wait = tally.waiting_for_quota()
        if wait is not None:
            parts.append(waiting_text(wait, self._wall))
        eta = tally.eta()
        parts.append(f"ETA {duration(eta) if eta is not None else '?'}")
        return " · ".join(parts)

    def __rich__(self) -> RenderableType:
        from rich.spinner import Spinner

        if self._spinner is None:
            self._spinner = Spinner("dots", style="cyan")
        self._spinner.update(text=self.line())
        return self._spinner


def live(status: Status) -> Any:
    """A rich ``Live`` display of ``status`` on stderr, or ``None`` (not a terminal, no rich)."""
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        return None
    return Live(status, console=Console(stderr=True), refresh_per_second=4, transient=True)


_PLURALS = {"document": "documents", "query": "queries"}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun if count == 1 else _PLURALS[noun]}"


def _head(ending: str, documents: int, searched: int) -> str:
    """``Harvested 40 documents from 30 queries``: this run's, and what it searched."""
    head = f"{_HEAD[ending]} {_plural(documents, 'document')}"
    if searched:
        return f"{head} from {_plural(searched, 'query')}"
    return f"{head}, from earlier searches" if documents else head


def _figures(figures: Mapping[str, int], skipped: str = "") -> str:
    return (
        f"  this run: searched {figures['searched']}{skipped} · results {figures['results']}"
        f" · new documents {figures['unique_ids']} · not found {figures['not_found']}"
        f" · failed {figures['failed']} · 429s {figures['rate_limited']}"
    )


def _already(already: int, where: str | None) -> list[str]:
    return [f"  {already} already in {where}, not written again"] if already else []


def _hints(resume: str | None, emulator: bool) -> list[str]:
    lines = []
    if resume is not None:
        lines.append(f"  run the same command with --resume to continue{resume}")
    if emulator:
        lines.append(_EMULATOR_HINT)
    return lines


def summary(
    output: Output,
    tally: Tally,
    *,
    ending: str,
    out: str | None,
    state: str | None,
    emulator: bool,
    job: str | None,
) -> None:
    """The summary of one harvest process."""
    run, sink, coordinator = tally.run, tally.sink, tally.coordinator
    stats = run.stats
    fields = dataclasses.asdict(stats)
    fields.pop("started")
    fields.pop("finished")
    record: dict[str, Any] = {"ending": ending, "out": out, "state": state}
    record.update(fields, written=sink.written, already_in_file=sink.skipped)
    record.update(tally.record(), elapsed=stats.elapsed)
    if coordinator is not None:
        record.update(
            job=job,
            queries_elsewhere=coordinator.skipped_queries,
            ids_elsewhere=coordinator.skipped_ids,
        )

    def lines() -> list[str]:
        skipped = (
            f" (skipped {stats.skipped_queries}: repeated or searched before)"
            if stats.skipped_queries
            else ""
        )
        text = [
            f"{_head(ending, sink.written, stats.searched)}"
            f" in {seconds(stats.elapsed)} → {out or 'stdout'}",
            _figures(fields, skipped) + f" · {_rate_text(tally.per_minute)} documents/min",
        ]
        if state is not None or tally.total is not None:
            queries = f"{tally.queries_done}" + (
                f" of {tally.total}" if tally.total is not None else ""
            )
            where = f"in {out}" if out is not None else "delivered"
            documents = f" · {_plural(tally.documents, 'document')} {where}"
            text.append(f"  all runs: {queries} queries done{documents}")
        if coordinator is not None:
            text.append(
                f"  job {job}: left to other workers {coordinator.skipped_queries} queries"
                f" and {coordinator.skipped_ids} documents"
            )
        text += _already(sink.skipped, out)
        if run.failures:
            first = run.failures[0]
            text.append(f"  first failure ({first.kind} {first.input!r}): {describe(first.error)}")
        resumable = state is not None and (ending != "done" or bool(run.failures))
        resume = f" (state: {state})" if resumable else None
        return text + _hints(resume, emulator)

    output.summary(record, lines)


SUMMED = (
    "queries",
    "searched",
    "skipped_queries",
    "results",
    "unique_ids",
    "fetched",
    "resumed",
    "yielded",
    "not_found",
    "failed",
    "rate_limited",
    "written",
    "already_in_file",
    "documents_total",
)
"""The figures of the workers' summaries the parent of ``--workers`` adds up."""


def combined_summary(
    output: Output,
    *,
    ending: str,
    summaries: Sequence[Mapping[str, Any] | None],
    outs: Sequence[str],
    states: Sequence[str],
    job: str,
    redis: str,
    elapsed: float,
    emulator: bool,
) -> None:
    """The summary of ``--workers``: the workers' figures added up, and each worker's."""
    totals = {key: sum(int((s or {}).get(key, 0)) for s in summaries) for key in SUMMED}
    record: dict[str, Any] = {"ending": ending, "workers": len(summaries), "job": job}
    record.update(redis=redis, out=list(outs), state=list(states))
    record.update(totals, elapsed=elapsed, per_worker=list(summaries))

    rate = totals["written"] * 60 / elapsed if elapsed > 0 else 0.0
    # Each query is taken by one worker: the workers' queries done add up.
    done = sum(int((s or {}).get("queries_done", 0)) for s in summaries)
    total = next((s["queries_total"] for s in summaries if s and s.get("queries_total")), None)
    record.update(queries_total=total, queries_done=done)
    record.update(documents_per_minute=round(rate, 2))
    queries = f"{done}" + (f" of {total}" if total is not None else "")

    def lines() -> list[str]:
        text = [
            f"{_head(ending, totals['written'], totals['searched'])} with {len(summaries)}"
            f" workers in {seconds(elapsed)} → {outs[0]} … {outs[-1]}",
            _figures(totals) + f" · {_rate_text(rate)} documents/min",
            f"  all runs: {queries} queries done"
            f" · {_plural(totals['documents_total'], 'document')} in the outputs"
            f" · job {job} on {redis} Redis",
            "  per worker: "
            + " · ".join(
                f"w{index} {(s or {}).get('written', '?')} docs"
                f"/{(s or {}).get('searched', '?')} queries"
                for index, s in enumerate(summaries, 1)
            ),
        ]
        resume = "" if ending != "done" or totals["failed"] else None
        text += _already(totals["already_in_file"], "the outputs")
        return text + _hints(resume, emulator)

    output.summary(record, lines)
