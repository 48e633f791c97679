"""The ``rebuild`` command: a harvest's output written again from its state, sending nothing.

The state keeps every delivered document as the harvest wrote it (compressed), in the
order of the output's lines: JSON Lines rebuilt from it are the output, byte for byte, as
the harvest left it (a damaged, edited or lost file costs no quota); ``--format csv``
writes the same documents as CSV, for tools that load a table. The rebuild writes only a
new file: a path where something exists is refused. It is written beside its final name
first and linked there once whole, so an interrupted rebuild leaves nothing at ``--out``.
A JSON Lines file rebuilt becomes the harvest's output: the state records it, so the
harvest continues into it (``--out FILE --state STATE --resume``, or moved to the old
name).
"""

from __future__ import annotations

# What writing needs (csv, hashlib, sqlite3, ...) is imported when the command runs:
# --help and a usage error load none of it.
import argparse
import json
import os
import shlex
import sys
from typing import TYPE_CHECKING, BinaryIO

from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import plural
from magisterium_async._errors import StateError

if TYPE_CHECKING:
    from magisterium_async._harvest._state import Store

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


def _csv_row(record: bytes) -> list[str]:
    value = json.loads(record)
    row = []
    for column in CSV_COLUMNS:
        cell = value.get(column)
        if column in ("extra", "queries"):
            row.append(json.dumps(cell if cell is not None else [], ensure_ascii=False))
        else:
            row.append("" if cell is None else str(cell))
    return row


class _Sink:
    """Where the records go: bytes out, counted and digested (the mark of a JSON Lines
    file is the digest of every byte)."""

    def __init__(self, file: BinaryIO, form: str) -> None:
        import csv
        import hashlib
        import io

        self.file = file
        self.form = form
        self.digest = hashlib.sha256()
        self.size = 0
        self.count = 0
        self._text = io.StringIO()
        self._csv = csv.writer(self._text)
        if form == "csv":
            self._csv.writerow(CSV_COLUMNS)
            self._flush_text()

    def _put(self, data: bytes) -> None:
        self.file.write(data)
        self.digest.update(data)
        self.size += len(data)

    def _flush_text(self) -> None:
        self._put(self._text.getvalue().encode("utf-8"))
        self._text.seek(0)
        self._text.truncate()

    def write(self, record: bytes) -> None:
        self.count += 1
        if self.form == "jsonl":
            self._put(record + b"\n")
        else:
            self._csv.writerow(_csv_row(record))
            self._flush_text()


def _check_new(out: str) -> None:
    if os.path.lexists(out):
        what = "a directory" if os.path.isdir(out) else "a file"
        raise CliError(
            f"--out {out} exists ({what}): the rebuild writes only a new file and never "
            "replaces one; give another --out (or move that one away yourself)",
            ExitCode.USAGE,
        )


async def _run(invocation: Invocation) -> int:
    # Files and SQLite only, in a worker thread: nothing here waits on the network.
    import asyncio

    sink = await asyncio.to_thread(_rebuild, invocation.args)
    args = invocation.args
    out = None if args.out in (None, "-") else args.out
    if invocation.output.json:  # on stderr, as the harvest's summary: stdout may be the data
        summary = {
            "documents": sink.count,
            "format": args.format,
            "out": out,
            "state": args.state,
            "bytes": sink.size,
        }
        print(json.dumps(summary), file=sys.stderr, flush=True)
    invocation.output.note(
        f"Rebuilt {plural(sink.count, 'document')} from {args.state} → {out or 'stdout'} "
        f"({args.format}, {sink.size:,} bytes); nothing was sent"
    )
    if out is not None and args.format == "jsonl":
        invocation.output.note(
            f"  {out} is now this harvest's output: continue the harvest into it with "
            f"--out {shlex.quote(out)} --state {shlex.quote(args.state)} --resume, or move "
            "it in place of the old output and run the harvest as before"
        )
    return ExitCode.OK


def _rebuild(args: argparse.Namespace) -> _Sink:
    """The rebuild itself (blocking): the state held, read, and the output written."""
    import sqlite3
    import zlib

    from magisterium_async._harvest import HarvestLock, OutputMark
    from magisterium_async._harvest._state import DAMAGED_STATE, Store

    state_path: str = args.state
    out = None if args.out in (None, "-") else args.out
    if not os.path.lexists(state_path):
        raise CliError(
            f"there is no harvest state at {state_path}: give the state a harvest wrote "
            "(FILE.state.sqlite beside its --out, or its --state)",
            ExitCode.USAGE,
        )
    if out is not None:
        _check_new(out)
    try:
        with HarvestLock(state_path, "state", StateError):  # no harvest changes it meanwhile
            store = Store(state_path, keep_bodies=True, new_run=False)
            try:
                if out is None:
                    sink = _Sink(sys.stdout.buffer, args.format)
                    _copy(store, sink)
                    sys.stdout.buffer.flush()
                    return sink
                sink = _write_new(out, store, args.format)
                if args.format == "jsonl":
                    stat = os.stat(out)
                    digest = "sha256:" + sink.digest.hexdigest()
                    store.record_output(OutputMark(stat.st_dev, stat.st_ino, sink.size, digest))
                return sink
            finally:
                store.close()
    except StateError as exc:
        message = str(exc)
        if "is not a harvest state" in message:  # an output given for its state, say
            kept = f"{state_path}.state.sqlite"
            named = f" (its harvest's is {kept})" if os.path.exists(kept) else ""
            message = (
                f"{state_path} is not a harvest state{named}: give rebuild the state a "
                "harvest kept, FILE.state.sqlite beside its --out (or its --state); "
                f"{state_path} was left as it is"
            )
        raise CliError(message, ExitCode.USAGE) from None
    except (sqlite3.Error, zlib.error) as exc:  # a damaged file: the harvest says the same
        raise CliError(
            f"harvest state {state_path}: {exc}; {DAMAGED_STATE}", ExitCode.USAGE
        ) from None


def _copy(store: Store, sink: _Sink) -> None:
    after = 0
    while page := store.lines(after, 256):
        for _, record in page:
            sink.write(record)
        after = page[-1][0]


def _write_new(out: str, store: Store, form: str) -> _Sink:
    """Write the records to a file beside ``out``, then link it at ``out`` (never over a
    file: one made there meanwhile is refused), so ``out`` appears only whole."""
    import secrets

    from magisterium_async._cli.harvest._plan import unwritable

    directory = os.path.dirname(os.path.abspath(out))
    temporary = os.path.join(
        directory, f".{os.path.basename(out)}.{secrets.token_hex(4)}.rebuilding"
    )
    try:
        file = open(temporary, "xb")  # noqa: SIM115 - the user's umask, as any file they make
    except OSError as exc:
        raise unwritable("--out", out, exc) from None
    try:
        with file:
            sink = _Sink(file, form)
            _copy(store, sink)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, out)
        except FileExistsError:
            _check_new(out)
            raise
    except OSError as exc:
        raise unwritable("--out", out, exc) from None
    finally:
        os.unlink(temporary)
    return sink


COMMAND = Command(
    "rebuild",
    "write a harvest's output again from its state (JSON Lines as written, or CSV); sends nothing",
    _run,
    _arguments,
    connects=False,
    epilog=_EPILOG,
)
