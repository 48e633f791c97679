"""``task get``, ``task cancel`` and ``task list``: the protocol's task calls (they spend no
quota; ``task list`` needs a server of A2A 1.0)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magisterium_async._cli._command import Command, Group, Invocation, Run, with_client
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._options import number
from magisterium_async._cli._output import show_task
from magisterium_async._errors import InvalidParamsError, TaskNotCancelableError
from magisterium_async._models import TaskPage

if TYPE_CHECKING:  # the client loads when a command runs, not for --help
    from magisterium_async._client import AsyncMagisterium

__all__ = ["COMMANDS"]


def _on_a_server(run: Callable[[Invocation, AsyncMagisterium], Awaitable[int]], label: str) -> Run:
    """``run`` with a client, refusing ``--emulator``: a task never outlives its emulator."""
    connected = with_client(run, label, "unmetered")

    async def checked(invocation: Invocation) -> int:
        if invocation.options.emulator:
            raise CliError(
                "--emulator starts a fresh emulator for this one command, which knows no task "
                "yet: run `magisterium-async emulator` in another terminal, then point this "
                "command at it with the MAGISTERIUM_BASE_URL and MAGISTERIUM_TOKEN it prints",
                ExitCode.USAGE,
            )
        return await connected(invocation)

    return checked


def _task_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the task id (ask prints it)")


async def _get(invocation: Invocation, client: AsyncMagisterium) -> int:
    task = await client.get_task(invocation.args.id)
    invocation.output.result(task, lambda: show_task(task))
    return ExitCode.OK


async def _cancel(invocation: Invocation, client: AsyncMagisterium) -> int:
    task_id = invocation.args.id
    try:
        task = await client.cancel_task(task_id)
    except (InvalidParamsError, TaskNotCancelableError) as exc:
        # The service refuses to cancel a task that has ended ("Invalid state
        # transition"); every task has ended by the time its answer comes.
        state = exc.data.get("state") if isinstance(exc.data, dict) else None
        said = " ".join(str(exc).split())
        raise CliError(
            f"task {task_id} {f'is already {state}' if state else 'was not cancelled'}: only a "
            f"task still running can be cancelled (the service answered: {said})"
        ) from None
    invocation.output.result(task, lambda: show_task(task))
    return ExitCode.OK


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context", metavar="ID", help="only the tasks of this context")
    parser.add_argument("--state", help="only the tasks in this state (completed, failed, ...)")
    parser.add_argument("--page-size", type=number(int, 1), metavar="N", help="tasks per page")
    parser.add_argument("--page-token", metavar="TOKEN", help="the page after this token's")
    parser.add_argument("--artifacts", action="store_true", help="include the tasks' artifacts")


def _show_page(page: TaskPage) -> None:
    for task in page.tasks:
        stamp = task.status.timestamp or ""
        print(f"{task.id}  {task.state:<15} {stamp}  context {task.context_id}")
    if page.next_page_token:
        print(f"(more: --page-token {page.next_page_token})")


async def _list(invocation: Invocation, client: AsyncMagisterium) -> int:
    args = invocation.args
    page = await client.list_tasks(
        context_id=args.context,
        state=args.state,
        page_size=args.page_size,
        page_token=args.page_token,
        include_artifacts=args.artifacts,
    )
    invocation.output.result(page, lambda: _show_page(page))
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
    Command(
        "task list",
        "your tasks, newest first (A2A 1.0 servers only)",
        _on_a_server(_list, "listing the tasks"),
        _list_arguments,
    ),
)
