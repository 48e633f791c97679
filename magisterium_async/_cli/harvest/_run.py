"""One harvest process: queries in, every document they find out, as JSON Lines; and what
it tells its user, computed in one place so that it agrees: its figures (:class:`Tally`),
the status line on a terminal (:func:`status`), the summary when it ends (:func:`summary`).

The arguments and the Redis named are checked first; then the state is held and made
(whole), the output opened and checked against what the state records of it, and its
mark recorded before any document is written (:class:`JsonlWriter`: fsync'd in small
batches, the state told a document was delivered only once it is on disk). Whatever
stops the harvest (its end, Ctrl-C, a full disk, a refused token), the writer is closed
first, then the harvest, which records what is on disk; then the summary. "This run" is
this process; "all runs" adds what the state held when it began.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from magisterium_async._cli._client import open_client
from magisterium_async._cli._errors import CliError, ExitCode, describe, unwritable
from magisterium_async._cli._output import Output, duration, plural, quoted, waiting_text
from magisterium_async._cli._status import status_line
from magisterium_async._cli.harvest._plan import Plan, dry_run, held, not_ours, plan
from magisterium_async._cli.harvest._rebuild import rebuild_command, rebuilt_name
from magisterium_async._config import RateLimits
from magisterium_async._errors import (
    MethodNotFoundError,
    OutputFileError,
    PlanRequiredError,
    RateLimitError,
    VersionNotSupportedError,
)
from magisterium_async._files import kind_of
from magisterium_async._harvest import (
    Harvest,
    JsonlWriter,
    StateSummary,
    harvest,
    hold,
)
from magisterium_async._models import Document
from magisterium_async._ratelimit import PoolStats

__all__ = ["Tally", "run_harvest", "status", "summary"]

_ENCODER = msgspec.json.Encoder()


class _Stdout:
    """JSON Lines on stdout, flushed line by line (a pipe cannot be fsync'd)."""

    changed = None

    def __init__(self, on_durable: Callable[[list[str]], object]) -> None:
        self.on_durable = on_durable
        self.written = self.skipped = self.existing = 0

    async def write(self, document: Document) -> None:
        try:
            sys.stdout.buffer.write(_ENCODER.encode(document) + b"\n")
            sys.stdout.buffer.flush()
        except OSError as exc:  # a reader gone, a full disk: said as for any --out
            raise unwritable(exc) from None
        self.written += 1
        self.on_durable([document.id])

    async def aclose(self) -> None:
        pass


async def run_harvest(args: argparse.Namespace, output: Output) -> int:
    """Run the harvest (or, ``--dry-run``, print its plan); returns the exit code."""
    where = await plan(args)
    await where.check_not_empty()  # stdin: counted only by reading it
    if args.dry_run:
        return await dry_run(where, args, output)
    if where.continued:
        output.note(
            f"magisterium-async: note: {where.out} and its state {where.state} hold a "
            "finished harvest: continuing it as --resume does (queries it answered are not "
            "searched again, documents it wrote are not written again)"
        )
    # Failures every later request would meet too stop the harvest; a dialect the server
    # does not understand, too, when --protocol named it (auto would have switched).
    fatal: tuple[type[Exception], ...] = (PlanRequiredError, RateLimitError)
    if args.protocol != "auto":
        fatal += (MethodNotFoundError, VersionNotSupportedError)
    # The client checks the Redis named (--redis) first: a refusal is exit 2 before any
    # file is made.
    async with open_client(args) as client:
        run = harvest(
            client,
            where.lines(),
            state=where.state,
            concurrency=args.concurrency,
            acknowledge="manual",
            fatal=fatal,
        )
        async with run:
            before, sink = await _prepare(where, run)
            tally = Tally(
                run,
                sink,
                total=where.total,
                quota=client.rate_limits,
                before=before,
                pool=lambda: client.stats.default,
            )
            ending = "interrupted"
            try:
                async with status_line(lambda: status(tally)):
                    try:
                        async for document in run:
                            await sink.write(document)
                    finally:
                        await sink.aclose()  # before the harvest closes: it records what is on disk
                ending = "done"
            except Exception:
                ending = "stopped"
                raise
            finally:
                if run.stats.queries or sink.written:
                    summary(
                        output,
                        tally,
                        ending=ending,
                        out=where.out,
                        state=where.state,
                        emulator=args.emulator,
                    )
    if sink.changed is not None:  # the file named is not what was written: the user's move
        return ExitCode.USAGE
    # One code whatever failed first: the summary says what it was.
    return ExitCode.PARTIAL if run.failures else ExitCode.OK


async def _prepare(where: Plan, run: Harvest) -> tuple[StateSummary | None, JsonlWriter | _Stdout]:
    """Hold the state (made whole where there is none), read what it held before this
    run, and open the output it says the harvest wrote, recording its mark."""
    state = None if where.state is None else await hold(run)
    before = None if state is None else await state.summary()
    if where.out is None:
        return before, _Stdout(run.acknowledge)
    out, mark = where.out, None if before is None else before.output
    if before is not None and mark is None and kind_of(out) == "file":
        raise not_ours(out, f"its state {where.state} records no output")
    if before is not None and mark is not None and mark.offset and kind_of(out) == "missing":
        raise _gone(out, where.state or "", mark.path, before.documents.get("delivered", 0))

    def durable(document_ids: list[str]) -> None:
        run.acknowledge(document_ids, output=writer.mark)

    pending = set() if state is None else await state.undelivered_ids()
    writer = JsonlWriter(out, on_durable=durable, mark=mark, pending=pending)
    try:
        await writer.open()
    except OutputFileError as exc:  # in use by another harvest, or not as this one left it
        if isinstance(exc.__cause__, OSError):
            raise  # said as every write that failed is (describe)
        raise CliError(_with_rebuild(str(exc), out, where.state)) from None
    # A torn last line cut: the writer says so (its warning on the harvest's logger).
    if state is not None and writer.mark is not None:
        # Before any document: a harvest killed in its first batch still owns its output.
        # Records a killed run wrote and did not acknowledge are delivered now, in the
        # order of the file (as the state must know them to rebuild it).
        await state.record((), (), writer.recovered, writer.mark)
    return before, writer


def _gone(out: str, state: str, recorded: str, documents: int) -> CliError:
    """The refusal of a missing ``out`` whose state records documents written to an
    output: this one (deleted since), or, ``recorded``, another file."""
    written = f"{plural(documents, 'document')} written there"
    if recorded and recorded != os.path.abspath(out):
        return CliError(
            f"{state} is the state of a harvest into {recorded} ({written}), not into {out}, "
            f"which does not exist: give --out {shlex.quote(recorded)} to continue that "
            f"harvest; or write its output to {out} from the state, sending nothing "
            f"(`magisterium-async rebuild {shlex.quote(state)} --out {shlex.quote(out)}`), "
            "and the harvest continues into it",
        )
    return CliError(
        f"{out} is gone, but its harvest's state {state} records {written}; resuming would "
        "not write them again. Put the file back to continue, or rebuild it from the state, "
        f"sending nothing: `{rebuild_command(out, state)}` (then `mv "
        f"{shlex.quote(rebuilt_name(out))} {shlex.quote(out)}` and run again); or start "
        f"anew: remove {state} (every document is fetched again), or give another --out "
        "and --state",
    )


def _with_rebuild(message: str, out: str, state: str | None) -> str:
    """``message`` (a refusal of ``out``) with how to rebuild it from ``state``, sending
    nothing, unless ``out`` is only in use by another harvest (no damage to repair)."""
    if state is None or held(out) is not None:
        return message
    rebuilt = rebuilt_name(out)
    return (
        f"{message}. Or rebuild it from the state, sending nothing: "
        f"`{rebuild_command(out, state)}` writes {rebuilt} as the harvest wrote {out}, and "
        f"the harvest continues into it (`--out {shlex.quote(rebuilt)} --state "
        f"{shlex.quote(state)} --resume`)"
    )


RATE_AFTER = 10.0
"""Seconds a run must last before it shows a rate of documents a minute."""


class Tally:
    """A harvest's figures, read live: this run's (``run``'s stats, what the ``sink``
    wrote), all runs' (what the state held ``before``), the pace and the ETA."""

    def __init__(
        self,
        run: Harvest,
        sink: JsonlWriter | _Stdout,
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
        held = before or StateSummary({}, {}, None)
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
) -> None:
    """The summary of a harvest, when it ends (``ending``: ``done``, ``stopped`` or
    ``interrupted``), and how ``out`` was changed under it while it wrote it, if it was."""
    run, stats, changed = tally.run, tally.run.stats, tally.sink.changed
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
                f"rebuild the output from it, sending nothing: "
                f"`{rebuild_command(out or '', state or '')}`"
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
