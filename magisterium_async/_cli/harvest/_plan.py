"""The harvest's arguments checked up front: where the queries come from, where documents
and state go. Each mistake is refused with one line, before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import stat
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._errors import StateError
from magisterium_async._harvest import HarvestLock, check_is_state, is_finished
from magisterium_async._skills import require_query

__all__ = ["Plan", "QueriesFile", "not_continuable", "plan", "query_of", "unwritable"]

# -- the queries ----------------------------------------------------------------------------


def _check_queries_given(args: argparse.Namespace) -> None:
    if not args.queries and not args.query:
        raise CliError("give a QUERIES_FILE (- for stdin) or at least one --query", ExitCode.USAGE)
    for query in args.query:
        if not query.strip():
            raise CliError("--query must not be blank", ExitCode.USAGE)
        _check_query("--query", query)


def _check_query(where: str, query: str) -> str:
    """The rule every skill method applies (a bound on its length, ...), up front: one
    query the service cannot be sent is refused before the harvest, not failed in it.
    Returns the query as the harvest searches it (stripped)."""
    try:
        return require_query("query", query)
    except ValueError as exc:
        raise CliError(f"{where}: {exc}", ExitCode.USAGE) from None


def query_of(line: str) -> str | None:
    """The query a line of a queries file holds: ``None`` for a blank or ``#`` comment line."""
    query = line.strip().lstrip("\ufeff").strip()  # a BOM: any file saved by Notepad
    return None if not query or query.startswith("#") else query


_MAX_LINE = 1024 * 1024
"""The longest line of a queries file, in bytes: far past any query the service answers,
and short enough that a file with no line ends (``/dev/zero``) cannot fill the memory."""


class QueriesFile:
    """A queries file read as a stream, a line at a time, each line decoded on its own: a
    line that is not UTF-8, or longer than :data:`_MAX_LINE`, is a :class:`CliError`
    naming the file and the line."""

    def __init__(self, name: str, file: BinaryIO, *, stream: bool = False) -> None:
        self.name = name
        self.file = file
        self._stream = stream  # stdin: read once, and left open

    def lines(self) -> Iterator[str]:
        """Every line, decoded (blocking: read it off the event loop)."""
        number = 0
        while raw := self.file.readline(_MAX_LINE + 1):
            number += 1
            if len(raw) > _MAX_LINE and not raw.endswith(b"\n"):
                raise CliError(
                    f"{self.name}, line {number}: longer than {_MAX_LINE:,} bytes; a query is "
                    "one line of text",
                    ExitCode.USAGE,
                )
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CliError(
                    f"{self.name}, line {number}: not UTF-8 text (byte {raw[exc.start]:#04x} "
                    f"at byte {exc.start + 1} of the line); save the file as UTF-8",
                    ExitCode.USAGE,
                ) from None

    def count_into(self, seen: set[str]) -> bool:
        """Add the file's queries to ``seen``, each checked as the harvest checks it;
        ``False`` for stdin or a pipe (read once: not counted)."""
        if self._stream or not self.file.seekable():
            return False
        for number, line in enumerate(self.lines(), 1):
            if (query := query_of(line)) is not None:
                seen.add(_check_query(f"{self.name}, line {number}", query))
        self.file.seek(0)
        return True

    def close(self) -> None:
        """Close the file (not stdin: a thread may still read it)."""
        if not self._stream:
            self.file.close()


