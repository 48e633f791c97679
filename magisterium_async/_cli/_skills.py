"""The commands of the skills: ``ask``, ``search``, ``fetch``, ``readings``, ``saints``, and
one per lookup of the skill table (``saint-lookup``, ``pope-lookup``, ...)."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Awaitable, Callable, Sequence
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


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _words(values: Sequence[str]) -> str:
    return " ".join(values)


def _when(words: Sequence[str]) -> str:
    return _words(words) if words else "today"  # "" is a blank day, refused as the library does


def _ask_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", nargs="+", help="the question (quotes optional)")
    parser.add_argument("--context-id", help="continue the conversation of an earlier answer")


async def _ask(invocation: Invocation, client: AsyncMagisterium) -> int:
    args = invocation.args
    answer = await client.ask(_words(args.question), context_id=args.context_id)
    invocation.output.result(answer, lambda: show_answer(answer))
    return ExitCode.OK


def _search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="what to look for (quotes optional)")


async def _search(invocation: Invocation, client: AsyncMagisterium) -> int:
    query = _words(invocation.args.query)
    results = await client.search(query)
    invocation.output.result(results, lambda: show_results(query, results))
    return ExitCode.OK


def _fetch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the document id (as search shows it)")


async def _fetch(invocation: Invocation, client: AsyncMagisterium) -> int:
    document_id = invocation.args.id
    document = await client.fetch(document_id)
    if document is None:
        raise CliError(f"document {quoted(document_id)} not found", ExitCode.NOT_FOUND)
    invocation.output.result(document, lambda: show_document(document))
    return ExitCode.OK


def _readings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "when", nargs="*", help="a day in words: today (default), next Sunday, Easter Sunday 2026"
    )


async def _readings(invocation: Invocation, client: AsyncMagisterium) -> int:
    when = _when(invocation.args.when)
    text = await client.mass_readings(when)
    if text is None:
        raise CliError(f"no Mass readings found for {quoted(when)}", ExitCode.NOT_FOUND)
    invocation.output.result({"when": when, "text": text}, lambda: show_text(text))
    return ExitCode.OK


def _saints_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("when", nargs="*", help="YYYY-MM-DD or words (default: today)")


async def _saints(invocation: Invocation, client: AsyncMagisterium) -> int:
    when = _when(invocation.args.when)
    try:
        day: str | dt.date = dt.date.fromisoformat(when)
    except ValueError as exc:
        if _ISO_DATE.fullmatch(when):  # a date in form, not in fact: 2026-02-30
            raise CliError(f"{when} is not a date: {exc}", ExitCode.USAGE) from None
        day = when
    text = await client.saints(day)
    if text is None:
        raise CliError(f"no martyrology found for {quoted(when)}", ExitCode.NOT_FOUND)
    invocation.output.result({"when": str(day), "text": text}, lambda: show_text(text))
    return ExitCode.OK


def _lookup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="a name, or a canonical id (quotes optional)")


def _lookup_command(skill: Skill[str, Lookup]) -> Command:
    """The command of a lookup: its skill id with dashes, running the client's method of
    that id; it prints what the service sent (text, then data; ``--json``: the Lookup)."""

    async def lookup(invocation: Invocation, client: AsyncMagisterium) -> int:
        method: Callable[[str], Awaitable[Lookup]] = getattr(client, skill.id)
        found = await method(_words(invocation.args.query))
        invocation.output.result(found, lambda: show_lookup(found))
        return ExitCode.OK

    summary = skill.description.split(":", 1)[0]
    return Command(
        skill.id.replace("_", "-"),
        summary[:1].lower() + summary[1:],
        with_client(lookup, f"looking up with {skill.id}"),
        _lookup_arguments,
        epilog=f"The service states no shape for {skill.id}'s answer: the text and the data "
        "it sent are printed as they came (--json: with the full task).",
    )


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
        _search_arguments,
    ),
    Command(
        "fetch",
        "one document's text and metadata",
        with_client(_fetch, "fetching the document"),
        _fetch_arguments,
    ),
    Command(
        "readings",
        "the Mass readings of a day",
        with_client(_readings, "getting the Mass readings"),
        _readings_arguments,
    ),
    Command(
        "saints",
        "the Roman Martyrology of a day",
        with_client(_saints, "getting the martyrology"),
        _saints_arguments,
    ),
    *(_lookup_command(skill) for skill in LOOKUPS),
)
