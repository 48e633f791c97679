"""What a harvest tells its user: the live status line, and the summary when it ends.

The figures come from :class:`~._tally.Tally`; this module words them, and prints the
summary through :class:`Output`: lines for people, or one JSON object with ``--json``.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from magisterium_async._cli._errors import describe
from magisterium_async._cli._output import Output, duration, waiting_text
from magisterium_async._cli.harvest._rebuild import rebuild_command
from magisterium_async._cli.harvest._tally import Tally
from magisterium_async._harvest import QUOTED, quoted

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.spinner import Spinner


__all__ = ["Status", "duration", "live", "summary"]

_HEAD = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}
_EMULATOR_HINT = (
    "  served offline by the bundled emulator; sign in with `magisterium-async login` "
    "and drop --emulator to harvest the real service"
)


def seconds(elapsed: float) -> str:
    """An elapsed time: ``1.25s`` under 10 s, else as :func:`duration`."""
    return f"{elapsed:.2f}s" if elapsed < 10 else duration(elapsed)


def _rate_text(rate: float | None, unit: str) -> str:
    """`` · 12.5 docs/min`` (``340`` once they are many); nothing for a run too short to
    have a rate."""
    if rate is None:
        return ""
    return f" · {rate:.0f} {unit}" if rate >= 100 else f" · {rate:.1f} {unit}"


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
            f"docs {_both(str(tally.documents), tally.documents, tally.documents_this_run)}"
            + _rate_text(tally.per_minute, "docs/min"),
        ]
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


def _shortened(text: str) -> str:
    """An error's words, which may quote the input (a server echoing the query), cut to
    twice what a message quotes of an input."""
    limit = 2 * QUOTED
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def summary(
    output: Output,
    tally: Tally,
    *,
    ending: str,
    out: str | None,
    state: str | None,
    emulator: bool,
    changed: str | None = None,
) -> None:
    """The summary of a harvest, when it ends; ``changed``: how ``out`` was changed under
    the harvest while it wrote it (see :attr:`JsonlWriter.changed`)."""
    run, sink = tally.run, tally.sink
    stats = run.stats
    fields = dataclasses.asdict(stats)
    fields.pop("started")
    fields.pop("finished")
    record: dict[str, Any] = {"ending": ending, "out": out, "state": state}
    record.update(fields, written=sink.written, already_in_file=sink.skipped)
    record.update(tally.record(), elapsed=stats.elapsed, output_changed=changed)

    def lines() -> list[str]:
        # Every figure counts distinct queries: a repeat in the input is said apart.
        before, repeated = tally.queries_searched_before, stats.repeated_queries
        notes = [f"skipped {before} searched before"] if before else []
        if repeated:
            notes.append(f"{repeated} repeated in the input, counted once")
        skipped = f" ({'; '.join(notes)})" if notes else ""
        text = [
            f"{_head(ending, sink.written, stats.searched)}"
            f" in {seconds(stats.elapsed)} → {out or 'stdout'}",
            _figures(fields, skipped) + _rate_text(tally.per_minute, "documents/min"),
        ]
        if state is not None or tally.total is not None:
            queries = f"{tally.queries_done}" + (
                f" of {tally.total}" if tally.total is not None else ""
            )
            where = f"in {out}" if out is not None else "delivered"
            documents = f" · {_plural(tally.documents, 'document')} {where}"
            # "1 of 1 query done", "23 of 30 queries done": the noun follows the total.
            counted = tally.total if tally.total is not None else tally.queries_done
            noun = "query" if counted == 1 else "queries"
            text.append(f"  all runs: {queries} {noun} done{documents}")
        text += _already(sink.skipped, out)
        if changed is not None:
            rebuild = f": `{rebuild_command(out, state)}`" if out and state else ""
            text.append(
                f"  {out} was changed while the harvest wrote it ({changed}): it does not hold "
                f"what the figures say. Nothing is lost: the state holds every document; "
                f"rebuild the output from it, sending nothing{rebuild}"
            )
        if run.failures:
            first = run.failures[0]
            what = f"{first.kind} {quoted(first.input)}"
            text.append(f"  first failure ({what}): {_shortened(describe(first.error))}")
        resumable = state is not None and (ending != "done" or bool(run.failures))
        resume = f" (state: {state})" if resumable else None
        return text + _hints(resume, emulator)

    output.summary(record, lines)
