"""What a command is: a name, its own arguments and what it runs, registered once.

A :class:`Command` adds its parser (with the common options, and the connection options
when it talks to the service) and stores itself as the parser's default ``command``:
running the command line is ``args.command.run(Invocation(...))``, for every command.
Commands of two words (``task get``) live under a :class:`Group`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magisterium_async._cli._client import open_client
from magisterium_async._cli._errors import CliError, describe, exit_code_for
from magisterium_async._cli._options import add_common_options, add_connection_options
from magisterium_async._cli._output import Output
from magisterium_async._cli._status import Watch, status_line
from magisterium_async._errors import MagisteriumError, is_transient

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["Command", "Group", "Invocation", "Run", "add_commands", "with_client"]


@dataclass(frozen=True)
class Invocation:
    """One run of a command: its parsed arguments and the output mode they chose."""

    args: argparse.Namespace
    output: Output


Run = Callable[[Invocation], Coroutine[Any, Any, int]]


@dataclass(frozen=True)
class Command:
    """A command of the command line."""

    name: str
    """Its words after ``magisterium-async``: ``"search"``, or ``"task get"`` in a group."""
    help: str
    run: Run
    """Runs the command; returns the exit code."""
    arguments: Callable[[argparse.ArgumentParser], object] | None = None
    """Adds the command's own arguments to its parser."""
    connects: bool = True
    """Whether it talks to the service: it then takes the connection options."""
    epilog: str | None = None


@dataclass(frozen=True)
class Group:
    """A word that groups commands (``task`` for ``task get`` and ``task cancel``)."""

    name: str
    help: str


def with_client(
    run: Callable[[Invocation, AsyncMagisterium], Awaitable[int]],
    label: str,
    pool: str = "default",
) -> Run:
    """``run`` given a client opened from the connection options, its one call watched:
    on a terminal a status line says what it waits for (``label``: what the command does;
    ``pool``: the call's), and a failure after retries says how many requests it sent."""

    async def connected(invocation: Invocation) -> int:
        watch = Watch(label, pool)
        async with open_client(invocation.args, watch.on_event) as client:
            watch.attach(client)
            try:
                async with status_line(watch.text, changed=watch.changed):
                    return await run(invocation, client)
            except MagisteriumError as exc:
                if watch.attempts <= 1 or not is_transient(exc):
                    raise
                raise CliError(describe(exc, watch.attempts), exit_code_for(exc)) from exc

    return connected


if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_commands(parser: argparse.ArgumentParser, entries: Sequence[Command | Group]) -> None:
    """Add ``entries`` (in the order of ``--help``) to ``parser``; a command named
    ``"group word"`` goes under its group, which comes before it."""
    top: Subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    groups: dict[str, Subparsers] = {}
    for entry in entries:
        if isinstance(entry, Group):
            group = top.add_parser(entry.name, help=entry.help, description=entry.help)
            groups[entry.name] = group.add_subparsers(
                dest=f"{entry.name}_action", metavar="ACTION", required=True
            )
            continue
        head, _, word = entry.name.rpartition(" ")
        sub = (groups[head] if head else top).add_parser(
            word,
            help=entry.help,
            description=entry.help,
            epilog=entry.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_common_options(sub, suppress=True)
        if entry.connects:
            add_connection_options(sub, suppress=True)
        if entry.arguments is not None:
            entry.arguments(sub)
        sub.set_defaults(command=entry)
