"""The ``harvest`` command: its arguments, and which harvest runs them.

One process (:mod:`._harvest_run`, also each worker of ``--workers``) or the parent of
``--workers N`` (:mod:`._workers`); both are imported only when a harvest runs.
"""

from __future__ import annotations

import argparse

from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._options import positive
from magisterium_async._harvest._batch import DEFAULT_CONCURRENCY

__all__ = ["COMMAND"]

_EPILOG = """\
Documents go out as JSON Lines, fsync'd in small batches (within a second of arriving):
a killed harvest loses at most the lines in progress, and --resume writes every
document exactly once. Ctrl-C or SIGTERM stops it cleanly, with a summary (exit 130 or
143). With --json the summary on stderr is one JSON object.

several workers: each reads the same queries; Redis decides which one searches each
query and fetches each document (once over all of them), and they share the quota.
  several hosts  run the same command on each, with the same --redis URL --job NAME
                 and each its own --out; the harvest is the union of the outputs.
  --workers N    N processes on this host, worker K writing OUT.wK.jsonl (its state
                 OUT.wK.jsonl.state.sqlite, or STATE.wK with --state): cat them for
                 the whole harvest. Without --redis or $MAGISTERIUM_REDIS_URL, a
                 private redis-server (on PATH) serves the run on a Unix socket.
                 --emulator serves every worker from one emulator.
  --resume       the same command again (same --job, same --workers): each worker
                 first claims what its state holds, so even an empty Redis is rebuilt.
  --job has no default: a name derived from the queries would make a new harvest of
  the same queries find everything claimed by the last one and write nothing.
  $MAGISTERIUM_REDIS_URL without --job (and one worker) only shares the quota."""


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
        metavar="FILE",
        help="JSON Lines output, one document a line (default: stdout)",
    )
    parser.add_argument(
        "--state",
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
        type=positive(int),
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help="searches, and fetches, in flight at once (default: %(default)s)",
    )
    shared = parser.add_argument_group(
        "several workers (needs redis-py: pip install 'magisterium-async[redis]')"
    )
    shared.add_argument(
        "--redis",
        metavar="URL",
        help="share the quota and the work through this Redis (default: "
        "$MAGISTERIUM_REDIS_URL, which alone only shares the quota); needs --job",
    )
    shared.add_argument(
        "--job",
        metavar="NAME",
        help="the name of the harvest several invocations share, the same on each (letters, "
        "digits, . _ -); use a new name for a new harvest",
    )
    shared.add_argument(
        "--workers",
        type=positive(int),
        default=1,
        metavar="N",
        help="run N worker processes on this host; needs --out (default: 1)",
    )
    parser.add_argument("--worker-barrier", action="store_true", help=argparse.SUPPRESS)


async def _run(invocation: Invocation) -> int:
    args = invocation.args
    if args.workers > 1 and not args.worker_barrier:
        from magisterium_async._cli.harvest._workers import run_workers

        return await run_workers(invocation)
    from magisterium_async._cli.harvest._run import run_harvest

    return await run_harvest(invocation)


COMMAND = Command(
    "harvest",
    "search every query, fetch every document found, write JSONL",
    _run,
    _arguments,
    epilog=_EPILOG,
)
