"""The harvest's arguments checked up front, for one process and for ``--workers``.

Where the queries come from, where documents and state go and what is shared through
Redis: each check written once, so a harvest and the parent of ``--workers`` refuse the
same mistakes with the same words, before anything starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import threading
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import IO

from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._config import REDIS_URL_ENV, redis_url

__all__ = [
    "PRIVATE_JOB",
    "Plan",
    "Sharing",
    "WorkerPaths",
    "check_job",
    "plan",
    "plan_workers",
    "query_of",
    "sharing",
    "unwritable",
    "workers_sharing",
]

PRIVATE_JOB = "local"
_JOB = re.compile(r"[A-Za-z0-9._-]{1,100}")


# -- what is shared -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sharing:
    """What one harvest process shares through Redis: the quota (``url``), and the work
    when it has a ``job``."""

    url: str | None
    job: str | None


def check_job(job: str) -> None:
    """:class:`CliError` unless ``job`` is a usable ``--job`` name."""
    if not _JOB.fullmatch(job):
        raise CliError(
            f"--job {job!r}: use up to 100 letters, digits, '.', '_' or '-'", ExitCode.USAGE
        )


def sharing(args: argparse.Namespace) -> Sharing:
    """The Redis and job of one harvest process (not a ``--workers`` parent)."""
    url = redis_url(args.redis)
    if args.job is not None:
        check_job(args.job)
        if url is None:
            raise CliError(
                f"--job shares a harvest through Redis: pass --redis URL or set ${REDIS_URL_ENV}",
                ExitCode.USAGE,
            )
    elif args.redis is not None:
        raise CliError(
            "--redis shares a harvest between invocations: name it with --job NAME, "
            "the same on each",
            ExitCode.USAGE,
        )
    return Sharing(url, args.job)


def workers_sharing(args: argparse.Namespace) -> Sharing:
    """The Redis and job of the parent of ``--workers``: ``url`` ``None`` means a private
    Redis it starts itself (redis-server must be installed), whose job is ``None`` too."""
    url = redis_url(args.redis)
    if args.job is not None:
        check_job(args.job)
    if url is None:
        if shutil.which("redis-server") is None:
            raise CliError(
                f"--workers {args.workers} needs Redis to coordinate: pass --redis URL (or set "
                f"${REDIS_URL_ENV}), or install redis-server for a private one",
                ExitCode.USAGE,
            )
    elif args.job is None:
        raise CliError(
            "--workers with a shared Redis needs --job NAME (the same on every host)",
            ExitCode.USAGE,
        )
    return Sharing(url, args.job)


# -- the queries ----------------------------------------------------------------------------


def _check_queries_given(args: argparse.Namespace) -> None:
    if not args.queries and not args.query:
        raise CliError("give a QUERIES_FILE (- for stdin) or at least one --query", ExitCode.USAGE)
    for query in args.query:
        if not query.strip():
            raise CliError("--query must not be blank", ExitCode.USAGE)


def query_of(line: str) -> str | None:
    """The query a line of a queries file holds: ``None`` for a blank or ``#`` comment line."""
    query = line.strip()
    return None if not query or query.startswith("#") else query


async def _read_lines(file: IO[str]) -> AsyncIterator[str]:
    """The lines of ``file``, read by a daemon thread.

    Not a worker thread of the event loop: a read blocked on a pipe or a terminal could
    not be cancelled, and would keep the process alive after Ctrl-C until the input ends.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | Exception | None] = asyncio.Queue()
    room = threading.Semaphore(1024)  # lines read ahead of the harvest, at most

    def pump() -> None:
        item: str | Exception | None = None
        try:
            for line in file:
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


def _count(file: IO[str]) -> int | None:
    if file is sys.stdin or not file.seekable():
        return None
    count = sum(1 for line in file if query_of(line) is not None)
    file.seek(0)
    return count


# -- the files ------------------------------------------------------------------------------


_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the disk is full",
    errno.ENAMETOOLONG: "the name is too long",
}


def unwritable(option: str, path: str, error: OSError) -> CliError:
    """The error for ``option``'s ``path`` that ``error`` says cannot be written."""
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
    or a read-only file system); a file created by the try is removed again.
    """
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise unwritable(option, path, exc) from None
    if not existed:
        os.remove(path)


def _special(path: str) -> bool:
    """Whether ``path`` is not a regular file (``/dev/null``, a pipe): writing to it
    replaces nothing, so it may exist already."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _check_files(files: Iterable[tuple[str, str | None]], resume: bool) -> None:
    """``(option, path)`` pairs: usable for writing, and new unless ``resume``."""
    for option, path in files:
        if path is None:
            continue
        if os.path.isdir(path):
            raise CliError(
                f"{option} {path} is a directory: give a file in it, such as "
                f"{os.path.join(path, 'docs.jsonl' if option == '--out' else 'state.sqlite')}",
                ExitCode.USAGE,
            )
        if not resume and os.path.exists(path) and not _special(path):
            raise CliError(
                f"{path} already exists: add --resume to continue that harvest, "
                "or choose another --out",
                ExitCode.USAGE,
            )
        _check_writable(option, path)


