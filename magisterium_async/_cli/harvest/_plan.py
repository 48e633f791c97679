"""The harvest's arguments checked up front: where the queries come from, where documents
and state go. Each mistake is refused with one line, before any file is made. ``--dry-run``
prints the plan: the requests it would make and the time they take at the quota.

What each path is (a file, nothing, a directory, a FIFO, a device) is decided before it
is opened (:func:`magisterium_async._files.kind_of`): ``--out`` may be a device or a FIFO
(written as a stream, with no state unless ``--state`` names one), ``--state`` only a
file or nothing, a queries file anything that can be read as a stream.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio.to_thread

from magisterium_async._cli._client import quota_of
from magisterium_async._cli._errors import CliError, ExitCode, unwritable
from magisterium_async._cli._output import Output, duration, plural, quoted
from magisterium_async._errors import StateError
from magisterium_async._files import describe, kind_of, read_in_thread
from magisterium_async._harvest import HarvestLock, HarvestState, check_is_state
from magisterium_async._skills import require_query

__all__ = ["Plan", "dry_run", "held", "not_ours", "plan"]

_MAX_LINE = 1024 * 1024
"""The longest line of a queries file, in characters: far past any query, and short
enough that a file with no line ends (``/dev/zero``) cannot fill the memory."""
_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape keeps it


def not_ours(out: str, why: str) -> CliError:
    """The refusal of an existing ``out`` that no state says this harvest wrote: the ways
    on that work (``--resume`` would refuse it too)."""
    return CliError(
        f"{out} exists and this harvest did not write it ({why}); it was left as it is. It "
        "is not a harvest's output that can be continued: give another --out to harvest into "
        "a new file; or, with the state of the harvest that wrote it, continue it (--state "
        "STATE --resume) or rebuild it from that state, sending nothing (`magisterium-async "
        "rebuild STATE --out NEW`)"
    )


class _Queries:
    """A queries file (``-``: stdin), read as a stream a line at a time, each line decoded
    on its own; a byte order mark and any line end (``\\n``, ``\\r\\n``, ``\\r``) alike."""

    def __init__(self, name: str) -> None:
        self.name = "stdin" if name == "-" else name
        self._path = None if name == "-" else name
        if self._path is None and sys.stdin is None:  # started with `<&-`: Python sets None
            raise CliError("cannot read stdin: it is closed")
        kind = "fifo" if self._path is None else kind_of(name)
        if kind not in ("file", "fifo", "character device"):
            why = "does not exist" if kind == "missing" else f"is {describe(kind)}, not a file"
            raise CliError(f"queries file {name} {why}")
        self.countable = kind == "file"  # a FIFO, a device or stdin is read only once

    def _open(self) -> BinaryIO:
        if self._path is None:
            # A reader of its own: the interpreter's stdin may not be locked by a thread
            # still reading it when the process ends (Ctrl-C at a terminal).
            return open(sys.stdin.fileno(), "rb", closefd=False)
        try:
            return open(self._path, "rb")
        except OSError as exc:
            raise CliError(f"cannot read {self.name}: {exc.strerror or exc}") from None

    def lines(self) -> Iterator[str]:
        """The queries: each line not blank nor a ``#`` comment, stripped and checked as a
        skill checks it; a line that is not UTF-8, too long or not a query is refused
        naming the file and the line (blocking: read it off the event loop)."""
        with self._open() as raw:
            text = io.TextIOWrapper(raw, "utf-8-sig", errors="surrogateescape", newline=None)
            for number, line in enumerate(iter(lambda: text.readline(_MAX_LINE + 1), ""), 1):
                where = f"{self.name}, line {number}"
                if len(line) > _MAX_LINE:
                    raise CliError(
                        f"{where}: longer than {_MAX_LINE:,} characters; a query is one line"
                    )
                if bad := _UNDECODED.search(line):
                    at = len(line[: bad.start()].encode("utf-8", "surrogateescape")) + 1
                    raise CliError(
                        f"{where}: not UTF-8 text (byte {ord(bad.group()) - 0xDC00:#04x} at "
                        f"byte {at} of the line); save the file as UTF-8"
                    )
                query = line.strip().lstrip("\ufeff").strip()
                if query and not query.startswith("#"):
                    yield _checked(where, query)
            text.detach()  # the binary reader closes itself (stdin's leaves the fd open)


def _checked(where: str, query: str) -> str:
    """The query as the harvest searches it, or refused up front: one the service cannot
    be sent is not failed in the harvest."""
    try:
        return require_query("query", query)
    except ValueError as exc:
        raise CliError(f"{where}: {exc}") from None


@dataclass
class Plan:
    """Where one harvest's queries come from and where documents and state go."""

    queries: list[str]
    """The ``--query`` ones."""
    files: list[_Queries]
    out: str | None
    """``None``: stdout."""
    state: str | None
    total: int | None
    """Distinct queries, when the input can be counted (not stdin)."""
    resuming: bool
    """Whether a state is there: a harvest to continue."""
    continued: bool
    """Whether a finished harvest, its output there, is continued without ``--resume``."""

    def __post_init__(self) -> None:
        self._first: list[str] = []
        self._queries = self._all(self.queries)

    async def _all(self, queries: list[str]) -> AsyncIterator[str]:
        for query in queries:
            yield query
        for file in self.files:
            async for query in read_in_thread(file.lines, "magisterium-queries"):
                yield query

    async def check_not_empty(self) -> None:
        """Refuse input that holds no query and no state to continue, before any file is
        made: stdin is read up to its first query (a terminal is told it is read)."""
        if self.total is not None or self.resuming:
            return
        if any(file.name == "stdin" for file in self.files) and sys.stdin.isatty():
            print(
                "magisterium-async: reading queries from the terminal, one a line; end them "
                "with Ctrl-D (Ctrl-Z then Enter on Windows)",
                file=sys.stderr,
                flush=True,
            )
        async for query in self._queries:
            self._first.append(query)
            return
        raise _nothing(self.files)

    async def lines(self) -> AsyncIterator[str]:
        """The queries: ``--query`` ones, then each file's."""
        for query in self._first:
            yield query
        async for query in self._queries:
            yield query


