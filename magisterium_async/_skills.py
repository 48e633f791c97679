"""The skill table: each skill's id, pool, input, artifact and parser in one place.

A client method is one row of this table: ``build`` turns the user's argument into message
parts (raising ``ValueError``/``TypeError`` before anything is sent), ``parse`` turns the
completed task's artifact into the result type. Each row also says what the skill does for
a model (``description``) and takes its arguments as a typed struct (``arguments``): the
tools for LLM frameworks (:mod:`magisterium_async.tools`) are made from this table alone.

This module owns the table, the builders and :func:`read_result` (a task's state and
its "nothing found" answer); the readers each row names as ``parse`` are in
:mod:`._artifacts`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from magisterium_async._arguments import (
    Arguments,
    DayArguments,
    DocumentArguments,
    LookupArguments,
    QueryArguments,
    QuestionArguments,
    SaintsDayArguments,
)
from magisterium_async._artifacts import (
    brief,
    malformed,
    parse_answer,
    parse_document,
    parse_lookup,
    parse_search,
    parse_text,
    text_parts,
)
from magisterium_async._config import PoolName
from magisterium_async._errors import TaskFailedError
from magisterium_async._models import (
    Answer,
    Artifact,
    DataPart,
    Document,
    Part,
    SearchResult,
    Task,
    TaskState,
    TextPart,
)
from magisterium_async._usual import SearchAnswer, Usual

__all__ = [
    "ASK",
    "DEFAULT_SKILL_ID",
    "FETCH",
    "LOOKUPS",
    "MASS_READINGS",
    "SAINTS",
    "SEARCH",
    "SKILLS",
    "Arguments",
    "Skill",
    "pool_for",
    "read_answer",
    "read_result",
    "require_text",
]

DEFAULT_SKILL_ID = "catholic_qa"

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Skill(Generic[In, Out]):
    """One skill: its id, the quota pool it draws on, its artifact and how to read it.

    ``artifact`` ``None`` means any (the service does not state the lookups' names).
    """

    id: str
    pool: PoolName
    artifact: str | None
    build: Callable[[In], list[Part]]
    parse: Callable[[Task, Artifact], Out]
    not_found: str | None = None
    description: str = ""
    """What the skill does and when to use it, written for a model choosing a tool."""
    arguments: type[Arguments[In]] | None = None
    usual: type[Usual[Out]] | None = None
    """The struct of the skill's usual answer, read in one pass (see :mod:`._usual`)."""


def require_text(name: str, value: object) -> str:
    """``value`` if it is a non-blank string; ``TypeError``/``ValueError`` naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty or blank")
    return value


# Builders -----------------------------------------------------------------------------


def _text_only(name: str) -> Callable[[str], list[Part]]:
    def build(value: str) -> list[Part]:
        return [TextPart(text=require_text(name, value))]

    return build


def _build_fetch(document_id: str) -> list[Part]:
    if isinstance(document_id, int) and not isinstance(document_id, bool):
        document_id = str(document_id)
    return [DataPart(data={"id": require_text("document_id", document_id)})]


def _build_saints(when: str | dt.date) -> list[Part]:
    if isinstance(when, dt.datetime):
        when = when.date()
    if isinstance(when, dt.date):
        return [DataPart(data={"date": when.isoformat()})]
    if not isinstance(when, str):
        raise TypeError(f"when must be a str or a datetime.date, not {type(when).__name__}")
    return [TextPart(text=require_text("when", when))]


# The table ----------------------------------------------------------------------------

ASK: Skill[str, Answer] = Skill(
    "catholic_qa",
    "expensive",
    "catholic_qa_response",
    _text_only("question"),
    parse_answer,
    description="Answer a question about Catholic teaching, doctrine, morals, history or "
    "practice from the Church's documents, with citations of the sources used. Slow "
    "(seconds to minutes) and on a small quota: use it for questions that need a reasoned "
    "answer, and document_search to find documents.",
    arguments=QuestionArguments,
)
SEARCH: Skill[str, list[SearchResult]] = Skill(
    "document_search",
    "default",
    "search_results",
    _text_only("query"),
    parse_search,
    description="Semantic search over Church documents (encyclicals, councils, the "
    "Catechism, the Fathers, canon law, ...). Returns hits with id, title and url; pass an "
    "id to document_fetch for the text.",
    arguments=QueryArguments,
    usual=SearchAnswer,
)
FETCH: Skill[str, Document] = Skill(
    "document_fetch",
    "default",
    "document",
    _build_fetch,
    parse_document,
    not_found="Document not found.",
    description="The full text and metadata (title, author, reference) of one document, "
    "by the id document_search gave.",
    arguments=DocumentArguments,
)
MASS_READINGS: Skill[str, str] = Skill(
    "liturgical_readings",
    "default",
    "mass_readings",
    _text_only("when"),
    parse_text,
    not_found="No mass readings found.",
    description="The readings of the Catholic Mass for a day (first reading, psalm, "
    "second reading, gospel).",
    arguments=DayArguments,
)
SAINTS: Skill[str | dt.date, str] = Skill(
    "saints_of_the_day",
    "default",
    "martyrology",
    _build_saints,
    parse_text,
    not_found="No martyrology data found.",
    description="The Roman Martyrology entry for a day: the saints and blessed commemorated on it.",
    arguments=SaintsDayArguments,
)


def _lookup(skill_id: str, description: str) -> Skill[str, dict[str, Any]]:
    # Their artifacts and pool are not stated by the service: any artifact, the default pool.
    return Skill(
        skill_id,
        "default",
        None,
        _text_only("query"),
        parse_lookup,
        description=description,
        arguments=LookupArguments,
    )


LOOKUPS: tuple[Skill[str, dict[str, Any]], ...] = (
    _lookup(
        "saint_lookup",
        "A saint, blessed, venerable or servant of God, by name or canonical id: their "
        "record (status, feast day, life dates, ...).",
    ),
    _lookup(
        "person_lookup",
        "A Catholic clergy figure (bishop, cardinal, archbishop, ...) by name or canonical "
        "id: their record (rank, see, dates, ...).",
    ),
    _lookup("pope_lookup", "A pope by name or canonical id: reign, birth name, dates."),
    _lookup(
        "diocese_lookup",
        "An ecclesiastical jurisdiction (diocese, archdiocese, eparchy) by name or canonical "
        "id: directory metadata, headline statistics and latest financials.",
    ),
    _lookup(
        "diocese_statistics_lookup",
        "A diocese's full yearly statistics by name or canonical id: a time series of 19 "
        "metrics, one row per year.",
    ),
)
"""The five skills the service lists beyond its contract's table (no typed client method:
``send_message`` and the tools reach them)."""

_TABLE: tuple[Skill[Any, Any], ...] = (ASK, SEARCH, FETCH, MASS_READINGS, SAINTS, *LOOKUPS)
SKILLS: Mapping[str, Skill[Any, Any]] = {s.id: s for s in _TABLE}
"""Every skill of the service by id. ``send_message`` accepts any other id too."""


def pool_for(skill_id: str | None) -> PoolName:
    """The quota pool a message to ``skill_id`` draws on (no id means ``catholic_qa``).

    Skills this table does not know draw on the default pool, as every skill but
    ``catholic_qa`` does (the lookups' pool is not stated by the service: default too).
    """
    skill = SKILLS.get(skill_id or DEFAULT_SKILL_ID)
    return skill.pool if skill is not None else "default"


def is_not_found(skill: Skill[Any, Any], artifact: Artifact) -> bool:
    """Whether ``artifact`` is the skill's "nothing found" answer (a lone text part)."""
    if skill.not_found is None:
        return False
    texts = text_parts(artifact)
    has_data = any(isinstance(p, DataPart) for p in artifact.parts)
    return not has_data and len(texts) == 1 and texts[0].strip() == skill.not_found


def read_answer(skill: Skill[Any, Out], answer: Task | Usual[Out]) -> Out | None:
    """The skill's result from a Task (:func:`read_result`), or from the skill's usual
    answer (see :mod:`._usual`), which was read as it was decoded."""
    return read_result(skill, answer) if isinstance(answer, Task) else answer.result()


def read_result(skill: Skill[Any, Out], task: Task) -> Out | None:
    """The skill's result from a task; ``None`` for its "nothing found" answer.

    A ``failed`` task raises :class:`TaskFailedError`; any state other than ``completed``
    breaks the contract (every skill is synchronous) and raises
    :class:`MalformedResponseError`.
    """
    if task.state == TaskState.FAILED:
        raise TaskFailedError(task, task.failure_reason)
    if task.state != TaskState.COMPLETED:
        raise malformed(task, f"{skill.id} answered a task in state {brief(task.state)}")
    if skill.artifact is None:
        artifact = task.artifacts[0] if task.artifacts else None
    else:
        artifact = task.artifact(skill.artifact)
    candidates = [artifact] if artifact is not None else task.artifacts
    if any(is_not_found(skill, a) for a in candidates):
        return None
    if artifact is None:
        names = [a.name for a in task.artifacts]
        wanted = "artifact" if skill.artifact is None else f"{skill.artifact!r} artifact"
        raise malformed(task, f"no {wanted} (artifacts: {brief(names)})")
    return skill.parse(task, artifact)
