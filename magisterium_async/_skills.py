"""The skill table: all the client, the tools for LLM frameworks and the command line know
of each skill, in one row: its id and pool, how its argument becomes a message's parts
(``build``: ``ValueError``/``TypeError`` before anything is sent), how its answer is read
(``parse``, through :func:`read_result`), and its argument and purpose as a model is told.

The readers take what the contract promises and what real servers send beside it: numeric
ids as ints or floats, numbers as strings, unknown keys (kept in ``extra``), missing text
(empty). What cannot be read is a :class:`MalformedResponseError` naming the task and,
briefly, what was wrong.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import reprlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import msgspec

from magisterium_async._config import PoolName
from magisterium_async._errors import MagisteriumError, MalformedResponseError, TaskFailedError
from magisterium_async._models import (
    Answer,
    Artifact,
    Citation,
    DataPart,
    Document,
    FilePart,
    Lookup,
    Message,
    Part,
    SearchResult,
    Task,
    TaskState,
    TextPart,
)

DEFAULT_SKILL_ID = "catholic_qa"

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Skill(Generic[In, Out]):
    """One skill.

    Attributes:
        id: the skill id: ``message.metadata.skillId``, the tool's name.
        pool: the quota pool it draws on.
        artifact: the name of the artifact its answer is in (``None``: any; the service
            does not state the lookups').
        build: the argument to the message's parts, or ``ValueError``/``TypeError``.
        parse: the completed task's artifact to the result.
        description: what the skill does and when to use it, for a model choosing a tool.
        argument: the argument's name, as a tool takes it; ``about``: what it is, for a model.
        not_found: the text of the skill's "nothing found" answer, if it has one.
        default: the argument when a tool call leaves it out (``None``: it is required).
        from_text: the argument from the text a tool call or a command line gives.
        conversation: whether a call may continue an earlier one (``context_id``).
    """

    id: str
    pool: PoolName
    artifact: str | None
    build: Callable[[In], list[Part]]
    parse: Callable[[Task, Artifact], Out]
    description: str
    argument: str
    about: str
    not_found: str | None = None
    default: str | None = None
    from_text: Callable[[str], Any] = str
    conversation: bool = False


MAX_QUERY_BYTES = 65_536
"""The longest query a skill method sends, in UTF-8 bytes (64 KiB): far past any
question, search or id the service answers, refused before sending rather than sent for
the service to answer ``413``."""


def require_text(name: str, value: object) -> str:
    """``value`` if it is a non-blank ``str`` UTF-8 can encode (a lone surrogate, left by a
    bad decode, cannot go in a JSON request); ``TypeError`` or ``ValueError`` naming
    ``name`` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty or blank")
    return _encodable(name, value)


def require_query(name: str, value: object) -> str:
    """The one rule for a skill's argument (a question, a query, an id, a date in words):
    :func:`require_text` once stripped of surrounding whitespace and a leading byte order
    mark, and at most :data:`MAX_QUERY_BYTES` in UTF-8. Returns the stripped text."""
    text = require_text(
        name, value.strip().lstrip("\ufeff").strip() if isinstance(value, str) else value
    )
    size = len(text.encode("utf-8"))
    if size > MAX_QUERY_BYTES:
        raise ValueError(
            f"{name} is {size:,} bytes long, more than the {MAX_QUERY_BYTES:,} a query may "
            "hold; it was not sent"
        )
    return text


def _encodable(name: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name} cannot be sent: it holds {value[exc.start]!r} at position {exc.start}, "
            "a lone surrogate UTF-8 cannot encode (check how the text was read or decoded)"
        ) from None
    return value


# The message ------------------------------------------------------------------------


class SendParams(msgspec.Struct, omit_defaults=True):
    """The params of ``message/send``."""

    message: Message


def parts_from(parts: str | Part | Sequence[str | Part]) -> list[Part]:
    """The parts of a message: a string is a text part; at least one part."""
    if isinstance(parts, (str, TextPart, DataPart, FilePart)):
        parts = [parts]
    if not isinstance(parts, Sequence):
        raise TypeError(f"parts must be a str, a Part or a sequence of them, not {type(parts)}")
    out: list[Part] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            part = TextPart(text=require_text(f"parts[{i}]", part))
        elif isinstance(part, TextPart):
            _encodable(f"parts[{i}].text", part.text)
        elif isinstance(part, DataPart):
            try:
                msgspec.json.encode(part.data)
            except UnicodeEncodeError:
                raise ValueError(
                    f"parts[{i}].data cannot be sent: a string in it holds a lone surrogate "
                    "UTF-8 cannot encode (check how the text was read or decoded)"
                ) from None
        elif not isinstance(part, FilePart):
            raise TypeError(f"parts[{i}] must be a str or a Part, not {type(part).__name__}")
        out.append(part)
    if not out:
        raise ValueError("parts must hold at least one part")
    return out


