"""What the commands print and read, and the one place times and counts are put in words.

:class:`Output` is the one place that tells people and programs apart (``--json``):
commands hand it a value and how to show it to a person. rich (the ``[cli]`` extra) only
adds colour and tables; without it every command prints the same content as plain text,
so nothing fails after a request has been spent.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from magisterium_async._events import duration
from magisterium_async._harvest import quoted
from magisterium_async._models import Answer, Document, Lookup, SearchResult, Task

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "Output",
    "at_clock",
    "duration",
    "plural",
    "quoted",
    "show_result",
    "waiting_text",
]


def at_clock(seconds: float, wall: Callable[[], float] = time.time) -> str:
    """The local clock time ``seconds`` from now: ``14:03:05``, with the date when it is
    a day or more away, ``never`` past what the system's clock can say."""
    try:
        when = time.localtime(wall() + seconds)
    except (OverflowError, OSError, ValueError):
        return "never"
    return time.strftime("%H:%M:%S" if seconds < 86400 else "%Y-%m-%d %H:%M:%S", when)


def waiting_text(seconds: float, wall: Callable[[], float] = time.time) -> str:
    """``waiting for quota: next request in 12s (at 14:03:05)``."""
    at = at_clock(seconds, wall)
    return f"waiting for quota: next request in {duration(max(round(seconds), 1))} (at {at})"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 document``, ``2,048 documents`` (``nouns`` when the plural is not ``noun + s``)."""
    return f"{count:,} {noun if count == 1 else (nouns or noun + 's')}"


_ENCODER = msgspec.json.Encoder()


@dataclass
class Output:
    """Who reads a command's output: people (rich text) or, with ``--json``, programs."""

    json: bool = False
    summarized: bool = field(default=False, compare=False)
    """Whether a summary was printed (it already says how the command ended)."""

    def result(self, value: Any, show: Callable[[], None]) -> None:
        """A command's result on stdout: ``value`` (a result struct, a list, a dict) as one
        JSON document, or ``show()``."""
        if self.json:
            sys.stdout.buffer.write(_ENCODER.encode(value) + b"\n")
            sys.stdout.flush()
        else:
            show()

    def summary(self, record: dict[str, Any], lines: Callable[[], Sequence[str]]) -> None:
        """How a long command ended, on stderr: ``record`` as one JSON line, or ``lines()``."""
        if self.json:
            print(json.dumps(record), file=sys.stderr, flush=True)
        else:
            print("\n".join(lines()), file=sys.stderr, flush=True)
        self.summarized = True

    def note(self, text: str) -> None:
        """A line for people on stderr; programs reading ``--json`` do not get it."""
        if not self.json:
            print(text, file=sys.stderr, flush=True)


def _console() -> Console | None:
    """A rich console on stdout, or ``None`` when rich is not installed (plain text then)."""
    try:
        from rich.console import Console
    except ImportError:
        return None

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # rich exits 1 here; main() ends quietly with 0 instead

    return _Console(highlight=False)


Line = tuple[str, str]
"""One line for people: its text and its rich style (``""``: none, ``"rule"``: a rule)."""


def show_result(value: object, asked: str) -> None:
    """A skill's result (or a task) for people, on stdout, by its type; ``asked``: what
    the command was given (a search names it)."""
    if isinstance(value, list):
        return _show_results(asked, value)
    lines: list[Line] = []
    if isinstance(value, Answer):
        lines = _answer(value)
    elif isinstance(value, Document):
        url = value.extra.get("url")
        meta = [value.author, value.ref, f"id {value.id}", url if isinstance(url, str) else None]
        lines = [(value.title or f"Document {value.id}", "bold")]
        lines += [(" · ".join(m for m in meta if m), "dim"), ("", "rule"), (value.text.strip(), "")]
    elif isinstance(value, Lookup):  # the service states no shape: all it sent, as it came
        lines = [(value.text.strip(), "")] if value.text.strip() else []
        for data in value.data:
            lines += [("", ""), (json.dumps(data, indent=2, ensure_ascii=False), "")]
        lines = lines or [("(an empty answer)", "dim")]
    elif isinstance(value, Task):
        rows = [("task", value.id), ("context", value.context_id), ("state", value.state)]
        if value.status.message is not None and value.status.message.text:
            rows.append(("message", value.status.message.text))
        for artifact in value.artifacts:
            kinds = ", ".join(type(part).__name__ for part in artifact.parts)
            rows.append(("artifact", f"{artifact.name or artifact.artifact_id} ({kinds})"))
        rows.append(("history", plural(len(value.history), "message")))
        lines = [(f"{label:<10}{text}", "") for label, text in rows]
    else:  # readings, martyrology: plain text
        lines = [(str(value).strip(), "")]
    _print_lines(lines)


def _print_lines(lines: Sequence[Line]) -> None:
    """``lines`` through rich (styled, wrapped), or as plain text without it."""
    out = _console()
    if out is None:
        for text, style in lines:
            print("─" * 40 if style == "rule" else text)
        sys.stdout.flush()
        return
    from rich.rule import Rule
    from rich.text import Text

    for text, style in lines:
        out.print(
            Rule(style="dim") if style == "rule" else Text(text, style=style), overflow="fold"
        )


def _answer(answer: Answer) -> list[Line]:
    """The answer's text, then its sources and related questions."""
    lines: list[Line] = [(answer.text.strip(), "")]
    if answer.citations:
        lines += [("", ""), ("Sources", "bold")]
        for number, citation in enumerate(answer.citations, 1):
            found = (citation.document_author, citation.document_year, citation.document_reference)
            details = ", ".join(str(value) for value in found if value not in (None, ""))
            title = citation.document_title or "(untitled source)"
            lines.append((f"[{number}] {title}" + (f" — {details}" if details else ""), ""))
            if citation.source_url:
                lines.append(("    " + citation.source_url, "cyan"))
    if answer.related_questions:
        lines += [("", ""), ("Related questions", "bold")]
        lines += [(f"  • {question}", "") for question in answer.related_questions]
    context = f"context {answer.context_id} (follow up with --context-id) · task {answer.task.id}"
    return [*lines, ("", ""), (context, "dim")]


def _show_results(query: str, results: list[SearchResult]) -> None:
    """Search results as a table: rank, id, title, URL (a list without rich)."""
    if not results:
        return _print_lines([(f"No documents found for {quoted(query)}.", "")])
    title = f"{plural(len(results), 'document')} for {quoted(query)}"
    out = _console()
    if out is None:
        rows = [(f"{n:>3}  {r.id}  {r.title}\n     {r.url}", "") for n, r in enumerate(results, 1)]
        return _print_lines([(title, ""), *rows])
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("id", no_wrap=True)
    table.add_column("title", style="bold")
    table.add_column("url", style="cyan", overflow="fold")
    for rank, result in enumerate(results, 1):
        table.add_row(str(rank), Text(result.id), Text(result.title), Text(result.url))
    out.print(table)
