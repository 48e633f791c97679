"""The commands of the skills: ``ask``, ``search``, ``fetch``, ``readings``, ``saints``, and
one per lookup of the skill table (``saint-lookup``, ``pope-lookup``, ...)."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magisterium_async._cli._command import Command, Invocation, with_client
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import (
    quoted,
    show_answer,
    show_document,
    show_lookup,
    show_results,
    show_text,
)
from magisterium_async._models import Lookup
from magisterium_async._skills import LOOKUPS, Skill

if TYPE_CHECKING:  # the client loads when a command runs, not for --help
    from magisterium_async._client import AsyncMagisterium

__all__ = ["COMMANDS"]


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


_DAY = "a day in words: today (default), next Sunday, Easter Sunday 2026"

COMMANDS = (
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
)
