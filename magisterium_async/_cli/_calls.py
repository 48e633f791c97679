"""The commands that are one call to the service, its answer shown: one per skill (``ask``,
``search``, ``fetch``, ``readings``, ``saints``, and a lookup per row of the skill table:
``saint-lookup``, ``pope-lookup``, ...), the protocol's task calls (``task get|cancel|list``;
no quota), ``card`` (the agent card and the dialect the server speaks; no quota) and
``quota`` (what is left of the quota now; it sends nothing)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from magisterium_async._cli._client import open_client
from magisterium_async._cli._command import Command, Group, Invocation, Run, with_client
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._options import add_redis_option, number
from magisterium_async._cli._output import (
    duration,
    quoted,
    show_answer,
    show_document,
    show_lookup,
    show_results,
    show_task,
    show_text,
)
from magisterium_async._config import redis_url
from magisterium_async._errors import InvalidParamsError, TaskNotCancelableError
from magisterium_async._models import Lookup, TaskPage
from magisterium_async._skills import LOOKUPS, Skill

if TYPE_CHECKING:  # the client loads when a command runs, not for --help
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._ratelimit import PoolQuota

__all__ = ["COMMANDS"]

Call = Callable[[Invocation, "AsyncMagisterium"], Awaitable[int]]


def _words(name: str, help: str, nargs: str = "+") -> Callable[[argparse.ArgumentParser], object]:
    """The command's one positional argument: words, joined by spaces (quotes optional)."""
    return lambda parser: parser.add_argument(name, nargs=nargs, help=help)


async def _ask(invocation: Invocation, client: AsyncMagisterium) -> int:
    args = invocation.args
    answer = await client.ask(" ".join(args.question), context_id=args.context_id)
    invocation.output.result(answer, lambda: show_answer(answer))
    return ExitCode.OK


def _ask_arguments(parser: argparse.ArgumentParser) -> None:
    _words("question", "the question (quotes optional)")(parser)
    parser.add_argument("--context-id", help="continue the conversation of an earlier answer")


async def _search(invocation: Invocation, client: AsyncMagisterium) -> int:
    query = " ".join(invocation.args.query)
    results = await client.search(query)
    invocation.output.result(results, lambda: show_results(query, results))
    return ExitCode.OK


async def _fetch(invocation: Invocation, client: AsyncMagisterium) -> int:
    document = await client.fetch(invocation.args.id)
    if document is None:
        raise CliError(f"document {quoted(invocation.args.id)} not found", ExitCode.NOT_FOUND)
    invocation.output.result(document, lambda: show_document(document))
    return ExitCode.OK


def _when(invocation: Invocation) -> str:
    # "" is a blank day: refused as the library refuses it, never taken for today.
    return " ".join(invocation.args.when) if invocation.args.when else "today"


async def _readings(invocation: Invocation, client: AsyncMagisterium) -> int:
    when = _when(invocation)
    text = await client.mass_readings(when)
    if text is None:
        raise CliError(f"no Mass readings found for {quoted(when)}", ExitCode.NOT_FOUND)
    invocation.output.result({"when": when, "text": text}, lambda: show_text(text))
    return ExitCode.OK


async def _saints(invocation: Invocation, client: AsyncMagisterium) -> int:
    when = _when(invocation)
    try:
        day: str | dt.date = dt.date.fromisoformat(when)
    except ValueError as exc:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", when):  # in form, not in fact: 2026-02-30
            raise CliError(f"{when} is not a date: {exc}", ExitCode.USAGE) from None
        day = when
    text = await client.saints(day)
    if text is None:
        raise CliError(f"no martyrology found for {quoted(when)}", ExitCode.NOT_FOUND)
    invocation.output.result({"when": str(day), "text": text}, lambda: show_text(text))
    return ExitCode.OK


