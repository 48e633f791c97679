"""The command line: its commands, its parser, and running one: parse, run the command,
turn what went wrong into an exit code.

:data:`COMMANDS` is where a command is registered: once, in the order ``--help`` lists
them (:mod:`._command` says what a command is and declares the options they share).

SIGINT (Ctrl-C) and SIGTERM (what ``timeout``, systemd, Kubernetes and CI send) stop a
command the same way: its task is cancelled, so it cleans up as it would on any error (a
harvest flushes its output, closes its state and prints its summary), then the process
exits 130 or 143. Once the command is done, Ctrl-C is ignored until the event loop is
closed: a late one (the third of three) cannot break the loop's cleanup, which stops the
worker threads the process waits for at exit. Ctrl-C while the command line is parsed is
said as an error too (under ``--json`` as JSON); only one during Python's imports of the
package, before :func:`main` runs, is a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import io
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from magisterium_async._cli import _auth, _calls, _emulator, harvest
from magisterium_async._cli._command import Command, add_commands, add_options
from magisterium_async._cli._errors import (
    EXIT_CODES_HELP,
    CliError,
    ExitCode,
    UsageError,
    describe,
    exit_code_for,
)
from magisterium_async._cli._output import Output
from magisterium_async._cli.harvest import _rebuild
from magisterium_async._errors import MagisteriumError, masked_text
from magisterium_async._events import log_to_stderr
from magisterium_async._version import __version__

__all__ = ["COMMANDS", "PROG", "build_parser", "main"]

PROG = "magisterium-async"

COMMANDS: tuple[Command, ...] = (
    *_calls.COMMANDS,
    harvest.COMMAND,
    _rebuild.COMMAND,
    *_auth.COMMANDS,
    _emulator.COMMAND,
)
GROUPS = {"task": "the protocol's task calls (spend no quota)", "auth": "the stored sign-in"}
"""The first word of commands of two words (``task get``), and what they are."""

_EPILOG = f"""\
environment:
  MAGISTERIUM_TOKEN     the API token (or --token-file PATH; else the sign-in of login)
  MAGISTERIUM_CREDENTIALS  where login keeps the sign-in (or --credentials PATH|URL)
  MAGISTERIUM_BASE_URL  the endpoint (or --base-url URL)
  MAGISTERIUM_QUOTA     the quota the client allows itself, D/E[/PERIOD] or unlimited
                        (or --quota)
  MAGISTERIUM_REDIS_URL  a Redis through which processes share the token's quota
                        (or --redis URL of harvest and quota)
  MAGISTERIUM_CACHE     where answers are kept: memory, a file or a Redis URL
                        (or --cache)
  MAGISTERIUM_LOG       the library's log on stderr: info or debug
  A value that cannot be right is an error naming its variable (exit 2), as a
  flag's is; MAGISTERIUM_LOG's is a warning.

examples:
  {PROG} login
  {PROG} harvest --emulator --query grace --query Eucharist --out docs.jsonl
  {PROG} search --emulator "grace and nature"
  {PROG} ask "What is grace?" --json
  {PROG} saints 2026-03-19
  {PROG} quota --json
  {PROG} emulator --port 8765

