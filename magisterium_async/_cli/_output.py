"""What the commands print, and the one place times and counts are put in words.

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

from magisterium_async._models import Answer, Document, Lookup, SearchResult, Task

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "Output",
    "at_clock",
    "duration",
    "plural",
    "quoted",
    "show_answer",
    "show_document",
    "show_lookup",
    "show_results",
    "show_task",
    "show_text",
    "waiting_text",
]


def duration(seconds: float) -> str:
    """A span of time as every message says it: ``0.04s`` and ``30.5s`` under a minute
    (three figures), then ``3m07s``, ``2h05m``, ``3d04h``; ``forever`` past 30 years (or
    for infinity). Round first where fewer figures serve (a countdown)."""
    if not seconds < 1e9:
        return "forever"
    if seconds < 59.5:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{rest:02d}s"


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


def quoted(text: str, limit: int = 200) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (its length said)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


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


def show_answer(answer: Answer) -> None:
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
    _print_lines([*lines, ("", ""), (context, "dim")])


def show_results(query: str, results: list[SearchResult]) -> None:
    """Search results as a table: rank, id, title, URL (a list without rich)."""
    if not results:
        _print_lines([(f"No documents found for {quoted(query)}.", "")])
        return
    title = f"{plural(len(results), 'document')} for {quoted(query)}"
    out = _console()
    if out is None:
        lines = [
            (f"{rank:>3}  {r.id}  {r.title}\n     {r.url}", "") for rank, r in enumerate(results, 1)
        ]
        _print_lines([(title, ""), *lines])
        return
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


def show_document(document: Document) -> None:
    """A document: its title and metadata, then its text."""
    url = document.extra.get("url")
    meta = [
        document.author,
        document.ref,
        f"id {document.id}",
        url if isinstance(url, str) else None,
    ]
    title = document.title or f"Document {document.id}"
    body = document.text.strip()
    _print_lines(
        [(title, "bold"), (" · ".join(m for m in meta if m), "dim"), ("", "rule"), (body, "")]
    )


def show_text(text: str) -> None:
    """Plain text (readings, martyrology), wrapped to the terminal."""
    _print_lines([(text.strip(), "")])


def show_lookup(found: Lookup) -> None:
    """A lookup's text, then each of its data parts as indented JSON (their shape is the
    service's: nothing is left out)."""
    lines: list[Line] = [(found.text.strip(), "")] if found.text.strip() else []
    for data in found.data:
        lines += [("", ""), (json.dumps(data, indent=2, ensure_ascii=False), "")]
    _print_lines(lines or [("(an empty answer)", "dim")])


def show_task(task: Task) -> None:
    """A task's id, context, state, failure reason and artifacts, one a line."""
    rows = [("task", task.id), ("context", task.context_id), ("state", task.state)]
    if task.status.message is not None and task.status.message.text:
        rows.append(("message", task.status.message.text))
    for artifact in task.artifacts:
        kinds = ", ".join(type(part).__name__ for part in artifact.parts)
        rows.append(("artifact", f"{artifact.name or artifact.artifact_id} ({kinds})"))
    rows.append(("history", plural(len(task.history), "message")))
    _print_lines([(f"{label:<10}{value}", "") for label, value in rows])
