"""One harvest process: queries in, every document they find out, as JSON Lines.

Documents go to ``--out`` through :class:`JsonlWriter` (written, flushed and fsync'd in
small batches; the harvest's state learns a document was delivered only once it is on
disk), so an interrupted harvest loses at most the lines in progress and ``--resume``
writes every document exactly once. A live status line goes to stderr when it is a
terminal, and a summary when the harvest ends.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import msgspec

from magisterium_async._cli._client import open_client
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output
from magisterium_async._cli.harvest._plan import Plan, not_continuable, plan, unwritable
from magisterium_async._cli.harvest._rebuild import rebuild_command, rebuilt_name
from magisterium_async._cli.harvest._summary import Status, live, summary
from magisterium_async._cli.harvest._tally import Before, Tally
from magisterium_async._errors import (
    AuthenticationError,
    MagisteriumError,
    MethodNotFoundError,
    OutputFileError,
    PlanRequiredError,
    RateLimitError,
    StateError,
    VersionNotSupportedError,
)
from magisterium_async._harvest import (
    Harvest,
    HarvestLock,
    HarvestState,
    JsonlWriter,
    OutputMark,
    harvest_holding,
)
from magisterium_async._models import Document, SearchResult
from magisterium_async._ratelimit import SchedulerStats

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["run_harvest"]

_FATAL: tuple[type[MagisteriumError], ...] = (
    AuthenticationError,
    PlanRequiredError,
    RateLimitError,
)
_WRONG_DIALECT = (MethodNotFoundError, VersionNotSupportedError)
_ENCODER = msgspec.json.Encoder()


class _StopHarvest(Exception):
    """A failure every later request would meet too: it ends the harvest."""

    def __init__(self, error: MagisteriumError) -> None:
        super().__init__(str(error))
        self.error = error


class _FailFast:
    """The client, but a refused token, a missing plan or an exhausted quota stops the
    harvest instead of being recorded once per query; and so does a dialect the server
    does not understand, when ``--protocol`` named it (``auto`` would have switched)."""

    def __init__(self, client: AsyncMagisterium, protocol: str) -> None:
        self._client = client
        self._fatal: tuple[type[MagisteriumError], ...] = (
            _FATAL if protocol == "auto" else (*_FATAL, *_WRONG_DIALECT)
        )

    @property
    def stats(self) -> SchedulerStats:
        return self._client.stats

    async def search(self, query: str) -> list[SearchResult]:
        try:
            return await self._client.search(query)
        except self._fatal as exc:
            raise _StopHarvest(exc) from exc

    async def fetch(self, document_id: str) -> Document | None:
        try:
            return await self._client.fetch(document_id)
        except self._fatal as exc:
            raise _StopHarvest(exc) from exc


class _Sink(Protocol):
    written: int
    skipped: int

    async def write(self, document: Document) -> bool: ...

    async def aclose(self) -> None: ...


class _StdoutSink:
    """JSON Lines on stdout, flushed line by line (a pipe cannot be fsync'd)."""

    def __init__(self, on_durable: Callable[[list[str]], object]) -> None:
        self.on_durable = on_durable
        self.written = 0
        self.skipped = 0

    async def write(self, document: Document) -> bool:
        sys.stdout.buffer.write(_ENCODER.encode(document) + b"\n")
        sys.stdout.buffer.flush()
        self.written += 1
        self.on_durable([document.id])
        return True

    async def aclose(self) -> None:
        pass


async def run_harvest(invocation: Invocation) -> int:
    """Run the harvest; returns the exit code."""
    args = invocation.args
    where = plan(args)
    try:
        await where.check_not_empty()  # stdin: counted only by reading it
    except BaseException:
        where.close()
        raise
    if where.continued:
        invocation.output.note(
            f"magisterium-async: note: {where.out} and its state {where.state} hold a "
            "finished harvest: continuing it as --resume does (queries it answered are not "
            "searched again, documents it wrote are not written again)"
        )
    lock = None if where.state is None else HarvestLock(where.state, "state", StateError)
    try:
        try:
            if lock is not None:
                lock.acquire()  # before the state is read: a second harvest stops here
            before, recorded, pending = await _before(where)
        except StateError as exc:  # held by another harvest, or not a harvest's state
            raise CliError(str(exc), ExitCode.USAGE) from None
        except OSError as exc:
            raise unwritable("--state", where.state or "", exc) from None
        async with open_client(args) as client:
            run = harvest_holding(
                lock,
                _FailFast(client, args.protocol),
                where.lines(),
                state=where.state,
                concurrency=args.concurrency,
                acknowledge="manual",
            )
            sink: _Sink = (
                _file_sink(where.out, run, recorded, pending)
                if where.out is not None
                else _StdoutSink(run.acknowledge)
            )
            tally = Tally(
                run,
                sink,
                total=where.total,
                quota=client.rate_limits,
                before=before,
                pool=lambda: client.stats.default,
                in_file=where.out is not None,
            )
            return await _drive(where, run, sink, tally, invocation.output, args.emulator)
    except StateError as exc:
        raise CliError(str(exc)) from None
    finally:
        where.close()
        if lock is not None:
            lock.release()


async def _before(where: Plan) -> tuple[Before, OutputMark | None, set[str]]:
    """What the state holds before this run (nothing for a new harvest), where it records
    that the output was left, and the ids it fetched and did not deliver (what a crash may
    have left after that mark); :class:`CliError` for an output it did not write, or one
    deleted since."""
    before, recorded, pending = Before(), None, set()
    resuming = where.state is not None and _there(where.state)
    if where.state is not None and resuming:
        opened = await HarvestState.open(where.state, new_run=False)
        try:
            before, recorded = Before.of(await opened.summary()), await opened.output()
            pending = await opened.undelivered_ids()
        finally:
            await opened.aclose()
    if where.out is None:
        return before, recorded, pending
    if recorded is not None and recorded.offset and not _there(where.out):
        delivered = before.documents_delivered
        raise CliError(
            f"{where.out} is gone, but its harvest's state {where.state} records "
            f"{delivered} document{'s' if delivered != 1 else ''} written there; resuming "
            "would not write them again. Put the file back to continue, or rebuild it from "
            f"the state, sending nothing: `{rebuild_command(where.out, where.state or '')}` "
            f"(then `mv {shlex.quote(rebuilt_name(where.out))} {shlex.quote(where.out)}` and "
            f"run again); or start anew: remove {where.state} (every document is fetched "
            "again), or give another --out and --state",
            ExitCode.USAGE,
        )
    if recorded is None and _regular(where.out):
        # --resume to a file no state says this harvest wrote: a user's file, or the
        # output of another harvest. Left alone.
        if not resuming:
            raise not_continuable(where.out, where.state or "")
        raise CliError(
            f"{where.out} exists and this harvest did not write it (its state {where.state} "
            "records no output); it was left as it is. Give another --out to harvest into a "
            "new file (or --state, the state of the harvest that wrote it)",
            ExitCode.USAGE,
        )
    return before, recorded, pending


def _there(path: str) -> bool:
    """Whether anything is at ``path`` (a dangling symbolic link counts)."""
    return os.path.lexists(path)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _file_sink(
    path: str, run: Harvest, recorded: OutputMark | None, pending: set[str]
) -> JsonlWriter:
    """The writer of ``--out``: it appends only to the file the state says it wrote, as it
    left it, and each batch it syncs is recorded with where the file then ends."""

    def durable(document_ids: list[str]) -> None:
        run.acknowledge(document_ids, output=writer.mark)

    writer = JsonlWriter(path, on_durable=durable, mark=recorded, pending=pending)
    return writer


def _with_rebuild(message: str, out: str, state: str | None) -> str:
    """``message`` (a refusal of ``out``) with how to rebuild it from ``state``, sending
    nothing, unless ``out`` is only in use by another harvest (no damage to repair)."""
    if state is None:
        return message
    try:
        with HarvestLock(out, "output", OutputFileError):
            pass
    except (OutputFileError, OSError):
        return message
    rebuilt, command = rebuilt_name(out), rebuild_command(out, state)
    return (
        f"{message}. Or rebuild it from the state, sending nothing: `{command}` "
        f"writes {rebuilt} as the harvest wrote {out}, and the harvest continues into it "
        f"(`--out {shlex.quote(rebuilt)} --state {shlex.quote(state)} --resume`)"
    )


async def _open_output(sink: JsonlWriter, state: str | None, output: Output) -> None:
    """Open ``--out`` (its lock first, then checked against the state's record of it), and
    record it."""
    try:
        await sink.open()
    except OutputFileError as exc:  # held by another harvest, or not as this one left it
        raise CliError(_with_rebuild(str(exc), sink.path, state), ExitCode.USAGE) from None
    except OSError as exc:
        raise unwritable("--out", sink.path, exc) from None
    if sink.cut is not None:
        start, end = sink.cut
        output.note(
            f"magisterium-async: note: {sink.path} ended in an incomplete line (bytes {start} "
            f"to {end}), left by the run that was killed while writing it: cut, and written "
            "again whole"
        )
    if sink.mark is not None and state is not None:
        # Before any document: a harvest killed in its first batch still owns its output.
        # Records a killed run wrote and did not acknowledge are delivered now, in the
        # order of the file (as the state must know them to rebuild it), not handed over
        # again.
        opened = await HarvestState.open(state, new_run=False)
        try:
            await opened.record_fetches((), sink.recovered, sink.mark)
        finally:
            await opened.aclose()


async def _drive(
    where: Plan, run: Harvest, sink: _Sink, tally: Tally, output: Output, emulator: bool
) -> int:
    display = live(Status(tally))
    ending = "interrupted"
    fatal: MagisteriumError | None = None
    try:
        if display is not None:
            display.start()
        if isinstance(sink, JsonlWriter):
            await _open_output(sink, where.state, output)
        async with run:
            try:
                async for document in run:
                    await sink.write(document)
            except OSError as exc:
                raise unwritable("--out", where.out, exc) from None
            finally:
                try:
                    await sink.aclose()  # before the harvest closes: it records what is on disk
                except OSError as exc:
                    raise unwritable("--out", where.out, exc) from None
        ending = "done"
    except _StopHarvest as stop:
        ending, fatal = "stopped", stop.error
    except Exception:
        ending = "stopped"
        raise
    finally:
        if display is not None:
            display.stop()
        changed = sink.changed if isinstance(sink, JsonlWriter) else None
        if run.stats.queries or sink.written:
            summary(
                output,
                tally,
                ending=ending,
                out=where.out,
                state=where.state,
                emulator=emulator,
                changed=changed,
            )
    if fatal is not None:
        raise fatal
    if changed is not None:  # the file named is not what was written: the user's move
        return ExitCode.USAGE
    # One code whatever failed first: the summary says what it was.
    return ExitCode.PARTIAL if run.failures else ExitCode.OK
