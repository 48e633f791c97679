"""The ``harvest`` and ``rebuild`` commands: one process, queries in, every document they
find out as JSON Lines; and that output written again from the harvest's state.

This module declares the harvest's arguments and help; :mod:`._plan` checks them before
any file is made (and prints them for ``--dry-run``); :mod:`._run` runs the harvest (the
library's, :mod:`magisterium_async._harvest`) and words its figures (the live status line
and the summary); :mod:`._rebuild` is the other command.
"""

from __future__ import annotations

import argparse

from magisterium_async._cli._command import Command, add_redis_option, number
from magisterium_async._cli.harvest._run import run_harvest
from magisterium_async._harvest import DEFAULT_CONCURRENCY, MAX_CONCURRENCY

__all__ = ["COMMAND"]

_EPILOG = """\
A harvest runs in one process: every request draws on the one token's quota, so more
processes would harvest no faster. Documents go out as JSON Lines, fsync'd in small
batches (within a second of arriving): a killed harvest loses at most the lines in
progress, and --resume writes every document exactly once. One harvest at a time uses a
given --out and state: a second one is refused at once, naming the one that holds them.
Ctrl-C or SIGTERM stops it cleanly, with a summary (exit 130 or 143). With --json the
summary on stderr is one JSON object. The state keeps every document delivered: an
output damaged since is written again from it, sending nothing, by
`magisterium-async rebuild STATE --out NEW` (--format csv for a table)."""


def _path(text: str) -> str:
    """``--out`` and ``--state``: a path, never an empty one (it names no file)."""
    if not text:
        raise argparse.ArgumentTypeError("must name a file, not be empty")
    return text


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "queries",
        nargs="*",
        metavar="QUERIES_FILE",
        help="one query a line (blank lines and # comments skipped); - for stdin",
    )
    parser.add_argument("-q", "--query", action="append", default=[], help="a query (repeatable)")
    parser.add_argument(
        "-o",
        "--out",
        type=_path,
        metavar="FILE",
        help="JSON Lines output, one document a line (default: stdout)",
    )
    parser.add_argument(
        "--state",
        type=_path,
        metavar="PATH",
        help="the resumable state (default: FILE.state.sqlite with --out)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the harvest of --out/--state, appending to --out; without it, an "
        "existing --out or state is an error",
    )
    parser.add_argument(
        "--concurrency",
        type=number(int, 1, MAX_CONCURRENCY),
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"searches, and fetches, in flight at once, 1 to {MAX_CONCURRENCY} "
        "(default: %(default)s; the quota bounds the pace whatever N)",
    )
    add_redis_option(
        parser, "share the token's quota with other processes and apps through this Redis"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requests the harvest would make and the time they take at the "
        "quota; send nothing, write no file",
    )


COMMAND = Command(
    "harvest",
    "search every query, fetch every document found, write JSONL",
    run_harvest,
    _arguments,
    epilog=_EPILOG,
)
