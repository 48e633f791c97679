"""The ten skills: each turns the user's parts into one artifact's parts and a reply.

The five of the service's contract, and the five more its skills page lists
(``saint_lookup``, ``person_lookup``, ``pope_lookup``, ``diocese_lookup``,
``diocese_statistics_lookup``) whose artifacts are **invented** here: the service does not
state their names or shapes (see :mod:`._directory`). Each answers one artifact with a
data part (the record) and a text part (a one-line summary), or its "not found" text
alone, as the contract's skills do.

Any skill fails on purpose when its first text part starts with ``__fail__``: the task
ends ``failed`` and the reason is the rest of the text (or a default), so a client's
failure path can be exercised without configuration.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from magisterium_async.testing.emulator._wire import DataPart, Part, TextPart
from magisterium_async.testing.emulator.content._calendar import martyrology, mass_readings
from magisterium_async.testing.emulator.content._corpus import Corpus, CorpusDocument, tokenize
from magisterium_async.testing.emulator.content._dates import in_range, parse_when
from magisterium_async.testing.emulator.content._directory import (
    DIOCESES,
    PERSONS,
    POPES,
    SAINTS,
    STATISTICS_METRICS,
    Record,
    diocese_statistics,
    find,
    headline,
)

__all__ = [
    "FAIL_PREFIX",
    "NOT_FOUND_DOCUMENT",
    "NOT_FOUND_MARTYROLOGY",
    "NOT_FOUND_READINGS",
    "SKILLS",
    "Skill",
    "SkillContext",
    "SkillError",
    "skill_input",
]

FAIL_PREFIX = "__fail__"
NOT_FOUND_DOCUMENT = "Document not found."
NOT_FOUND_READINGS = "No mass readings found."
NOT_FOUND_MARTYROLOGY = "No martyrology data found."
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SkillError(Exception):
    """The skill raised: the task ends ``failed`` with this reason."""


@dataclass(frozen=True, slots=True)
class SkillContext:
    """What skills draw on."""

    corpus: Corpus
    max_results: int
    qa_latency: float
    today: Callable[[], datetime.date]


SkillResult = tuple[list[Part], str]


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill: its id, quota pool, artifact name and implementation."""

    id: str
    pool: str
    artifact: str
    run: Callable[[SkillContext, list[Part]], Awaitable[SkillResult]]


def _text(parts: list[Part]) -> str | None:
    for part in parts:
        if isinstance(part, TextPart):
            return part.text.strip()
    return None


def _data(parts: list[Part], key: str) -> Any:
    for part in parts:
        if isinstance(part, DataPart) and key in part.data:
            return part.data[key]
    return None


def _required_text(parts: list[Part], skill: str, what: str) -> str:
    text = _text(parts)
    if text is None:
        raise SkillError(f"{skill} needs a text part with {what}")
    return text


def skill_input(skill: str, parts: list[Part]) -> str | None:
    """What a request asked, for the arrivals list: the query, document id or date."""
    key = {"document_fetch": "id", "saints_of_the_day": "date"}.get(skill)
    if key is not None:
        value = _data(parts, key)
        if value is not None:
            return str(value)
    return _text(parts)


def check_failure(parts: list[Part]) -> None:
    """Raise :class:`SkillError` when the first text part asks for a failure."""
    text = _text(parts)
    if text is not None and text.startswith(FAIL_PREFIX):
        reason = text[len(FAIL_PREFIX) :].strip(" :")
        raise SkillError(reason or "Simulated skill failure")


async def document_search(context: SkillContext, parts: list[Part]) -> SkillResult:
    """Rank the corpus against the query; an empty list when nothing matches."""
    query = _required_text(parts, "document_search", "the query")
    found = context.corpus.search(query, context.max_results)
    results = [{"id": hit.id, "url": hit.url, "title": hit.title} for hit in found]
    return [DataPart({"results": results})], f"Found {len(results)} documents."


async def document_fetch(context: SkillContext, parts: list[Part]) -> SkillResult:
    """The document's text and its metadata, or ``Document not found.``."""
    wanted = _data(parts, "id")
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        wanted = str(wanted)
    if not isinstance(wanted, str):
        wanted = _required_text(parts, "document_fetch", "the document id")
    document = context.corpus.get(wanted.strip())
    if document is None:
        return [TextPart(NOT_FOUND_DOCUMENT)], NOT_FOUND_DOCUMENT
    metadata = {
        "id": document.id,
        "title": document.title,
        "author": document.author,
        "ref": document.ref,
        "year": document.year,
        "url": document.url,
    }
    return [TextPart(document.content), DataPart(metadata)], document.title


def _citation(index: int, document: CorpusDocument) -> dict[str, Any]:
    return {
        "cited_text": document.excerpt,
        "cited_text_heading": document.heading,
        "document_title": document.title,
        "document_index": index,
        "document_author": document.author,
        "document_year": document.year,
        "document_reference": document.ref,
        "source_url": document.url,
    }


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _answer(question: str, sources: list[CorpusDocument]) -> str:
    titles = ", ".join(document.title for document in sources)
    lines = [f"The Church's teaching on this question is found in {titles}.", ""]
    for number, document in enumerate(sources, start=1):
        lines.append(
            f"{document.title} ({document.author}, {document.year}) says: "
            f'"{_first_sentence(document.excerpt)}" [{number}]'
        )
    lines += ["", "Read together, these sources give the Church's answer to your question."]
    return "\n".join(lines)


