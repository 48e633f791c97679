"""The ``rebuild`` command: a harvest's output written again from its state, sending nothing.

The state keeps every delivered document as the harvest wrote it, in the order of the
output's lines: JSON Lines rebuilt from it are the output, byte for byte, as the harvest
left it; ``--format csv`` writes the same documents as a table. Only a new file is
written, beside its final name first and linked there once whole (an interrupted rebuild
leaves nothing at ``--out``), or stdout, a pipe or a device, as a stream. A JSON Lines
file rebuilt becomes the harvest's output: the state records it, so the harvest continues
into it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import secrets
import shlex
import sys
from collections.abc import Iterable
from typing import BinaryIO

import anyio.to_thread

from magisterium_async._cli._command import Command
from magisterium_async._cli._errors import CliError, ExitCode, unwritable
from magisterium_async._cli._output import Output, plural
from magisterium_async._errors import StateError
from magisterium_async._files import describe, kind_of
from magisterium_async._harvest import HarvestLock, HarvestState, JsonlWriter

__all__ = ["COMMAND", "CSV_COLUMNS", "rebuild_command", "rebuilt_name"]

CSV_COLUMNS = ("id", "title", "author", "ref", "text", "extra", "queries")
"""The columns of ``--format csv``: a document's fields; ``extra`` (an object) and
``queries`` (a list) as JSON text."""

_EPILOG = """\
The state of a harvest (FILE.state.sqlite beside its --out) keeps every document it
delivered, as written. JSON Lines rebuilt from it are the output line for line as the
harvest wrote it, and become the harvest's output: continue the harvest into the rebuilt
file with --out FILE --state STATE --resume, or move it in place of the old one and run
the harvest as before. --format csv writes the same documents as CSV (UTF-8, a header
row; extra and queries as JSON text). Nothing is sent: no quota is spent. The rebuild
writes only a new file; a --out that exists is refused."""


def rebuilt_name(out: str) -> str:
    """Where the refusals suggest rebuilding ``out``: ``docs.jsonl`` → ``docs.rebuilt.jsonl``."""
    stem, ext = os.path.splitext(out)
    return f"{stem}.rebuilt{ext or '.jsonl'}"


def rebuild_command(out: str, state: str) -> str:
    """The command line that rebuilds ``out`` from ``state``, as a refusal quotes it."""
    return f"magisterium-async rebuild {shlex.quote(state)} --out {shlex.quote(rebuilt_name(out))}"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("state", metavar="STATE", help="the harvest's state (FILE.state.sqlite)")
    parser.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="the new file to write (refused if it exists; default: stdout)",
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "csv"),
        default="jsonl",
        help="jsonl: the harvest's output as written (default); csv: a table of the documents",
    )


class _Sink:
    """Records out as bytes (blocking: written off the event loop), counted."""

    def __init__(self, file: BinaryIO, form: str) -> None:
        self.file, self.form = file, form
        self.size = self.count = 0
        if form == "csv":
            self._put(_row(CSV_COLUMNS))

    def _put(self, data: bytes) -> None:
        self.file.write(data)
        self.size += len(data)

    def write(self, records: list[tuple[int, bytes]]) -> None:
        for _, record in records:
            self.count += 1
            if self.form == "jsonl":
                self._put(record + b"\n")
                continue
            value = json.loads(record)
            self._put(
                _row(
                    json.dumps(value[c] if value.get(c) is not None else [], ensure_ascii=False)
                    if c in ("extra", "queries")
                    else str(value.get(c) or "")
                    for c in CSV_COLUMNS
                )
            )
        self.file.flush()


def _row(cells: Iterable[str]) -> bytes:
    text = io.StringIO()
    csv.writer(text).writerow(cells)
    return text.getvalue().encode("utf-8")


def _open(out: str | None, stream: bool) -> tuple[BinaryIO, str | None]:
    """The file to write (blocking: a FIFO's open waits for its reader): stdout, the
    stream ``out`` names, or a new file beside ``out``, whose path is returned."""
    if out is None:
        return sys.stdout.buffer, None
    if stream:
        return open(out, "ab"), None
    directory, name = os.path.split(os.path.abspath(out))
    building = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.rebuilding")
    return open(building, "xb"), building


def _close(file: BinaryIO, out: str, building: str | None, whole: bool) -> bool:
    """Close ``file``; a new file, ``whole``, is linked at ``out`` once on disk (never over
    a file: one made there meanwhile is refused): whether it was."""
    try:
        if building is None or not whole:
            return False
        os.fsync(file.fileno())
        os.link(building, out)
        return True
    finally:
        if file is not sys.stdout.buffer:
            file.close()
        if building is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(building)


async def _write(state: HarvestState, out: str | None, stream: bool, form: str) -> _Sink:
    """The records of ``state`` written to ``out``; a JSON Lines file made anew becomes
    the harvest's output (its mark recorded)."""
    try:
        file, building = await anyio.to_thread.run_sync(_open, out, stream)
        whole = False
        try:
            sink, after = _Sink(file, form), 0
            while page := await state.lines(after):
                await anyio.to_thread.run_sync(sink.write, page)
                after = page[-1][0]
            whole = True
        finally:
            made = await anyio.to_thread.run_sync(_close, file, out or "", building, whole)
    except FileExistsError:
        raise _exists(out or "", "a file") from None
    except OSError as exc:
        raise unwritable(exc, "--out", out) from None
    if made and form == "jsonl":  # its mark, as the writer reads it, is what a resume checks
        async with JsonlWriter(out or "") as output:
            await state.record((), (), (), output.mark)
    return sink


def _exists(out: str, what: str) -> CliError:
    return CliError(
        f"--out {out} exists ({what}): the rebuild writes only a new file and never replaces "
        "one; give another --out (or move that one away yourself)",
    )


async def _open_state(path: str) -> HarvestState:
    """The state at ``path``, or a refusal saying what to give instead."""
    if kind_of(path) == "missing":
        raise CliError(
            f"there is no harvest state at {path}: give the state a harvest wrote "
            "(FILE.state.sqlite beside its --out, or its --state)",
        )
    try:
        return await HarvestState.open(path)
    except StateError as exc:
        if "is not a harvest state" not in str(exc):
            raise
    kept = f"{path}.state.sqlite"  # an output given for its state, say
    named = f" (its harvest's is {kept})" if kind_of(kept) == "file" else ""
    raise CliError(
        f"{path} is not a harvest state{named}: give rebuild the state a harvest kept, "
        f"FILE.state.sqlite beside its --out (or its --state); {path} was left as it is",
    )


async def _run(args: argparse.Namespace, output: Output) -> int:
    path: str = args.state
    out = None if args.out in (None, "-") else args.out
    stream = out is None or kind_of(out) in ("fifo", "character device")  # never linked
    if out is not None and not stream and kind_of(out) != "missing":
        raise _exists(out, describe(kind_of(out)))
    lock = HarvestLock(path, "state", StateError)  # no harvest changes it meanwhile
    await anyio.to_thread.run_sync(lock.acquire)
    try:
        async with contextlib.aclosing(await _open_state(path)) as state:
            sink = await _write(state, out, stream, args.format)
    finally:
        lock.release()
    # On stderr, as the harvest's summary: stdout may be the data.
    lines = [
        f"Rebuilt {plural(sink.count, 'document')} from {path} → {out or 'stdout'} "
        f"({args.format}, {sink.size:,} bytes); nothing was sent"
    ]
    if not stream and args.format == "jsonl":
        lines.append(
            f"  {out} is now this harvest's output: continue the harvest into it with "
            f"--out {shlex.quote(out or '')} --state {shlex.quote(path)} --resume, or move "
            "it in place of the old output and run the harvest as before"
        )
    record = {"documents": sink.count, "format": args.format, "out": out, "state": path}
    output.summary({**record, "bytes": sink.size}, lambda: lines)
    return ExitCode.OK


COMMAND = Command(
    "rebuild",
    "write a harvest's output again from its state (JSON Lines as written, or CSV); sends nothing",
    _run,
    _arguments,
    connects=False,
    epilog=_EPILOG,
)