{EXIT_CODES_HELP}
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, raising :class:`UsageError` instead of printing: the caller
    prints it, as one line or as JSON. Commands' parsers are of this class too (argparse
    makes subparsers of their parent's class).

    argparse quotes what was typed (``unrecognized arguments: --redis URL``, ``invalid
    choice: 'URL'``): its messages show a URL's password masked, as every message does,
    and an ambiguous option's value not at all (``--tok=TOKEN``)."""

    _typed: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        self._typed = list(sys.argv[1:] if args is None else args)  # what it may quote
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"^(ambiguous option: [^=\s]+=).*?( could match )", r"\1...\2", message)
        raise UsageError(self, masked_text(message, self._typed))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``magisterium-async``."""
    parser = _Parser(
        prog=PROG,
        description="Query the Magisterium A2A API from the command line.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_options(parser, connects=True, suppress=False)
    add_commands(parser, COMMANDS, GROUPS)
    return parser


def _error(message: str, output: Output, code: int) -> None:
    """The error on stderr: one line for people, or under ``--json`` one JSON object. A
    reader of stderr gone (``2>&1 | head -1``) changes nothing: the exit code says it."""
    record = {"error": message, "exit_code": int(code)}
    line = json.dumps(record) if output.json else f"{PROG}: error: {message}"
    with contextlib.suppress(BrokenPipeError):
        print(line, file=sys.stderr, flush=True)


async def _run(
    command: Command, args: argparse.Namespace, output: Output, received: list[int]
) -> int:
    """Run ``command``; a stopping signal cancels it (it cleans up as on any error), and
    the exit code says which signal it was. The signals are added to ``received``."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(signum: int) -> None:
        received.append(signum)
        task.cancel()  # a second signal cancels the cleanup too, but not shielded writes

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # Windows
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
    try:
        return await command.run(args, output)
    except asyncio.CancelledError:
        if not received:
            raise
        code = ExitCode.TERMINATED if received[0] == signal.SIGTERM else ExitCode.INTERRUPTED
        if not output.summarized:  # a summary already says it was interrupted
            name = "SIGTERM" if code == ExitCode.TERMINATED else "Ctrl-C"
            _error(f"interrupted ({name})", output, code)
        return code
    finally:
        # The command done, Ctrl-C has nothing left to stop: ignored until closing the
        # loop restores the defaults, after its cleanup (the handlers removed here, a late
        # one raised KeyboardInterrupt in that cleanup, and the worker threads it stops
        # kept the process waiting at exit for good). SIGTERM ends it at once, as by
        # default: nothing is left to clean up, and a shutdown that hangs still ends.
        for signum in installed:
            signal.signal(signum, signal.SIG_IGN if signum == signal.SIGINT else signal.SIG_DFL)


def _values_joined(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``--quota -1/2`` as ``--quota=-1/2``: the word after an option that takes a value
    is its value, as getopt has it. argparse takes a word starting with ``-`` for an
    option unless it is a plain number, and says "expected one argument" instead of
    what is wrong with the value."""
    taking: set[str] = set()
    parsers = [parser]
    for each in parsers:  # argparse keeps them here; no public way to list them
        for action in each._actions:
            if action.option_strings and action.nargs != 0:
                taking.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    joined: list[str] = []
    for word in argv:
        if joined and joined[-1] in taking and word.startswith("-") and "--" not in joined:
            joined[-1] += f"={word}"
        else:
            joined.append(word)
    return joined


class _ClosedStdout(io.RawIOBase):
    """stdout for a process started with it closed (``>&-``): Python leaves ``sys.stdout``
    ``None``, which ``print()`` takes for "write nothing" and ``.buffer`` for a traceback.
    Every write fails instead, so the command says it cannot write stdout (exit 2)."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, "it is closed")


def _asks_json(words: list[str]) -> bool:
    """Whether ``--json``, or a prefix argparse takes for it, is among the options: what
    is said before the arguments are parsed (or when they cannot be) is a JSON object."""
    options = words[: words.index("--")] if "--" in words else words
    return any(w.startswith("--j") and "--json".startswith(w) for w in options)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    output = Output(json=_asks_json(words))  # until the arguments are parsed
    received: list[int] = []
    try:
        return _main(words, output, received)
    except KeyboardInterrupt:
        # While the arguments are parsed, before the handlers are in place or where there
        # are none (Windows), or in the instant after the loop closed.
        if not received:  # else the command said it was interrupted
            _error("interrupted (Ctrl-C)", output, ExitCode.INTERRUPTED)
        return ExitCode.INTERRUPTED


def _main(words: list[str], output: Output, received: list[int]) -> int:
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(_ClosedStdout(), write_through=True)
    parser = build_parser()
    words = _values_joined(words, parser)
    try:
        args = parser.parse_args(words)
    except UsageError as error:
        if _asks_json(words):  # a JSON object
            _error(error.message, Output(json=True), ExitCode.USAGE)
        else:  # as argparse prints it: the command's usage, then the line
            with contextlib.suppress(BrokenPipeError):
                error.parser.print_usage(sys.stderr)
                print(f"{error.parser.prog}: error: {error.message}", file=sys.stderr, flush=True)
        return ExitCode.USAGE
    except SystemExit as done:  # --help, --version: printed
        return int(done.code or 0)
    if args.verbose or args.json:
        # Under --json the library's warnings (a cache bypassed, Redis gone) are JSON
        # objects too, each a line: a program reading stderr parses every line.
        level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
        log_to_stderr(level, json=args.json)
    output.json = args.json
    try:
        return asyncio.run(_run(args.command, args, output, received))
    except BrokenPipeError:
        # The reader went away (``| head``): exit quietly, without a second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except (CliError, MagisteriumError, ValueError, OSError) as exc:
        code = exit_code_for(exc)
        _error(describe(exc), output, code)
        return code