def send_params(parts: list[Part], skill_id: str | None, context_id: str | None) -> SendParams:
    """A new user message of ``parts`` to ``skill_id`` (``None``: the service's default),
    in ``context_id``'s conversation when given."""
    if context_id is not None:
        require_text("context_id", context_id)
    message = Message(
        role="user",
        parts=parts,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        metadata={"skillId": skill_id} if skill_id is not None else None,
    )
    return SendParams(message)


# Builders -----------------------------------------------------------------------------


def _text(name: str) -> Callable[[str], list[Part]]:
    def build(value: str) -> list[Part]:
        return [TextPart(text=require_query(name, value))]

    return build


def _day(when: str | dt.date) -> str | dt.date:
    """``when`` as a date (a datetime's day), or as the text the one query rule makes."""
    if isinstance(when, dt.datetime):
        return when.date()
    if isinstance(when, dt.date):
        return when
    if not isinstance(when, str):
        raise TypeError(f"when must be a str or a datetime.date, not {type(when).__name__}")
    return require_query("when", when)


def _saints(when: str | dt.date) -> list[Part]:
    day = _day(when)
    if isinstance(day, str):
        return [TextPart(text=day)]
    return [DataPart(data={"date": day.isoformat()})]


def _date_or_words(text: str) -> str | dt.date:
    """A day as text gives it: ``YYYY-MM-DD`` is a date (``ValueError`` when no such day
    exists), anything else words."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text.strip()):
        return text
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"when: {text!r} is not a date that exists") from None


# Reading artifacts --------------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 60, 60, 40


def _malformed(task: Task, what: str) -> MalformedResponseError:
    return MalformedResponseError(f"task {task.id}: {what}")


def _texts(artifact: Artifact) -> list[str]:
    return [p.text for p in artifact.parts if isinstance(p, TextPart)]


def _data_with(artifact: Artifact, key: str) -> dict[str, Any] | None:
    return next((p.data for p in artifact.parts if isinstance(p, DataPart) and key in p.data), None)


def _as_id(value: object) -> str | None:
    """Ids are strings; some A2A servers turn numeric ones into ints or floats."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return None


def _opt_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return _as_id(value) or str(value)
    return None


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,18}\s*", value):
        return int(value)  # ASCII digits, and few: int() refuses over 4,300 (and "²")
    return None


