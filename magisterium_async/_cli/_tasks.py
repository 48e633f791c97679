"""``task get`` and ``task cancel``: the protocol's task calls (they spend no quota)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from magisterium_async._cli._command import Command, Group, Invocation, Run, with_client
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import show_task
from magisterium_async._client import AsyncMagisterium

__all__ = ["COMMANDS"]

NO_TASKS_OFFLINE = (
    "--emulator starts a fresh emulator for this one command, which knows no task yet: "
    "run `magisterium-async emulator` in another terminal, then point this command at it "
    "with the MAGISTERIUM_BASE_URL and MAGISTERIUM_TOKEN it prints"
)


def _on_a_server(run: Callable[[Invocation, AsyncMagisterium], Awaitable[int]], label: str) -> Run:
    """``run`` with a client, refusing ``--emulator``: a task never outlives its emulator."""
    connected = with_client(run, label, "unmetered")

    async def checked(invocation: Invocation) -> int:
        if invocation.options.emulator:
            raise CliError(NO_TASKS_OFFLINE, ExitCode.USAGE)
        return await connected(invocation)

    return checked


def _task_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the task id (ask prints it)")


async def _get(invocation: Invocation, client: AsyncMagisterium) -> int:
    task = await client.get_task(invocation.args.id)
    invocation.output.result(task, lambda: show_task(task))
    return ExitCode.OK


async def _cancel(invocation: Invocation, client: AsyncMagisterium) -> int:
    task = await client.cancel_task(invocation.args.id)
    invocation.output.result(task, lambda: show_task(task))
    return ExitCode.OK


COMMANDS = (
    Group("task", "the protocol's task calls (spend no quota)"),
    Command(
        "task get", "a task by id (kept 24 hours)", _on_a_server(_get, "getting the task"), _task_id
    ),
    Command(
        "task cancel",
        "ask to cancel a task",
        _on_a_server(_cancel, "cancelling the task"),
        _task_id,
    ),
)