def _lookup_command(skill: Skill[str, Lookup]) -> Command:
    """The command of a lookup: its skill id with dashes, running the client's method of
    that id; it prints what the service sent (text, then data; ``--json``: the Lookup)."""

    async def lookup(invocation: Invocation, client: AsyncMagisterium) -> int:
        method: Callable[[str], Awaitable[Lookup]] = getattr(client, skill.id)
        found = await method(" ".join(invocation.args.query))
        invocation.output.result(found, lambda: show_lookup(found))
        return ExitCode.OK

    summary = skill.description.split(":", 1)[0]
    return Command(
        skill.id.replace("_", "-"),
        summary[:1].lower() + summary[1:],
        with_client(lookup, f"looking up with {skill.id}"),
        _words("query", "a name, or a canonical id (quotes optional)"),
        epilog=f"The service states no shape for {skill.id}'s answer: the text and the data "
        "it sent are printed as they came (--json: with the full task).",
    )


def _on_a_server(run: Call, label: str) -> Run:
    """``run`` with a client, refusing ``--emulator``: a task never outlives its emulator."""
    connected = with_client(run, label, "unmetered")

    async def checked(invocation: Invocation) -> int:
        if invocation.args.emulator:
            raise CliError(
                "--emulator starts a fresh emulator for this one command, which knows no task "
                "yet: run `magisterium-async emulator` in another terminal, then point this "
                "command at it with the MAGISTERIUM_BASE_URL and MAGISTERIUM_TOKEN it prints",
                ExitCode.USAGE,
            )
        return await connected(invocation)

    return checked


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


async def _list(invocation: Invocation, client: AsyncMagisterium) -> int:
    args = invocation.args
    page = await client.list_tasks(
        context_id=args.context,
        state=args.state,
        page_size=args.page_size,
        page_token=args.page_token,
        include_artifacts=args.artifacts,
    )

    def show(page: TaskPage = page) -> None:
        for task in page.tasks:
            stamp = task.status.timestamp or ""
            print(f"{task.id}  {task.state:<15} {stamp}  context {task.context_id}")
        if page.next_page_token:
            print(f"(more: --page-token {page.next_page_token})")

    invocation.output.result(page, show)
    return ExitCode.OK


async def _card(invocation: Invocation, client: AsyncMagisterium) -> int:
    from magisterium_async._http._dialect import offered

    card = await client.agent_card()
    dialect = offered(card, client.base_url)
    endpoint = dialect.url or client.base_url
    if dialect.version == "1.0":
        speaks = "A2A 1.0 JSON-RPC (SendMessage, GetTask, CancelTask, ListTasks)"
    else:
        said = f", card protocolVersion {card.protocol_version}" if card.protocol_version else ""
        speaks = f"A2A 0.3 JSON-RPC (message/send, tasks/get, tasks/cancel{said})"
    lines = [
        f"{card.name}" + (f" (version {card.version})" if card.version else ""),
        f"  card:     {client.agent_card_url}",
        f"  speaks:   {speaks}",
        f"  endpoint: {endpoint}",
        f"  skills:   {', '.join(skill.id for skill in card.skills) or '(none listed)'}",
    ]
    record = {
        "card_url": client.agent_card_url,
        "protocol": dialect.version,
        "endpoint": endpoint,
        "card": msgspec.to_builtins(card),
    }
    invocation.output.result(record, lambda: print("\n".join(lines)))
    return ExitCode.OK


_WHAT = {"default": "every skill but ask", "expensive": "ask"}


def _line(pool: PoolQuota) -> str:
    head = f"{pool.pool} ({_WHAT[pool.pool]}):"
    if pool.unlimited:
        return f"{head} unlimited"
    # A limit of 1 or more per period counts whole starts (2.9 allows 2): only below that
    # did the service's refusals lower it. Below 1 per period (one start per longer
    # window) it cannot be lowered at all, and its limit is only the float it was.
    lowered = pool.configured >= 1 and pool.limit < math.floor(pool.configured)
    next_in = pool.next_start_in
    text = (
        f"{head} {pool.used} of {pool.limit:g} per {pool.period:g} s used"
        + (f" (lowered from {pool.configured:g} after the service refused)" if lowered else "")
        + f", {pool.left} left; next request {f'in {duration(next_in)}' if next_in > 0 else 'now'}"
    )
    if pool.paused_for > 0:
        text += f" (paused after a 429 for {duration(pool.paused_for)} more)"
    return text


