"""The parser of ``magisterium-async``, and the table of its commands.

:data:`COMMANDS` is where a command is registered: once, in the order ``--help`` lists
them. The options of every command are declared in :mod:`._options`.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from magisterium_async._cli import _auth, _card, _emulator, _quota, _skills, _tasks
from magisterium_async._cli._command import Command, Group, add_commands
from magisterium_async._cli._errors import EXIT_CODES_HELP, UsageError
from magisterium_async._cli._options import add_common_options, add_connection_options
from magisterium_async._cli.harvest import _command as _harvest
from magisterium_async._cli.harvest import _rebuild
from magisterium_async._version import __version__

__all__ = ["COMMANDS", "PROG", "Parser", "build_parser"]

PROG = "magisterium-async"

COMMANDS: tuple[Command | Group, ...] = (
    *_skills.COMMANDS,
    *_tasks.COMMANDS,
    _harvest.COMMAND,
    _rebuild.COMMAND,
    _quota.COMMAND,
    *_auth.COMMANDS,
    _card.COMMAND,
    _emulator.COMMAND,
)

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


class Parser(argparse.ArgumentParser):
    """argparse's parser, raising :class:`UsageError` instead of printing: the caller
    prints it, as one line or as JSON. Commands' parsers are of this class too (argparse
    makes subparsers of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``magisterium-async``."""
    parser = Parser(
        prog=PROG,
        description="Query the Magisterium A2A API from the command line.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_common_options(parser, suppress=False)
    add_connection_options(parser, suppress=False)
    add_commands(parser, COMMANDS)
    return parser