def _nothing(files: list[_Queries]) -> CliError:
    return CliError(
        f"nothing to harvest: {', '.join(file.name for file in files)} holds no query (it "
        "was empty, or only blank lines and # comments); nothing was written"
    )


def _check_writable(option: str, path: str) -> None:
    """Try ``path`` for writing now, so a bad path fails before the harvest, clearly: an
    existing file opened to append (which changes nothing), else a file of another name
    made and removed in its directory (root passes every permission check, but not a
    missing directory or a read-only file system)."""
    try:
        if kind_of(path) == "missing":
            directory = os.path.dirname(os.path.abspath(path))
            fd, tried = tempfile.mkstemp(prefix=".magisterium-try-", dir=directory)
            os.close(fd)
            os.remove(tried)
        else:
            with open(path, "ab"):
                pass
    except OSError as exc:
        raise unwritable(exc, option, path) from None


def _same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file (links followed, hard links included)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def held(path: str) -> CliError | None:
    """The refusal naming the harvest that holds ``path``, if one does."""
    try:
        with HarvestLock(path, "files", StateError):
            return None
    except StateError as exc:
        return CliError(str(exc))
    except OSError:
        return None  # cannot even be locked: the checks that follow say why


async def _finished(state: str) -> bool:
    """Whether ``state`` records a finished harvest (anything else: not one)."""
    try:
        async with aclosing(await HarvestState.open(state)) as opened:
            return (await opened.summary()).finished
    except StateError:
        return False


def _exists(path: str, out: str | None, state: str | None) -> CliError:
    """The refusal of ``path`` (``out`` or ``state``), there without ``--resume``, pointing
    to the way on that works: ``--resume`` only where it would continue (a file at the
    state's path that is not a harvest state raises its :class:`StateError`)."""
    if (holder := held(path)) is not None:
        return holder
    if path == out and state is not None and kind_of(state) == "missing":
        return held(state) or not_ours(out, f"there is no harvest state at {state}")
    if state is not None and kind_of(state) == "file":
        check_is_state(state)  # --resume would refuse a file that is not a state
    return CliError(
        f"{path} already exists: add --resume to continue that harvest, or choose another --out"
    )