async def _quota(invocation: Invocation) -> int:
    url = redis_url(invocation.args.redis)
    # Without a shared quota there is nothing to read but this process's own view: no
    # token is needed for it (with one, the token names whose quota it is).
    async with open_client(invocation.args, sends=url is not None) as client:
        quota = await client.quota()
    pools = {}
    for pool in quota.pools:  # JSON has no infinity: null for what an unlimited pool lacks
        record = dataclasses.asdict(pool)
        pools[pool.pool] = {k: None if v == math.inf else v for k, v in record.items()}
    if all(pool.unlimited for pool in quota.pools):
        source = "no quota to count: both pools are unlimited"
    elif quota.shared:
        source = "from the shared quota in Redis: every process's requests on this token"
    elif url is not None:
        source = (
            "Redis did not answer: this process's view only, which has sent nothing, so "
            "other processes' requests are not counted"
        )
    else:
        source = (
            "this process's view only (a new process has sent nothing): give --redis URL or "
            "$MAGISTERIUM_REDIS_URL to count every process's requests on the token"
        )

    def show() -> None:
        print("\n".join([*map(_line, quota.pools), f"({source})"]))

    invocation.output.result({"shared": quota.shared, "pools": pools}, show)
    return ExitCode.OK


_DAY = "a day in words: today (default), next Sunday, Easter Sunday 2026"
_TASK_ID = "the task id (ask prints it)"

COMMANDS: tuple[Command | Group, ...] = (
    Command(
        "ask",
        "ask catholic_qa a question (slow; the expensive quota)",
        with_client(_ask, "asking catholic_qa", "expensive"),
        _ask_arguments,
        epilog="--json prints the Answer with its citations and the full task it came from.",
    ),
    Command(
        "search",
        "semantic search over the documents",
        with_client(_search, "searching"),
        _words("query", "what to look for (quotes optional)"),
    ),
    Command(
        "fetch",
        "one document's text and metadata",
        with_client(_fetch, "fetching the document"),
        lambda parser: parser.add_argument("id", help="the document id (as search shows it)"),
    ),
    Command(
        "readings",
        "the Mass readings of a day",
        with_client(_readings, "getting the Mass readings"),
        _words("when", _DAY, "*"),
    ),
    Command(
        "saints",
        "the Roman Martyrology of a day",
        with_client(_saints, "getting the martyrology"),
        _words("when", f"YYYY-MM-DD or {_DAY}", "*"),
    ),
    *(_lookup_command(skill) for skill in LOOKUPS),
    Group("task", "the protocol's task calls (spend no quota)"),
    Command(
        "task get",
        "a task by id (kept 24 hours)",
        _on_a_server(_get, "getting the task"),
        lambda parser: parser.add_argument("id", help=_TASK_ID),
    ),
    Command(
        "task cancel",
        "ask to cancel a task",
        _on_a_server(_cancel, "cancelling the task"),
        lambda parser: parser.add_argument("id", help=_TASK_ID),
    ),
    Command(
        "task list",
        "your tasks, newest first (A2A 1.0 servers only)",
        _on_a_server(_list, "listing the tasks"),
        _list_arguments,
    ),
    Command(
        "card",
        "the agent card and the A2A dialect the server speaks (spends no quota)",
        with_client(_card, "reading the agent card", "unmetered"),
    ),
    Command(
        "quota",
        "what is left of the quota now, per pool, and when the next request may go "
        "(sends nothing, spends no quota)",
        _quota,
        lambda parser: add_redis_option(parser, "read the token's shared quota from this Redis"),
    ),
)
