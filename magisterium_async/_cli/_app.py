"""Running the command line: parse, run the command, turn what went wrong into an exit code.

SIGINT (Ctrl-C) and SIGTERM (what ``timeout``, systemd, Kubernetes and CI send) stop a
command the same way: its task is cancelled, so it cleans up as it would on any error (a
harvest flushes its output, closes its state and prints its summary), then the process
exits 130 or 143.
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

from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._errors import (
    CliError,
    ExitCode,
    Interrupted,
    UsageError,
    describe,
    exit_code_for,
)
from magisterium_async._cli._options import output
from magisterium_async._cli._output import Output
from magisterium_async._cli._parser import PROG, build_parser
from magisterium_async._errors import MagisteriumError
from magisterium_async._events import log_to_stderr

__all__ = ["main"]

_STOPPING = (signal.SIGINT, signal.SIGTERM)


def _error(message: str, output: Output | None = None, code: int = ExitCode.ERROR) -> None:
    """The error on stderr: one line for people, or under ``--json`` one JSON object."""
    if output is not None and output.json:
        record = {"error": message, "exit_code": int(code)}
        print(json.dumps(record), file=sys.stderr, flush=True)
    else:
        print(f"{PROG}: error: {message}", file=sys.stderr)


async def _run(command: Command, invocation: Invocation) -> int:
    """Run ``command``; a stopping signal cancels it and becomes :class:`Interrupted`."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        task.cancel()  # a second signal cancels the cleanup too, but not shielded writes

    installed = []
    for signum in _STOPPING:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # Windows
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
    try:
        return await command.run(invocation)
    except asyncio.CancelledError:
        if not received:
            raise
        raise Interrupted(received[0]) from None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or a prefix argparse takes for it) stands among the options of
    ``argv``, wherever: what a usage error, found before the options are known, goes by."""
    for word in argv:
        if word == "--":
            return False
        if word.startswith("--j") and "--json".startswith(word):
            return True
    return False


def _usage_error(error: UsageError, argv: Sequence[str]) -> int:
    if _wants_json(argv):
        _error(error.message, Output(json=True), ExitCode.USAGE)
    else:  # as argparse prints it: the command's usage, then the line
        error.parser.print_usage(sys.stderr)
        print(f"{error.parser.prog}: error: {error.message}", file=sys.stderr)
    return ExitCode.USAGE


# A word argparse takes for an option though no option of ours starts with a digit: it
# lets ``-5`` and ``-0.5`` through as values, and only those.
_NOT_A_PLAIN_NUMBER = re.compile(r"-[0-9](?![0-9]*$|[0-9]*\.[0-9]+$)")


def _taking_values(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``parser`` and its commands' parsers that take a value."""
    found: set[str] = set()
    for action in parser._actions:  # argparse keeps them here; no public way to list them
        if action.option_strings and action.nargs != 0:
            found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found |= _taking_values(command)
    return found


def _negative_values_joined(argv: list[str], options: set[str]) -> list[str]:
    """``--quota -1/2`` as ``--quota=-1/2`` for each of ``options`` (those that take a
    value): argparse takes a value starting with ``-`` for an option unless it is a plain
    number, and says "expected one argument" instead of what is wrong with the value. A
    word with a space (``ask "-3 reasons for hope?"``) is a question, never joined."""
    joined: list[str] = []
    for word in argv:
        previous = joined[-1] if joined else ""
        if (
            previous in options
            and "--" not in joined
            and _NOT_A_PLAIN_NUMBER.match(word)
            and not any(c.isspace() for c in word)
        ):
            joined[-1] = f"{previous}={word}"
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(_ClosedStdout(), write_through=True)
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    argv = _negative_values_joined(argv, _taking_values(parser))
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return _usage_error(error, argv)
    if args.verbose:
        log_to_stderr(logging.INFO if args.verbose == 1 else logging.DEBUG)
    invocation = Invocation(args, output(args))
    try:
        return asyncio.run(_run(args.command, invocation))
    except Interrupted as stopped:
        if not invocation.output.summarized:  # a summary already says it was interrupted
            _error(str(stopped), invocation.output, stopped.code)
        return stopped.code
    except KeyboardInterrupt:  # before the handlers are in place, or where there are none
        _error("interrupted", invocation.output, ExitCode.INTERRUPTED)
        return ExitCode.INTERRUPTED
    except (CliError, MagisteriumError, ValueError) as exc:
        code = exit_code_for(exc)
        _error(describe(exc), invocation.output, code)
        return code
    except BrokenPipeError:
        # The reader went away (``| head``): exit quietly, without a second error at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except OSError as exc:  # stdout that cannot be written: as harvest's --out, exit 2
        code = exit_code_for(exc)
        _error(describe(exc), invocation.output, code)
        return code
