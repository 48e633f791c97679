"""The commands that are one call to the service, its answer shown: one per row of the skill
table (``ask``, ``search``, ``fetch``, ``readings``, ``saints``, and a lookup per lookup
skill: ``pope-lookup``, ...), the protocol's task calls (``task get|cancel|list``; no
quota), ``card`` (the agent card and the dialect the server speaks; no quota) and
``quota`` (what is left of the quota now; it sends nothing)."""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from typing import TYPE_CHECKING, Any

from magisterium_async._cli._client import open_client
from magisterium_async._cli._command import Command, Run, add_redis_option, number, with_client
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import Output, duration, quoted, show_result
from magisterium_async._config import REDIS_URL_ENV, from_env
from magisterium_async._errors import InvalidParamsError, TaskNotCancelableError
from magisterium_async._skills import ASK, FETCH, LOOKUPS, MASS_READINGS, SAINTS, SEARCH, Skill

if TYPE_CHECKING:  # the client loads when a command runs, not for --help
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._ratelimit import PoolQuota

__all__ = ["COMMANDS"]


def _skill_command(name: str, skill: Skill[Any, Any], method: str, label: str) -> Command:
    """The command of ``skill``: its argument in words (joined by spaces, quotes optional;
    optional where the skill has a default), sent by the client's ``method``; the answer
    shown, or ``--json`` the result (a text as ``{argument, "text"}``); "nothing found" is
    exit 6."""

    async def call(args: argparse.Namespace, output: Output, client: AsyncMagisterium) -> int:
        # "" is a blank argument, refused as the library refuses it, never the default.
        words = " ".join(args.words) if args.words else str(skill.default)
        argument = skill.from_text(words)  # saints: YYYY-MM-DD is a date (one that exists)
        options = {"context_id": args.context_id} if skill.conversation else {}
        result = await getattr(client, method)(argument, **options)
        if result is None:
            raise CliError(
                f"nothing found for {quoted(words)}: the service answered {skill.not_found!r}",
                ExitCode.NOT_FOUND,
            )
        value = (
            {skill.argument: str(argument), "text": result} if isinstance(result, str) else result
        )
        output.result(value, lambda: show_result(result, words))
        return ExitCode.OK

    def arguments(parser: argparse.ArgumentParser) -> None:
        about = skill.about.removesuffix(" null means today.")
        nargs = "+" if skill.default is None else "*"
        parser.add_argument("words", nargs=nargs, metavar=skill.argument.upper(), help=about)
        if skill.conversation:
            parser.add_argument("--context-id", help="continue the conversation of an answer")

    summary = re.split(r"[.:](?: |$)", skill.description)[0]
    return Command(
        name,
        summary[:1].lower() + summary[1:],
        with_client(call, label, skill.pool),
        arguments,
        epilog=textwrap.fill(skill.description, 88),
    )


def _on_a_server(
    call: Any,
    label: str,
    arguments: Any = lambda parser: parser.add_argument("id", help="the task id (ask prints it)"),
) -> tuple[Run, Any]:
    """A task call, refusing ``--emulator``: a task never outlives its emulator."""
    connected = with_client(call, label, "unmetered")

    async def checked(args: argparse.Namespace, output: Output) -> int:
        if args.emulator:
            raise CliError(
                "--emulator starts a fresh emulator for this one command, which knows no task "
                "yet: run `magisterium-async emulator` in another terminal, then point this "
                "command at it with the MAGISTERIUM_BASE_URL and MAGISTERIUM_TOKEN it prints",
            )
        return await connected(args, output)

    return checked, arguments


async def _get(args: argparse.Namespace, output: Output, client: AsyncMagisterium) -> int:
    task = await client.get_task(args.id)
    output.result(task, lambda: show_result(task, args.id))
    return ExitCode.OK


async def _cancel(args: argparse.Namespace, output: Output, client: AsyncMagisterium) -> int:
    try:
        task = await client.cancel_task(args.id)
    except (InvalidParamsError, TaskNotCancelableError) as exc:
        # The service refuses to cancel a task that has ended ("Invalid state
        # transition"); every task has ended by the time its answer comes.
        state = exc.data.get("state") if isinstance(exc.data, dict) else None
        said = " ".join(str(exc).split())
        raise CliError(
            f"task {args.id} {f'is already {state}' if state else 'was not cancelled'}: only a "
            f"task still running can be cancelled (the service answered: {said})",
            ExitCode.ERROR,
        ) from None
    output.result(task, lambda: show_result(task, args.id))
    return ExitCode.OK


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context", metavar="ID", help="only the tasks of this context")
    parser.add_argument("--state", help="only the tasks in this state (completed, failed, ...)")
    parser.add_argument("--page-size", type=number(int, 1), metavar="N", help="tasks per page")
    parser.add_argument("--page-token", metavar="TOKEN", help="the page after this token's")
    parser.add_argument("--artifacts", action="store_true", help="include the tasks' artifacts")


async def _list(args: argparse.Namespace, output: Output, client: AsyncMagisterium) -> int:
    page = await client.list_tasks(
        context_id=args.context,
        state=args.state,
        page_size=args.page_size,
        page_token=args.page_token,
        include_artifacts=args.artifacts,
    )
    lines = [
        f"{task.id}  {task.state:<15} {task.status.timestamp or ''}  context {task.context_id}"
        for task in page.tasks
    ]
    more = [f"(more: --page-token {page.next_page_token})"] if page.next_page_token else []
    output.result(page, lambda: print("\n".join([*lines, *more])))
    return ExitCode.OK


async def _card(args: argparse.Namespace, output: Output, client: AsyncMagisterium) -> int:
    from magisterium_async._http._dialect import offered

    card = await client.agent_card()
    dialect = offered(card, client.base_url)
    version, endpoint = dialect.version, dialect.url or client.base_url
    if version == "1.0":
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
        "protocol": version,
        "endpoint": endpoint,
        "card": card,
    }
    output.result(record, lambda: print("\n".join(lines)))
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


async def _quota(args: argparse.Namespace, output: Output) -> int:
    url = args.redis or from_env(REDIS_URL_ENV)
    # Without a shared quota there is nothing to read but this process's own view: no
    # token is needed for it (with one, the token names whose quota it is).
    async with open_client(args, sends=url is not None) as client:
        quota = await client.quota()
    # JSON has no infinity: what an unlimited pool lacks is null (as msgspec writes it).
    pools = {pool.pool: pool for pool in quota.pools}
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
    lines = [*map(_line, quota.pools), f"({source})"]
    output.result({"shared": quota.shared, "pools": pools}, lambda: print("\n".join(lines)))
    return ExitCode.OK


COMMANDS: tuple[Command, ...] = (
    _skill_command("ask", ASK, "ask", "asking catholic_qa"),
    _skill_command("search", SEARCH, "search", "searching"),
    _skill_command("fetch", FETCH, "fetch", "fetching the document"),
    _skill_command("readings", MASS_READINGS, "mass_readings", "getting the Mass readings"),
    _skill_command("saints", SAINTS, "saints", "getting the martyrology"),
    *(_skill_command(s.id.replace("_", "-"), s, s.id, f"looking up with {s.id}") for s in LOOKUPS),
    Command("task get", "a task by id (kept 24 hours)", *_on_a_server(_get, "getting the task")),
    Command("task cancel", "ask to cancel a task", *_on_a_server(_cancel, "cancelling the task")),
    Command(
        "task list",
        "your tasks, newest first (A2A 1.0 servers only)",
        *_on_a_server(_list, "listing the tasks", _list_arguments),
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