async def _read_lines(source: QueriesFile) -> AsyncIterator[str]:
    """The lines of ``source``, read by a daemon thread.

    Not a worker thread of the event loop: a read blocked on a pipe or a terminal could
    not be cancelled, and would keep the process alive after Ctrl-C until the input ends.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | Exception | None] = asyncio.Queue()
    room = threading.Semaphore(1024)  # lines read ahead of the harvest, at most

    def pump() -> None:
        item: str | Exception | None = None
        try:
            for line in source.lines():
                room.acquire()
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except Exception as exc:
            item = exc
        with contextlib.suppress(RuntimeError):  # the event loop is already closed
            loop.call_soon_threadsafe(queue.put_nowait, item)

    threading.Thread(target=pump, name="magisterium-queries", daemon=True).start()
    while (item := await queue.get()) is not None:
        if isinstance(item, Exception):
            raise item
        room.release()
        yield item


# -- the files ------------------------------------------------------------------------------


_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the disk is full",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EPIPE: "broken pipe (its reader has gone)",
}


def unwritable(option: str, path: str | None, error: OSError) -> CliError:
    """The error for ``option``'s ``path`` that ``error`` says cannot be written
    (``path`` ``None``: stdout, which no option names)."""
    if path is None:
        why = _WHY.get(error.errno or 0) or (error.strerror or str(error)).lower()
        return CliError(f"cannot write stdout: {why}", ExitCode.USAGE)
    parent = os.path.dirname(os.path.abspath(path))
    if error.errno == errno.ENOENT and not os.path.isdir(parent):
        why = f"the directory {parent} does not exist"
    elif error.errno == errno.ENOTDIR:
        why = f"a part of {parent} is not a directory"
    elif error.errno == errno.EISDIR:
        why = "it is a directory"
    else:
        why = _WHY.get(error.errno or 0) or (error.strerror or str(error)).lower()
    return CliError(f"cannot write {option} {path}: {why}", ExitCode.USAGE)


def _check_writable(option: str, path: str) -> None:
    """Try ``path`` for writing now, so a bad path fails before the harvest, clearly.

    Tried by opening it (root passes every permission check but not a missing directory
    or a read-only file system): an existing file to append, which changes nothing; for a
    missing one, a file of another name made and removed in its directory, so that the
    path itself is never made and removed under a harvest that is making it.
    """
    try:
        if os.path.exists(path):
            with open(path, "ab"):
                pass
        else:
            fd, tried = tempfile.mkstemp(prefix=".magisterium-try-", dir=_directory_of(path))
            os.close(fd)
            os.remove(tried)
    except OSError as exc:
        raise unwritable(option, path, exc) from None


def _directory_of(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def _special(path: str) -> bool:
    """Whether ``path`` is not a regular file (``/dev/null``, a pipe): writing to it
    replaces nothing, so it may exist already."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def not_continuable(out: str, state: str) -> CliError:
    """The refusal of an existing ``out`` that no state at ``state`` says a harvest wrote:
    ``--resume`` would refuse it too, so the ways on that work instead."""
    return CliError(
        f"{out} exists and this harvest did not write it (there is no harvest state at "
        f"{state}); it was left as it is. It is not a harvest's output that can be "
        "continued: give another --out to harvest into a new file; or, with the state of "
        "the harvest that wrote it, continue it (--state STATE --resume) or rebuild it from "
        "that state, sending nothing (`magisterium-async rebuild STATE --out NEW`)",
        ExitCode.USAGE,
    )


def _exists(path: str, out: str | None, state: str | None) -> CliError:
    """The refusal of ``path`` (``out`` or ``state``), found there without ``--resume``,
    pointing to the way on that works: ``--resume`` only where it would continue."""
    if path == out and state is not None and _no_state(state):
        return not_continuable(out, state)
    if state is not None and os.path.exists(state) and not _special(state):
        try:
            check_is_state(state)  # --resume would refuse a file that is not a state
        except StateError as exc:
            return CliError(str(exc), ExitCode.USAGE)
    return CliError(
        f"{path} already exists: add --resume to continue that harvest, or choose another --out",
        ExitCode.USAGE,
    )


def _check_files(out: str | None, state: str | None, resume: bool) -> None:
    """``--out`` and the state: usable for writing, and new unless ``resume``."""
    for option, path in (("--out", out), ("--state", state)):
        if path is None:
            continue
        if os.path.isdir(path):
            raise CliError(
                f"{option} {path} is a directory: give a file in it, such as "
                f"{os.path.join(path, 'docs.jsonl' if option == '--out' else 'state.sqlite')}",
                ExitCode.USAGE,
            )
        if not resume and os.path.exists(path) and not _special(path):
            _check_not_in_use(path)
            raise _exists(path, out, state)
        _check_writable(option, path)


def _same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file: one path once links are followed, or, both
    there, one device and inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_distinct(out: str | None, state: str | None, queries: list[str]) -> None:
    """:class:`CliError` when the output, the state and the queries files are not each a
    file of their own: one would be written over another (or locked twice, by itself)."""
    written = [(option, path) for option, path in (("--out", out), ("--state", state)) if path]
    written = [(option, path) for option, path in written if not _special(path)]
    if len(written) == 2 and _same_file(written[0][1], written[1][1]):
        names = out if out == state else f"{out} and {state}"
        raise CliError(
            f"--out and --state name the same file ({names}): the state needs a file "
            "of its own (leave --state out for FILE.state.sqlite beside --out)",
            ExitCode.USAGE,
        )
    for option, path in written:
        for name in queries:
            if name != "-" and _same_file(path, name):
                raise CliError(
                    f"{option} {path} is the queries file {name}: the harvest would write "
                    f"into its own queries; give {option} another file",
                    ExitCode.USAGE,
                )


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _finished(state: str) -> bool:
    """Whether ``state`` records a finished harvest (read only when no harvest holds it:
    one that does is named by the refusal that follows)."""
    try:
        with HarvestLock(state, "state", StateError):
            return is_finished(state)
    except (StateError, OSError):
        return False


def _check_not_in_use(path: str) -> None:
    """:class:`CliError` naming the harvest that holds ``path``, if one does: a more useful
    word than "already exists" while it runs."""
    try:
        with HarvestLock(path, "files", StateError):
            pass
    except StateError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    except OSError:
        pass  # cannot even be locked: the checks that follow say why


