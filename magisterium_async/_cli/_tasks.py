"""``task get`` and ``task cancel``: the protocol's task calls (they spend no quota)."""

from __future__ import annotations

import argparse

from .._client import AsyncMagisterium
from ._command import Command, Group, Invocation, with_client
from ._errors import ExitCode
from ._output import show_task

__all__ = ["COMMANDS"]


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
    Command("task get", "a task by id (kept 24 hours)", with_client(_get), _task_id),
    Command("task cancel", "ask to cancel a task", with_client(_cancel), _task_id),
)
