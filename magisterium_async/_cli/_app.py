"""Running the command line: parse, run the command, turn what went wrong into an exit code."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence

from .._errors import MagisteriumError
from ._command import Command, Invocation
from ._errors import CliError, ExitCode, describe, exit_code_for
from ._options import output
from ._parser import PROG, build_parser

__all__ = ["main"]


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    args = build_parser().parse_args(argv)
    command: Command = args.command
    try:
        return asyncio.run(command.run(Invocation(args, output(args))))
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
