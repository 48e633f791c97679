"""``magisterium-async``: the command line of the SDK (also ``python -m magisterium_async``).

One subcommand per skill (``ask``, ``search``, ``fetch``, ``readings``, ``saints``), the
protocol's task calls (``task get|cancel``), ``harvest`` for bulk downloads and
``emulator`` to serve the offline emulator. Every client command takes ``--emulator`` to
run against an in-process emulator: no token, no network.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

from ._batch import DEFAULT_CONCURRENCY
from ._cli_client import ClientOptions, open_client
from ._cli_errors import EXIT_CODES_HELP, CliError, ExitCode, describe, exit_code_for
from ._cli_output import (
    print_json,
    show_answer,
    show_document,
    show_results,
    show_task,
    show_text,
)
from ._cli_workers import HARVEST_EPILOG
from ._client import AsyncMagisterium
from ._config import RateLimits
from ._errors import MagisteriumError
from ._version import __version__

__all__ = ["build_parser", "main"]

PROG = "magisterium-async"

Command = Callable[[argparse.Namespace, AsyncMagisterium], Awaitable[int]]

_EPILOG = f"""\
environment:
  MAGISTERIUM_TOKEN     the API token (or --token-file PATH)
  MAGISTERIUM_BASE_URL  the endpoint (or --base-url URL)

examples:
  {PROG} harvest --emulator --query grace --query Eucharist --out docs.jsonl
  {PROG} search --emulator "grace and nature"
  {PROG} ask "What is grace?" --json
  {PROG} saints 2026-03-19
  {PROG} emulator --port 8765

{EXIT_CODES_HELP}
"""


def _quota(text: str) -> RateLimits:
    if text == "unlimited":
        return RateLimits.unlimited()
    try:
        numbers = [float(part) for part in text.split("/")]
        if len(numbers) not in (2, 3):
            raise ValueError
        return RateLimits(numbers[0], numbers[1], period=numbers[2] if len(numbers) == 3 else 60)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"expected DEFAULT/EXPENSIVE[/PERIOD] (like 15/2 or 15/2/60) or unlimited, got {text!r}"
        ) from None


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _add_output(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else False
    parser.add_argument(
        "--json", action="store_true", default=default, help="machine output: JSON on stdout"
    )


def _add_client_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The options every client command takes, before or after the command's name.

    On the subcommands they default to ``SUPPRESS``, so the main parser's values stand
    unless the option is given after the command.
    """

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    _add_output(parser, suppress)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--token-file",
        metavar="PATH",
        default=default(None),
        help="read the token from PATH instead of $MAGISTERIUM_TOKEN",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        default=default(None),
        help="the A2A endpoint (default: $MAGISTERIUM_BASE_URL, then the service)",
    )
    group.add_argument(
        "--quota",
        type=_quota,
        metavar="D/E[/PERIOD]",
        default=default(None),
        help="requests per period (60 s) the client allows itself in the default and the "
        "expensive pool, or 'unlimited' (default: the Pro plan, 15/2)",
    )
    group.add_argument(
        "--timeout",
        type=_positive(float),
        metavar="SECONDS",
        default=default(None),
        help="per request (default: 30, and 300 for ask)",
    )
    group.add_argument(
        "--max-retries",
        type=int,
        metavar="N",
        default=default(2),
        help="retries of transient failures per call (default: 2)",
    )
    offline = parser.add_argument_group("offline")
    offline.add_argument(
        "--emulator",
        action="store_true",
        default=default(False),
        help="run against an in-process emulator: no token, no network, limits lifted",
    )
    offline.add_argument(
        "--emulator-limits",
        action="store_true",
        default=default(False),
        help="with --emulator: enforce the Pro plan's quota (15/2 a minute), client and server",
    )
    offline.add_argument(
        "--synthetic",
        type=_positive(int),
        metavar="N",
        default=default(None),
        help="with --emulator: serve N synthetic documents instead of the bundled corpus",
    )


def _emit(args: argparse.Namespace, value: object, show: Callable[[], None]) -> None:
    if args.json:
        print_json(value)
    else:
        show()


def _words(values: Sequence[str]) -> str:
    return " ".join(values)