def _extra(raw: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The keys of ``raw`` not in ``known`` (most objects have none)."""
    return {} if known.issuperset(raw) else {k: v for k, v in raw.items() if k not in known}


_CITATION_TEXTS = (
    "cited_text",
    "cited_text_heading",
    "document_title",
    "document_author",
    "document_reference",
    "source_url",
)
_CITATION_KEYS = frozenset({*_CITATION_TEXTS, "document_index", "document_year"})


def _citation(raw: object) -> Citation:
    if not isinstance(raw, dict):
        return Citation(extra={"value": raw})
    year = raw.get("document_year")
    return Citation(
        **{name: _opt_str(raw.get(name)) for name in _CITATION_TEXTS},
        document_index=_opt_int(raw.get("document_index")),
        document_year=_opt_int(year) if _opt_int(year) is not None else _opt_str(year),
        extra=_extra(raw, _CITATION_KEYS),
    )


def _answer(task: Task, artifact: Artifact) -> Answer:
    texts = _texts(artifact)
    if not texts:
        raise _malformed(task, "the catholic_qa_response artifact has no text part")
    citations = (_data_with(artifact, "citations") or {}).get("citations") or []
    related = (_data_with(artifact, "related_questions") or {}).get("related_questions") or []
    if not isinstance(citations, list) or not isinstance(related, list):
        raise _malformed(task, "citations and related_questions must be lists")
    return Answer(
        text="\n".join(texts),
        citations=[_citation(c) for c in citations],
        related_questions=[q for q in related if isinstance(q, str)],
        context_id=task.context_id,
        task=task,
    )


_HIT_KEYS = frozenset({"id", "url", "title"})


def _hit(task: Task, raw: object) -> SearchResult:
    if not isinstance(raw, dict):
        raise _malformed(task, f"a search result is not an object: {_REPR.repr(raw)}")
    ident = _as_id(raw.get("id"))
    if ident is None:
        raise _malformed(task, f"a search result has no usable id: {_REPR.repr(raw)}")
    return SearchResult(
        id=ident,
        url=_opt_str(raw.get("url")) or "",
        title=_opt_str(raw.get("title")) or "",
        extra=_extra(raw, _HIT_KEYS),
    )


def _search(task: Task, artifact: Artifact) -> list[SearchResult]:
    data = _data_with(artifact, "results")
    if data is None:
        raise _malformed(task, "the search_results artifact has no data part with 'results'")
    if not isinstance(data["results"], list):
        raise _malformed(task, "'results' is not a list")
    return [_hit(task, raw) for raw in data["results"]]


def _document(task: Task, artifact: Artifact) -> Document:
    meta = _data_with(artifact, "id") or {}
    ident = _as_id(meta.get("id"))
    if ident is None:
        raise _malformed(task, "the document artifact has no data part with an 'id'")
    return Document(
        id=ident,
        title=_opt_str(meta.get("title")),
        author=_opt_str(meta.get("author")),
        ref=_opt_str(meta.get("ref")),
        text="\n".join(_texts(artifact)),
        extra=_extra(meta, frozenset({"id", "title", "author", "ref"})),
    )


def _text_answer(task: Task, artifact: Artifact) -> str:
    texts = _texts(artifact)
    if not texts:
        raise _malformed(task, f"the {artifact.name} artifact has no text part")
    return "\n".join(texts)


def _lookup_answer(task: Task, artifact: Artifact) -> Lookup:
    """Every artifact's text and data: the service states neither their names nor shapes."""
    parts = [p for a in task.artifacts for p in a.parts]
    return Lookup(
        text="\n".join(p.text for p in parts if isinstance(p, TextPart)),
        data=[p.data for p in parts if isinstance(p, DataPart)],
        task=task,
    )


# The table ----------------------------------------------------------------------------

_WHEN = (
    "The day: a date as YYYY-MM-DD, or words such as 'today', 'tomorrow', 'next Sunday', "
    "'Easter Sunday 2026'. null means today."
)

ASK: Skill[str, Answer] = Skill(
    "catholic_qa",
    "expensive",
    "catholic_qa_response",
    _text("question"),
    _answer,
    description="Answer a question about Catholic teaching, doctrine, morals, history or "
    "practice from the Church's documents, with citations of the sources used. Slow "
    "(seconds to minutes) and on a small quota: use it for questions that need a reasoned "
    "answer, and document_search to find documents.",
    argument="question",
    about="The question, in full sentences.",
    conversation=True,
)
SEARCH: Skill[str, list[SearchResult]] = Skill(
    "document_search",
    "default",
    "search_results",
    _text("query"),
    _search,
    description="Semantic search over Church documents (encyclicals, councils, the "
    "Catechism, the Fathers, canon law, ...). Returns hits with id, title and url; pass an "
    "id to document_fetch for the text.",
    argument="query",
    about="What to look for; the search is semantic.",
)
FETCH: Skill[str, Document] = Skill(
    "document_fetch",
    "default",
    "document",
    lambda document_id: [DataPart(data={"id": require_query("document_id", document_id)})],
    _document,
    description="The full text and metadata (title, author, reference) of one document, "
    "by the id document_search gave.",
    argument="id",
    about="The document's id, as document_search returned it.",
    not_found="Document not found.",
)
MASS_READINGS: Skill[str | dt.date, str] = Skill(
    "liturgical_readings",
    "default",
    "mass_readings",
    lambda when: [TextPart(text=str(_day(when)))],  # words only: a date as its ISO text
    _text_answer,
    description="The readings of the Catholic Mass for a day (first reading, psalm, "
    "second reading, gospel).",
    argument="when",
    about=_WHEN,
    not_found="No mass readings found.",
    default="today",
)
SAINTS: Skill[str | dt.date, str] = Skill(
    "saints_of_the_day",
    "default",
    "martyrology",
    _saints,
    _text_answer,
    description="The Roman Martyrology entry for a day: the saints and blessed commemorated on it.",
    argument="when",
    about=_WHEN,
    not_found="No martyrology data found.",
    default="today",
    from_text=_date_or_words,
)


def _lookup(skill_id: str, description: str) -> Skill[str, Lookup]:
    # Their artifacts and pool are not stated by the service: any artifact, the default pool.
    return Skill(
        skill_id,
        "default",
        None,
        _text("query"),
        _lookup_answer,
        description=description,
        argument="query",
        about="A name, or a canonical id.",
    )


SAINT_LOOKUP = _lookup(
    "saint_lookup",
    "A saint, blessed, venerable or servant of God, by name or canonical id: their "
    "record (status, feast day, life dates, ...).",
)
PERSON_LOOKUP = _lookup(
    "person_lookup",
    "A Catholic clergy figure (bishop, cardinal, archbishop, ...) by name or canonical "
    "id: their record (rank, see, dates, ...).",
)
POPE_LOOKUP = _lookup("pope_lookup", "A pope by name or canonical id: reign, birth name, dates.")
DIOCESE_LOOKUP = _lookup(
    "diocese_lookup",
    "An ecclesiastical jurisdiction (diocese, archdiocese, eparchy) by name or canonical "
    "id: directory metadata, headline statistics and latest financials.",
)
DIOCESE_STATISTICS_LOOKUP = _lookup(
    "diocese_statistics_lookup",
    "A diocese's full yearly statistics by name or canonical id: a time series of 19 "
    "metrics, one row per year.",
)
LOOKUPS = (SAINT_LOOKUP, PERSON_LOOKUP, POPE_LOOKUP, DIOCESE_LOOKUP, DIOCESE_STATISTICS_LOOKUP)
"""The five skills the service lists beyond its contract's table. Each is a client method
of its id (``client.pope_lookup(query)``) and a command of its id with dashes
(``magisterium-async pope-lookup QUERY``), both made from this table."""

SKILLS: Mapping[str, Skill[Any, Any]] = {
    s.id: s for s in (ASK, SEARCH, FETCH, MASS_READINGS, SAINTS, *LOOKUPS)
}
"""Every skill of the service by id. ``send_message`` accepts any other id too."""


def read_result(skill: Skill[Any, Out], task: Task) -> Out | None:
    """The skill's result from a task; ``None`` for its "nothing found" answer (a lone
    text part). A ``failed`` task raises :class:`TaskFailedError`; any state other than
    ``completed`` breaks the contract (every skill is synchronous) and raises
    :class:`MalformedResponseError`."""
    if task.state == TaskState.FAILED:
        raise TaskFailedError(task, task.failure_reason)
    if task.state != TaskState.COMPLETED:
        raise _malformed(task, f"{skill.id} answered a task in state {_REPR.repr(task.state)}")
    if skill.artifact is None:
        artifact = task.artifacts[0] if task.artifacts else None
    else:
        artifact = task.artifact(skill.artifact)
    if any(_nothing_found(skill, a) for a in ([artifact] if artifact else task.artifacts)):
        return None
    if artifact is None:
        names = [a.name for a in task.artifacts]
        wanted = "artifact" if skill.artifact is None else f"{skill.artifact!r} artifact"
        raise _malformed(task, f"no {wanted} (artifacts: {_REPR.repr(names)})")
    return skill.parse(task, artifact)


def _nothing_found(skill: Skill[Any, Any], artifact: Artifact) -> bool:
    """Whether ``artifact`` is the skill's "nothing found" answer: its text, alone."""
    if skill.not_found is None or any(isinstance(p, DataPart) for p in artifact.parts):
        return False
    return [text.strip() for text in _texts(artifact)] == [skill.not_found]


def kept_as(skill: Skill[Any, Any] | None, task: Task) -> Literal["answer", "not_found"] | None:
    """What a cache may keep ``task`` as: the skill's answer, its "nothing found" answer,
    or nothing (a task not completed, or an answer :func:`read_result` refuses). A skill
    the table does not know (``None``) is kept whenever its task completed."""
    if task.state != TaskState.COMPLETED:
        return None
    if skill is None:
        return "answer"
    try:
        return "answer" if read_result(skill, task) is not None else "not_found"
    except MagisteriumError:
        return None