def _related(question: str, sources: list[CorpusDocument]) -> list[str]:
    related = [f"What is the central teaching of {sources[0].title}?"]
    if len(sources) > 1:
        related.append(f"How does {sources[1].title} develop this teaching?")
    words = tokenize(question)
    if words:
        related.append(f"What does the Catechism say about {max(words, key=len)}?")
    return related


async def catholic_qa(context: SkillContext, parts: list[Part]) -> SkillResult:
    """An answer composed from the best-matching documents, with citations."""
    question = _required_text(parts, "catholic_qa", "the question")
    if context.qa_latency:
        await asyncio.sleep(context.qa_latency)
    corpus = context.corpus
    sources = [
        document
        for hit in corpus.search(question, 3)
        if (document := corpus.get(hit.id)) is not None
    ]
    if not sources:
        answer = (
            "I could not find a magisterial source that addresses this question directly. "
            "Try asking about a specific document, doctrine or practice."
        )
        return [TextPart(answer)], answer
    answer = _answer(question, sources)
    citations = [_citation(index, document) for index, document in enumerate(sources)]
    return [
        TextPart(answer),
        DataPart({"citations": citations}),
        DataPart({"related_questions": _related(question, sources)}),
    ], answer


async def liturgical_readings(context: SkillContext, parts: list[Part]) -> SkillResult:
    """The readings for a date in natural language, or ``No mass readings found.``."""
    when = _text(parts) or _data(parts, "date")
    day = parse_when(when, context.today()) if isinstance(when, str) else None
    text = (mass_readings(day) if day else None) or NOT_FOUND_READINGS
    return [TextPart(text)], text


async def saints_of_the_day(context: SkillContext, parts: list[Part]) -> SkillResult:
    """The martyrology entry for ``{"date": "YYYY-MM-DD"}`` or a date query."""
    wanted = _data(parts, "date")
    day: datetime.date | None = None
    if isinstance(wanted, str):
        if _ISO_DATE.match(wanted):
            try:
                day = datetime.date.fromisoformat(wanted)
            except ValueError:
                day = None
    else:
        query = _text(parts)
        day = parse_when(query, context.today()) if query is not None else None
    text = (martyrology(day) if day and in_range(day) else None) or NOT_FOUND_MARTYROLOGY
    return [TextPart(text)], text


Answer = tuple[dict[str, Any], str]
"""A lookup's answer: the data part's record and the one-line summary."""


def _lookup(
    skill: str,
    artifact: str,
    records: tuple[Record, ...],
    not_found: str,
    answer: Callable[[Record], Answer],
) -> Skill:
    """A lookup skill: the record found by name or canonical id, else ``not_found``."""

    async def lookup(context: SkillContext, parts: list[Part]) -> SkillResult:
        query = _required_text(parts, skill, "a name or canonical id")
        record = find(records, query)
        if record is None:
            return [TextPart(not_found)], not_found
        data, summary = answer(record)
        return [DataPart(data), TextPart(summary)], summary

    lookup.__name__ = lookup.__qualname__ = skill
    lookup.__doc__ = f"The {skill} record for a name or canonical id (invented shape)."
    # Their pool is not stated by the service: the default one.
    return Skill(skill, "default", artifact, lookup)


def _saint(record: Record) -> Answer:
    feast = record.fields["feast_day"]
    status = f"{record.name} ({record.fields['status']})"
    return record.data(), status + (f", feast {feast}" if feast else "")


def _person(record: Record) -> Answer:
    return record.data(), f"{record.name}, {record.fields['rank']} ({record.fields['see']})"


def _pope(record: Record) -> Answer:
    end = record.fields["reign_end"]
    reign = f"{record.fields['reign_start']}-{end if end is not None else ''}"
    return record.data(), f"Pope {record.name} ({record.fields['birth_name']}), {reign}"


def _diocese(record: Record) -> Answer:
    """The directory entry with the latest headline statistics and financials."""
    summary = f"{record.name}, {record.fields['rite']} rite, {record.fields['country']}"
    return {**record.data(), **headline(record)}, summary


def _diocese_statistics(record: Record) -> Answer:
    """The yearly statistics, 19 metrics a row (generated figures)."""
    rows = diocese_statistics(record)
    data = {"id": record.id, "name": record.name, "metrics": list(STATISTICS_METRICS)}
    summary = f"{record.name}: {len(rows)} years, {rows[0]['year']}-{rows[-1]['year']}"
    return {**data, "rows": rows}, summary


NOT_FOUND_SAINT = "No saint found."
NOT_FOUND_PERSON = "No person found."
NOT_FOUND_POPE = "No pope found."
NOT_FOUND_DIOCESE = "No diocese found."

SKILLS: dict[str, Skill] = {
    skill.id: skill
    for skill in (
        Skill("catholic_qa", "expensive", "catholic_qa_response", catholic_qa),
        Skill("document_search", "default", "search_results", document_search),
        Skill("document_fetch", "default", "document", document_fetch),
        Skill("liturgical_readings", "default", "mass_readings", liturgical_readings),
        Skill("saints_of_the_day", "default", "martyrology", saints_of_the_day),
        # Invented artifact names (not stated by the service).
        _lookup("saint_lookup", "saint", SAINTS, NOT_FOUND_SAINT, _saint),
        _lookup("person_lookup", "person", PERSONS, NOT_FOUND_PERSON, _person),
        _lookup("pope_lookup", "pope", POPES, NOT_FOUND_POPE, _pope),
        _lookup("diocese_lookup", "diocese", DIOCESES, NOT_FOUND_DIOCESE, _diocese),
        _lookup(
            "diocese_statistics_lookup",
            "diocese_statistics",
            DIOCESES,
            NOT_FOUND_DIOCESE,
            _diocese_statistics,
        ),
    )
}