def _check_paths(out: str | None, stream: bool, state: str | None, queries: list[str]) -> None:
    """Refuse an ``--out`` or ``--state`` that is a directory or no file, and any two of
    the output, the state and the queries files that name one file."""
    for option, path in (("--out", out), ("--state", state)):
        kind = "missing" if path is None else kind_of(path)
        if kind == "directory":
            example = "docs.jsonl" if option == "--out" else "state.sqlite"
            raise CliError(
                f"{option} {path} is a directory: give a file in it, such as "
                f"{os.path.join(path or '', example)}"
            )
        if kind not in ("missing", "file") and (option == "--state" or not stream):
            raise CliError(f"{option} {path} is {describe(kind)}, not a file")
    if out is not None and state is not None and not stream and _same_file(out, state):
        names = out if out == state else f"{out} and {state}"
        raise CliError(
            f"--out and --state name the same file ({names}): the state needs a file of its "
            "own (leave --state out for FILE.state.sqlite beside --out)"
        )
    for option, path in (("--out", None if stream else out), ("--state", state)):
        for name in queries:
            if path is not None and name != "-" and _same_file(path, name):
                raise CliError(
                    f"{option} {path} is the queries file {name}: the harvest would write into "
                    f"its own queries; give {option} another file"
                )


async def plan(args: argparse.Namespace) -> Plan:
    """The plan of one harvest process; :class:`CliError` if it cannot be run as asked."""
    out = None if args.out in (None, "-") else args.out
    stream = out is not None and kind_of(out) in ("fifo", "character device")
    # No state beside /dev/null or a pipe: as with stdout, only --state keeps one.
    state: str | None = args.state
    if state is None and out is not None and not stream:
        state = f"{out}.state.sqlite"
    if not args.queries and not args.query:
        raise CliError("give a QUERIES_FILE (- for stdin) or at least one --query")
    queries = [_checked("--query", query) for query in args.query]
    _check_paths(out, stream, state, args.queries)
    if args.resume and state is None:
        raise CliError(
            "--resume needs --out FILE or --state FILE: the state is what it resumes from"
        )
    has_state = state is not None and kind_of(state) == "file"
    has_out = out is not None and not stream and kind_of(out) == "file"
    if args.resume and state is not None and not has_state and held(state) is None:
        if has_out:
            raise not_ours(out or "", f"there is no harvest state at {state}")
        raise CliError(
            f"--resume: there is no harvest state at {state} to continue (nothing was "
            "harvested there, or its state was moved); run without --resume to start a new "
            "harvest, or give the --state it was written to"
        )
    # The same harvest run again (the README's first command, twice): it continues as
    # --resume does; nothing is searched again, only new queries spend quota. With its
    # output gone since, the run says so and how to go on, as --resume would (an "add
    # --resume" here led only to that refusal).
    out_gone = out is not None and not stream and kind_of(out) == "missing"
    finished = not args.resume and has_state and has_out and await _finished(state or "")
    continued = finished or (not args.resume and has_state and out_gone)
    for option, path in (("--out", None if stream else out), ("--state", state)):
        if path is not None:
            if not (args.resume or continued) and kind_of(path) == "file":
                raise _exists(path, out, state)
            _check_writable(option, path)
    sources = [_Queries(name) for name in args.queries]
    # Distinct queries, as the harvest searches them: a repeat is searched once.
    seen = set(queries)
    for source in sources:
        if source.countable:
            seen.update(await asyncio.to_thread(list, source.lines()))
    total = len(seen) if all(source.countable for source in sources) else None
    if total == 0 and not has_state:
        raise _nothing(sources)
    return Plan(queries, sources, out, state, total, has_state, finished)


