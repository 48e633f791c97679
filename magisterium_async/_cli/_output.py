"""What the commands print: rich rendering for people, JSON for programs.

:class:`Output` is the one place that tells the two apart (``--json``); commands hand it a
value and how to show it to a person. rich is an optional dependency (the ``[cli]``
extra): it is imported only when a human output needs it, so ``--json`` and ``harvest``
work without it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from .._models import Answer, Citation, Document, SearchResult, Task
from ._errors import CliError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "NEEDS_RICH",
    "Output",
    "console",
    "print_json",
    "show_answer",
    "show_document",
    "show_results",
    "show_task",
    "show_text",
]

NEEDS_RICH = "this output needs rich: pip install 'magisterium-async[cli]' (or use --json)"

_ENCODER = msgspec.json.Encoder()


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr); :class:`CliError` when rich is not installed."""
    try:
        from rich.console import Console
    except ImportError:
        raise CliError(NEEDS_RICH) from None
    return Console(stderr=stderr, highlight=False)


def print_json(value: Any) -> None:
    """``value`` (a result struct, a list, a dict...) as one JSON document on stdout."""
    sys.stdout.buffer.write(_ENCODER.encode(value) + b"\n")
    sys.stdout.flush()


@dataclass
class Output:
    """Who reads a command's output: people (rich text) or, with ``--json``, programs."""

    json: bool = False
    summarized: bool = field(default=False, compare=False)
    """Whether a summary was printed (it already says how the command ended)."""

    def result(self, value: Any, show: Callable[[], None]) -> None:
        """A command's result on stdout: ``value`` as one JSON document, or ``show()``."""
        if self.json:
            print_json(value)
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


def _citation_line(number: int, citation: Citation) -> str:
    title = citation.document_title or "(untitled source)"
    details = [
        str(value)
        for value in (citation.document_author, citation.document_year, citation.document_reference)
        if value not in (None, "")
    ]
    return f"[{number}] {title}" + (f" — {', '.join(details)}" if details else "")


def show_answer(answer: Answer) -> None:
    """The answer's text, wrapped, then its sources and related questions."""
    out = console()
    from rich.text import Text

    out.print(Text(answer.text.strip()))
    if answer.citations:
        out.print()
        out.print(Text("Sources", style="bold"))
        for number, citation in enumerate(answer.citations, 1):
            out.print(Text(_citation_line(number, citation)))
            if citation.source_url:
                out.print(Text("    " + citation.source_url, style="cyan"), overflow="fold")
    if answer.related_questions:
        out.print()
        out.print(Text("Related questions", style="bold"))
        for question in answer.related_questions:
            out.print(Text(f"  • {question}"))
    out.print()
    out.print(
        Text(
            f"context {answer.context_id} (follow up with --context-id) · task {answer.task.id}",
            style="dim",
        )
    )


def show_results(query: str, results: list[SearchResult]) -> None:
    """Search results as a table: rank, id, title, URL."""
    out = console()
    from rich.table import Table
    from rich.text import Text

    if not results:
        out.print(Text(f"No documents found for {query!r}."))
        return
    table = Table(title=Text(f"{len(results)} documents for {query!r}"), title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("id", no_wrap=True)
    table.add_column("title", style="bold")
    table.add_column("url", style="cyan", overflow="fold")
    for rank, result in enumerate(results, 1):
        table.add_row(str(rank), Text(result.id), Text(result.title), Text(result.url))
    out.print(table)


def show_document(document: Document) -> None:
    """A document: its title and metadata, then its text."""
    out = console()
    from rich.rule import Rule
    from rich.text import Text

    out.print(Text(document.title or f"Document {document.id}", style="bold"))
    url = document.extra.get("url")
    meta = [
        document.author,
        document.ref,
        f"id {document.id}",
        url if isinstance(url, str) else None,
    ]
    out.print(Text(" · ".join(m for m in meta if m), style="dim"))
    out.print(Rule(style="dim"))
    out.print(Text(document.text.strip()))


def show_text(text: str) -> None:
    """Plain text (readings, martyrology), wrapped to the terminal."""
    out = console()
    from rich.text import Text

    out.print(Text(text.strip()))


def show_task(task: Task) -> None:
    """A task's id, context, state, failure reason and artifacts."""
    out = console()
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("task", Text(task.id))
    table.add_row("context", Text(task.context_id))
    table.add_row("state", Text(task.state))
    if task.status.message is not None and task.status.message.text:
        table.add_row("message", Text(task.status.message.text))
    for artifact in task.artifacts:
        kinds = ", ".join(type(part).__name__ for part in artifact.parts)
        table.add_row("artifact", Text(f"{artifact.name or artifact.artifact_id} ({kinds})"))
    table.add_row("history", Text(f"{len(task.history)} messages"))
    out.print(table)