@dataclass
class Plan:
    """Where one harvest's queries come from and where documents and state go."""

    queries: list[str]
    files: list[QueriesFile]
    out: str | None
    state: str | None
    total: int | None
    """How many distinct queries, when the input can be counted (not stdin)."""
    resuming: bool = False
    """Whether the state exists: a harvest to continue."""
    continued: bool = False
    """Whether a finished harvest is continued without ``--resume`` (run again as it was)."""

    _read: AsyncIterator[str] | None = field(default=None, init=False, repr=False)
    _first: str | None = field(default=None, init=False, repr=False)

    def _from_files(self) -> AsyncIterator[str]:
        if self._read is None:
            self._read = self._queries_in_files()
        return self._read

    async def _queries_in_files(self) -> AsyncIterator[str]:
        for file in self.files:
            async for line in _read_lines(file):
                if (found := query_of(line)) is not None:
                    yield found

    async def check_not_empty(self) -> None:
        """:class:`CliError` when the input, read once (stdin), holds no query and there is
        no state to continue: refused as an empty queries file is, before any file is
        made. Reads up to the first query (off the event loop: Ctrl-C still stops it)."""
        if self.total is not None or self.queries or self.resuming:
            return
        async for query in self._from_files():
            self._first = query
            return
        names = ", ".join(file.name for file in self.files)
        raise CliError(
            f"nothing to harvest: {names} held no query (it was empty, or only blank lines "
            "and # comments); nothing was written",
            ExitCode.USAGE,
        )

    async def lines(self) -> AsyncIterator[str]:
        """The queries: ``--query`` ones, then each file's lines but blanks and comments."""
        for query in self.queries:
            yield query
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        async for query in self._from_files():
            yield query

    def close(self) -> None:
        """Close the query files (not stdin)."""
        for file in self.files:
            file.close()


def _no_state(state: str) -> bool:
    """Whether there is no state at ``state`` and no harvest holds its lock: one that
    does may not have made its state yet, and the lock then refuses this one naming it."""
    return not os.path.lexists(state) and not os.path.lexists(
        HarvestLock(state, "state", StateError).lock_path
    )


def plan(args: argparse.Namespace) -> Plan:
    """The plan of one harvest process, its files opened; :class:`CliError` if unusable."""
    out = None if args.out in (None, "-") else args.out
    # No state beside /dev/null or a pipe: as with stdout, only --state keeps one.
    if args.state is not None:
        state: str | None = args.state
    else:
        state = f"{out}.state.sqlite" if out and not _special(out) else None
    _check_queries_given(args)
    _check_distinct(out, state, args.queries)
    if args.resume and state is None:
        raise CliError(
            "--resume needs --out FILE or --state FILE: the state is what it resumes from",
            ExitCode.USAGE,
        )
    # (An --out that exists without its state is refused later, as a file not ours.)
    if (
        args.resume
        and state is not None
        and _no_state(state)
        and not (out is not None and os.path.lexists(out) and not _special(out))
    ):
        raise CliError(
            f"--resume: there is no harvest state at {state} to continue (nothing was "
            "harvested there, or its state was moved); run without --resume to start a "
            "new harvest, or give the --state it was written to",
            ExitCode.USAGE,
        )
    # The same harvest run again (the README's first command, twice): its output and its
    # state are there, and the state records it finished. It continues as --resume does:
    # nothing is searched again, only new queries spend quota.
    continued = (
        not args.resume
        and out is not None
        and state is not None
        and _regular(out)
        and _regular(state)
        and _finished(state)
    )
    _check_files(out, state, args.resume or continued)
    files: list[QueriesFile] = []
    try:
        for name in args.queries:
            if name == "-":
                if sys.stdin is None:  # started with stdin closed (`<&-`): Python sets None
                    raise OSError(errno.EBADF, "it is closed", "stdin")
                # A reader of its own: the interpreter's stdin may not be locked by a
                # thread still reading when the process ends (Ctrl-C at a terminal).
                reader = open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115
                files.append(QueriesFile("stdin", reader, stream=True))
            else:
                files.append(QueriesFile(name, open(name, "rb")))  # noqa: SIM115
        # Distinct queries, as the harvest searches them: a repeat is searched once.
        seen = {require_query("query", query) for query in args.query}
        counted = [file.count_into(seen) for file in files]
    except OSError as exc:
        for file in files:
            file.close()
        raise CliError(f"cannot read {exc.filename}: {exc.strerror}", ExitCode.USAGE) from None
    except CliError:
        for file in files:
            file.close()
        raise
    total = len(seen) if all(counted) else None
    resuming = state is not None and os.path.exists(state)
    if total == 0 and not resuming:
        for file in files:
            file.close()
        names = ", ".join(file.name for file in files)
        raise CliError(
            f"nothing to harvest: {names} holds no query (only blank lines and # comments); "
            "nothing was written",
            ExitCode.USAGE,
        )
    return Plan(list(args.query), files, out, state, total, resuming, continued)
