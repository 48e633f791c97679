"""What a harvest tells its user: the live status line, and the summary when it ends.

One process and the parent of ``--workers`` word their summaries with the same pieces
(the first line, the figures, the hints), and both print them through :class:`Output`:
lines for people, or one JSON object with ``--json``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._config import RateLimits
from .._harvest import Harvest
from ._errors import describe
from ._output import Output

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.spinner import Spinner

    from .._redis_harvest import Coordinator

__all__ = [
    "Counted",
    "Status",
    "combined_summary",
    "duration",
    "live",
    "summary",
]

_HEAD = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}
_EMULATOR_HINT = (
    "  served offline by the bundled emulator; drop --emulator and set "
    "MAGISTERIUM_TOKEN to harvest the real service"
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


def duration(value: float) -> str:
    """``42s``, ``3m07s``, ``2h05m``."""
    whole = round(value)
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Status:
    """The live status line: progress, rate, 429s and an ETA from the client's quota."""

    def __init__(
        self,
        run: Harvest,
        sink: Counted,
        total: int | None,
        quota: RateLimits,
        coordinator: Coordinator | None = None,
    ) -> None:
        self.run = run
        self.coordinator = coordinator
        self.sink = sink
        self.total = total
        self.quota = quota
        self._spinner: Spinner | None = None

    def eta(self) -> float | None:
        """Seconds left: the requests still to send ÷ the default pool's quota.

        Searches left, plus ids found and not yet fetched, plus the fetches the searches
        left should bring (at the rate of new ids per search so far). With the quota
        lifted, the rate observed so far stands in for it.
        """
        stats = self.run.stats
        if self.total is None or stats.searched == 0:
            return None
        failed = [f.kind for f in self.run.failures]
        searches_left = max(
            self.total
            - stats.searched
            - stats.skipped_queries
            - self._elsewhere()
            - failed.count("search"),
            0,
        )
        fetched = stats.fetched + stats.not_found + failed.count("fetch")
        fetches_left = max(stats.unique_ids - fetched, 0) + (
            searches_left * stats.unique_ids / stats.searched
        )
        per_second = self.quota.default / self.quota.period
        if math.isinf(per_second):
            done = stats.searched + fetched
            per_second = done / stats.elapsed if stats.elapsed > 0 else math.inf
        return (searches_left + fetches_left) / per_second if per_second > 0 else None

    def _elsewhere(self) -> int:
        return self.coordinator.skipped_queries if self.coordinator is not None else 0

    def line(self) -> str:
        """The status as one line."""
        stats = self.run.stats
        queries = f"{stats.searched + stats.skipped_queries + self._elsewhere()}"
        if self.total is not None:
            queries += f"/{self.total}"
        rate = self.sink.written / stats.elapsed if stats.elapsed > 0 else 0.0
        eta = self.eta()
        parts = [f"queries {queries}", f"docs {self.sink.written}", f"{rate:.1f}/s"]
        if stats.not_found:
            parts.append(f"not found {stats.not_found}")
        if stats.failed:
            parts.append(f"failed {stats.failed}")
        parts.append(f"429s {stats.rate_limited}")
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


def _head(ending: str, written: int, queries: int) -> str:
    noun = "document" if written == 1 else "documents"
    query_noun = "query" if queries == 1 else "queries"
    return f"{_HEAD[ending]} {written} {noun} from {queries} {query_noun}"


def _figures(figures: Mapping[str, int], skipped: str = "") -> str:
    return (
        f"  searched {figures['searched']}{skipped} · results {figures['results']}"
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
    *,
    ending: str,
    run: Harvest,
    sink: Counted,
    out: str | None,
    state: str | None,
    emulator: bool,
    coordinator: Coordinator | None,
    job: str | None,
) -> None:
    """The summary of one harvest process."""
    stats = run.stats
    fields = dataclasses.asdict(stats)
    fields.pop("started")
    fields.pop("finished")
    record: dict[str, Any] = {"ending": ending, "out": out, "state": state}
    record.update(fields, written=sink.written, already_in_file=sink.skipped)
    record.update(elapsed=stats.elapsed)
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
            f"{_head(ending, sink.written, stats.queries)}"
            f" in {seconds(stats.elapsed)} → {out or 'stdout'}",
            _figures(fields, skipped),
        ]
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

    def lines() -> list[str]:
        text = [
            f"{_head(ending, totals['written'], totals['queries'])} with {len(summaries)}"
            f" workers in {seconds(elapsed)} → {outs[0]} … {outs[-1]}",
            _figures(totals) + f" · job {job} on {redis} Redis",
            "  per worker: "
            + " · ".join(
                f"w{index} {(s or {}).get('written', '?')} docs"
                f"/{(s or {}).get('queries', '?')} queries"
                for index, s in enumerate(summaries, 1)
            ),
        ]
        resume = "" if ending != "done" or totals["failed"] else None
        text += _already(totals["already_in_file"], "the outputs")
        return text + _hints(resume, emulator)

    output.summary(record, lines)
