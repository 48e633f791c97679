"""One harvest process: queries in, every document they find out, as JSON Lines.

The arguments and the Redis named are checked first; then the state is held and made
(whole), the output opened and checked against what the state records of it, and its
mark recorded before any document is written (:class:`JsonlWriter`: fsync'd in small
batches, the state told a document was delivered only once it is on disk). Whatever
stops the harvest (its end, Ctrl-C, a full disk, a refused token), the writer is closed
first, then the harvest, which records what is on disk; then the summary.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable

import msgspec

from magisterium_async._cli._client import open_client
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output, plural
from magisterium_async._cli._status import status_line
from magisterium_async._cli.harvest._plan import Plan, held, not_ours, plan, unwritable
from magisterium_async._cli.harvest._rebuild import rebuild_command, rebuilt_name
from magisterium_async._cli.harvest._report import Tally, status, summary
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
    why_not_written,
)
from magisterium_async._models import Document

__all__ = ["run_harvest"]

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
            raise CliError(f"cannot write stdout: {why_not_written(exc)}", ExitCode.USAGE) from None
        self.written += 1
        self.on_durable([document.id])

    async def aclose(self) -> None:
        pass


async def run_harvest(invocation: Invocation) -> int:
    """Run the harvest; returns the exit code."""
    args, output = invocation.args, invocation.output
    where = await plan(args)
    await where.check_not_empty()  # stdin: counted only by reading it
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
            before, sink = await _prepare(where, run, output)
            tally = Tally(
                run,
                sink,
                total=where.total,
                quota=client.rate_limits,
                before=before,
                pool=lambda: client.stats.default,
            )
            return await _drive(where, run, sink, tally, output, args.emulator)


async def _prepare(
    where: Plan, run: Harvest, output: Output
) -> tuple[StateSummary | None, JsonlWriter | _Stdout]:
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
            raise unwritable("--out", out, exc.__cause__) from None
        raise CliError(_with_rebuild(str(exc), out, where.state), ExitCode.USAGE) from None
    if writer.cut is not None:
        output.note(
            f"magisterium-async: note: {out} ended in an incomplete line (bytes "
            f"{writer.cut[0]} to {writer.cut[1]}), left by a run that stopped while writing "
            "it (killed, or its disk full): cut, and written again whole"
        )
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
            ExitCode.USAGE,
        )
    return CliError(
        f"{out} is gone, but its harvest's state {state} records {written}; resuming would "
        "not write them again. Put the file back to continue, or rebuild it from the state, "
        f"sending nothing: `{rebuild_command(out, state)}` (then `mv "
        f"{shlex.quote(rebuilt_name(out))} {shlex.quote(out)}` and run again); or start "
        f"anew: remove {state} (every document is fetched again), or give another --out "
        "and --state",
        ExitCode.USAGE,
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


async def _drive(
    where: Plan,
    run: Harvest,
    sink: JsonlWriter | _Stdout,
    tally: Tally,
    output: Output,
    emulator: bool,
) -> int:
    ending = "interrupted"
    try:
        async with status_line(lambda: status(tally)):
            try:
                async for document in run:
                    await sink.write(document)
            finally:
                await sink.aclose()  # before the harvest closes: it records what is on disk
        ending = "done"
    except OutputFileError as exc:
        ending = "stopped"
        if isinstance(exc.__cause__, OSError) and where.out is not None:  # a full disk
            raise unwritable("--out", where.out, exc.__cause__) from None
        raise
    except Exception:
        ending = "stopped"
        raise
    finally:
        if run.stats.queries or sink.written:
            rebuild = "" if where.out is None else rebuild_command(where.out, where.state or "")
            summary(
                output,
                tally,
                ending=ending,
                out=where.out,
                state=where.state,
                emulator=emulator,
                changed=sink.changed,
                rebuild=rebuild,
            )
    if sink.changed is not None:  # the file named is not what was written: the user's move
        return ExitCode.USAGE
    # One code whatever failed first: the summary says what it was.
    return ExitCode.PARTIAL if run.failures else ExitCode.OK