@dataclass
class Plan:
    """Where one harvest's queries come from and where documents and state go."""

    queries: list[str]
    files: list[IO[str]]
    out: str | None
    state: str | None
    total: int | None
    """How many queries in all, when the input can be counted (not stdin)."""
    resuming: bool = False
    """Whether the state exists: a harvest to continue."""

    async def lines(self) -> AsyncIterator[str]:
        """The queries: ``--query`` ones, then each file's lines but blanks and comments."""
        for query in self.queries:
            yield query
        for file in self.files:
            async for line in _read_lines(file):
                if (found := query_of(line)) is not None:
                    yield found

    def close(self) -> None:
        """Close the query files (not stdin)."""
        for file in self.files:
            if file is not sys.stdin:
                file.close()


def plan(args: argparse.Namespace) -> Plan:
    """The plan of one harvest process, its files opened; :class:`CliError` if unusable."""
    out = None if args.out in (None, "-") else args.out
    # No state beside /dev/null or a pipe: as with stdout, only --state keeps one.
    state = args.state or (f"{out}.state.sqlite" if out and not _special(out) else None)
    _check_queries_given(args)
    if args.resume and state is None:
        raise CliError(
            "--resume needs --out FILE or --state FILE: the state is what it resumes from",
            ExitCode.USAGE,
        )
    _check_files((("--out", out), ("--state", state)), args.resume)
    files: list[IO[str]] = []
    try:
        for name in args.queries:
            files.append(sys.stdin if name == "-" else open(name, encoding="utf-8"))  # noqa: SIM115
    except OSError as exc:
        for file in files:
            file.close()
        raise CliError(f"cannot read {exc.filename}: {exc.strerror}", ExitCode.USAGE) from None
    counts = [_count(file) for file in files]
    total = None if None in counts else len(args.query) + sum(c or 0 for c in counts)
    resuming = state is not None and os.path.exists(state)
    return Plan(list(args.query), files, out, state, total, resuming)


@dataclass(frozen=True)
class WorkerPaths:
    """Where worker ``index`` of ``--workers`` writes."""

    index: int
    out: str
    state: str


def worker_path(path: str, index: int) -> str:
    """``docs.jsonl`` -> ``docs.w1.jsonl`` (``docs`` -> ``docs.w1``)."""
    root, ext = os.path.splitext(path)
    return f"{root}.w{index}{ext}"


def plan_workers(args: argparse.Namespace) -> list[WorkerPaths]:
    """The files of each worker of ``--workers``; :class:`CliError` if unusable."""
    if args.out in (None, "-"):
        raise CliError("--workers writes one file per worker: give --out FILE", ExitCode.USAGE)
    if "-" in args.queries:
        raise CliError(
            "--workers cannot share stdin: put the queries in a file, or use --query",
            ExitCode.USAGE,
        )
    _check_queries_given(args)
    workers = []
    for index in range(1, args.workers + 1):
        out = worker_path(args.out, index)
        state = f"{args.state}.w{index}" if args.state else f"{out}.state.sqlite"
        workers.append(WorkerPaths(index, out, state))
    _check_files(
        (pair for w in workers for pair in (("--out", w.out), ("--state", w.state))), args.resume
    )
    beyond = worker_path(args.out, args.workers + 1)
    if args.resume and os.path.exists(beyond):
        raise CliError(
            f"{beyond} exists: resume with the --workers that harvest had", ExitCode.USAGE
        )
    return workers