async def _spared(state: str, queries: list[str], resuming: bool) -> tuple[list[str], int]:
    """Those of ``queries`` the state answered, and the documents it found and did not
    fetch, read under its lock."""
    lock = HarvestLock(state, "state", StateError)
    await anyio.to_thread.run_sync(lock.acquire)
    try:
        if not resuming:
            return [], 0
        async with aclosing(await HarvestState.open(state)) as opened:
            documents = (await opened.summary()).documents
            left = documents.get("pending", 0) + documents.get("failed", 0)
            return await opened.answered(queries), left
    finally:
        lock.release()


def _lines(record: dict[str, Any]) -> list[str]:
    queries, found, took = record["searches"], record["found_to_fetch"], record["searches_take"]
    limit, period = record["quota"]["limit"], record["quota"]["period"]
    pace = "no quota (unlimited)" if limit is None else f"{limit:g} per {period:g} s"
    lines = [
        f"Dry run: {plural(len(queries), 'search', 'searches')} would be sent first, "
        f"from the default pool at {pace}:"
        if queries
        else "Dry run: no search would be sent."
    ]
    lines += [f"  search {quoted(query)}" for query in queries]
    if record["repeated"]:
        lines.append(
            f"({plural(record['repeated'], 'query', 'queries')} repeated in the input would "
            "not be searched again.)"
        )
    if record["answered"]:
        lines.append(
            f"({plural(record['answered'], 'query', 'queries')} answered before, as the state "
            f"{record['state']} records, would not be searched again.)"
        )
    if queries:
        lines.append(
            f"The searches alone take {duration(took)} at this quota (a window's at once, "
            "then the next window's)."
            if took
            else "The searches can all go at once at this quota."
        )
    cost = "." if limit is None else f", {duration(record['per_document'])} of quota at this pace."
    earlier = f"the {plural(found, 'document')} found before and not fetched yet"
    if queries:
        also = f"each of {earlier}, and one for " if found else ""
        lines.append(
            f"Then one fetch for {also}each new document the searches find: unknown until "
            "they answer. Each costs one request from the same pool" + cost
        )
    elif found:
        lines.append(f"Then one fetch for each of {earlier}. Each costs one request" + cost)
    else:
        lines.append("Nothing to fetch either: a run now would send no request.")
    state = f" (state {record['state']})" if record["state"] else ""
    lines.append(
        f"Documents would go to {record['out'] or 'stdout'}{state}. Nothing was sent; no file "
        "was changed."
    )
    return lines


async def dry_run(where: Plan, args: argparse.Namespace, output: Output) -> int:
    """Print the plan ``where`` of the harvest ``args`` ask for, checked as the harvest
    checks it (:func:`plan`); send nothing, write nothing. The searches are known
    (one per distinct query); the fetches are not until the searches answer, so it says
    what each costs. With a state to continue it counts as the real run would go: queries
    it answered are not sent, documents found and not fetched are fetched first (the state
    read under its lock, never written)."""
    limits = quota_of(args)
    lines = [query async for query in where.lines()]
    distinct = list(dict.fromkeys(lines))  # the harvest searches a repeated query once
    done: list[str] = []
    to_fetch = 0
    if where.state is not None:
        done, to_fetch = await _spared(where.state, distinct, where.resuming)
    queries = [query for query in distinct if query not in set(done)]
    # On a fresh quota a window's starts go at once, then the next window's after the
    # window and its safety margin: what the sliding log allows a bulk job alone.
    starts, window = limits.window_for("default")
    pause, limit = window + limits.margin, limits.limit_for("default")
    record = {
        "dry_run": True,
        "sent": 0,
        "searches": queries,
        "repeated": len(lines) - len(distinct),
        "answered": len(done),
        "found_to_fetch": to_fetch,
        "fetches": None if queries else to_fetch,
        "pool": "default",
        "quota": {"limit": None if math.isinf(limit) else limit, "period": limits.period},
        "searches_take": (len(queries) - 1) // starts * pause if starts and queries else 0.0,
        "per_document": pause / starts if starts else 0.0,
        "out": where.out,
        "state": where.state,
        "resuming": where.resuming,
    }
    output.result(record, lambda: print("\n".join(_lines(record))))
    return ExitCode.OK