async def _ask(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    answer = await client.ask(_words(args.question), context_id=args.context_id)
    _emit(args, answer, lambda: show_answer(answer))
    return ExitCode.OK


async def _search(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    query = _words(args.query)
    results = await client.search(query)
    _emit(args, results, lambda: show_results(query, results))
    return ExitCode.OK


async def _fetch(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    document = await client.fetch(args.id)
    if document is None:
        raise CliError(f"document {args.id} not found", ExitCode.NOT_FOUND)
    _emit(args, document, lambda: show_document(document))
    return ExitCode.OK


def _when(words: Sequence[str]) -> str:
    return _words(words) or "today"


async def _readings(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    when = _when(args.when)
    text = await client.mass_readings(when)
    if text is None:
        raise CliError(f"no Mass readings found for {when!r}", ExitCode.NOT_FOUND)
    _emit(args, {"when": when, "text": text}, lambda: show_text(text))
    return ExitCode.OK


async def _saints(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    when = _when(args.when)
    try:
        day: str | dt.date = dt.date.fromisoformat(when)
    except ValueError:
        day = when
    text = await client.saints(day)
    if text is None:
        raise CliError(f"no martyrology found for {when!r}", ExitCode.NOT_FOUND)
    _emit(args, {"when": str(day), "text": text}, lambda: show_text(text))
    return ExitCode.OK


async def _task_get(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    task = await client.get_task(args.id)
    _emit(args, task, lambda: show_task(task))
    return ExitCode.OK


async def _task_cancel(args: argparse.Namespace, client: AsyncMagisterium) -> int:
    task = await client.cancel_task(args.id)
    _emit(args, task, lambda: show_task(task))
    return ExitCode.OK


def _command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    run: Command | None = None,
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=help, description=help)
    if run is not None:
        _add_client_options(parser, suppress=True)
        parser.set_defaults(run=run)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``magisterium-async``."""
    from ._cli_emulator import add_emulator_arguments

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Query the Magisterium A2A API from the command line.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_client_options(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ask = _command(commands, "ask", "ask catholic_qa a question (slow; the expensive quota)", _ask)
    ask.add_argument("question", nargs="+", help="the question (quotes optional)")
    ask.add_argument("--context-id", help="continue the conversation of an earlier answer")
    ask.epilog = "--json prints the Answer with its citations and the full task it came from."

    search = _command(commands, "search", "semantic search over the documents", _search)
    search.add_argument("query", nargs="+", help="what to look for (quotes optional)")

    fetch = _command(commands, "fetch", "one document's text and metadata", _fetch)
    fetch.add_argument("id", help="the document id (as search shows it)")

    readings = _command(commands, "readings", "the Mass readings of a day", _readings)
    readings.add_argument(
        "when", nargs="*", help="a day in words: today (default), next Sunday, Easter Sunday 2026"
    )
    saints = _command(commands, "saints", "the Roman Martyrology of a day", _saints)
    saints.add_argument("when", nargs="*", help="YYYY-MM-DD or words (default: today)")

    task = _command(commands, "task", "the protocol's task calls (spend no quota)")
    task_commands = task.add_subparsers(dest="task_command", metavar="ACTION", required=True)
    get = _command(task_commands, "get", "a task by id (kept 24 hours)", _task_get)
    cancel = _command(task_commands, "cancel", "ask to cancel a task", _task_cancel)
    for sub in (get, cancel):
        sub.add_argument("id", help="the task id (ask prints it)")

    harvest = _command(
        commands, "harvest", "search every query, fetch every document found, write JSONL"
    )
    _add_client_options(harvest, suppress=True)
    harvest.set_defaults(run=None, harvest=True)
    harvest.add_argument(
        "queries", nargs="*", metavar="QUERIES_FILE", help="one query a line; - for stdin"
    )
    harvest.add_argument("-q", "--query", action="append", default=[], help="a query (repeatable)")
    harvest.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="JSON Lines output, one document a line (default: stdout)",
    )
    harvest.add_argument(
        "--state",
        metavar="PATH",
        help="the resumable state (default: FILE.state.sqlite with --out)",
    )
    harvest.add_argument(
        "--resume",
        action="store_true",
        help="continue the harvest of --out/--state, appending to --out; without it, an "
        "existing --out or state is an error",
    )
    harvest.add_argument(
        "--concurrency",
        type=_positive(int),
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help="searches, and fetches, in flight at once (default: %(default)s)",
    )
    shared = harvest.add_argument_group(
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
        type=_positive(int),
        default=1,
        metavar="N",
        help="run N worker processes on this host; needs --out (default: 1)",
    )
    harvest.add_argument("--worker-barrier", action="store_true", help=argparse.SUPPRESS)
    harvest.formatter_class = argparse.RawDescriptionHelpFormatter
    harvest.epilog = HARVEST_EPILOG

    emulator = _command(
        commands, "emulator", "serve the offline emulator until Ctrl-C (prints how to use it)"
    )
    _add_output(emulator, suppress=True)
    emulator.add_argument(
        "--synthetic",
        type=_positive(int),
        metavar="N",
        default=argparse.SUPPRESS,
        help="serve N synthetic documents instead of the bundled corpus",
    )
    add_emulator_arguments(emulator)
    emulator.set_defaults(run=None, serve=True)
    return parser


def _options(args: argparse.Namespace) -> ClientOptions:
    return ClientOptions(
        token_file=args.token_file,
        base_url=args.base_url,
        quota=args.quota,
        timeout=args.timeout,
        max_retries=args.max_retries,
        emulator=args.emulator,
        emulator_limits=args.emulator_limits,
        synthetic=args.synthetic,
    )


async def _run(args: argparse.Namespace) -> int:
    if getattr(args, "serve", False):
        from ._cli_emulator import serve

        return await serve(args)
    if getattr(args, "harvest", False):
        from ._cli_harvest import run_harvest

        return await run_harvest(args, _options(args))
    async with open_client(_options(args)) as client:
        result: int = await args.run(args, client)
        return result


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        _error("interrupted")
        return ExitCode.INTERRUPTED
    except (CliError, MagisteriumError, ValueError) as exc:
        _error(describe(exc))
        return exit_code_for(exc)
    except BrokenPipeError:
        # The reader went away (``| head``): exit quietly, without a second error at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except OSError as exc:
        _error(describe(exc))
        return ExitCode.ERROR
