"""The skill table: each skill's id, pool, input, artifact and reader in one place.

A client method is one row of this table: ``build`` turns the user's argument into message
parts (raising ``ValueError``/``TypeError`` before anything is sent), :func:`send_params`
wraps them in the user message a ``message/send`` carries, and ``parse`` reads the
completed task's artifact into the result type. Each row also says what the skill does for
a model (``description``): the tools for LLM frameworks (:mod:`magisterium_async.tools`)
are made from this table.

The readers take what the contract promises and what real servers send beside it: numeric
ids as ints or floats, numbers as strings, unknown keys (kept in ``extra``), missing text
(empty). What cannot be read is a :class:`MalformedResponseError` naming the task and,
briefly, what was wrong; :func:`read_result` checks the task's state and recognises each
skill's "nothing found" answer first.
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

__all__ = [
    "ASK",
    "DEFAULT_SKILL_ID",
    "DIOCESE_LOOKUP",
    "DIOCESE_STATISTICS_LOOKUP",
    "FETCH",
    "LOOKUPS",
    "MASS_READINGS",
    "MAX_QUERY_BYTES",
    "PERSON_LOOKUP",
    "POPE_LOOKUP",
    "SAINTS",
    "SAINT_LOOKUP",
    "SEARCH",
    "SKILLS",
    "SendParams",
    "Skill",
    "brief",
    "kept_as",
    "malformed",
    "parse_answer",
    "parse_document",
    "parse_lookup",
    "parse_search",
    "parse_text",
    "parts_from",
    "pool_for",
    "read_result",
    "require_encodable",
    "require_query",
    "require_text",
    "send_params",
    "text_parts",
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


def require_text(name: str, value: object) -> str:
    """``value`` if it is a non-blank string a request can carry; ``TypeError`` or
    ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty or blank")
    return require_encodable(name, value)


MAX_QUERY_BYTES = 65_536
"""The longest query a skill method sends, in UTF-8 bytes (64 KiB): far past any
question, search or id the service answers, and refused before sending rather than
sent for the service to answer ``413``."""

_BOM = "\ufeff"


def require_query(name: str, value: object) -> str:
    """The one rule for what a skill's argument (a question, a query, an id, a date in
    words) may be: a ``str`` (``TypeError`` otherwise), stripped of a leading UTF-8 byte
    order mark and surrounding whitespace, not blank, at most :data:`MAX_QUERY_BYTES` in
    UTF-8 (``ValueError`` naming ``name`` otherwise). Returns the stripped text."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    text = require_text(name, value.strip().lstrip(_BOM).strip())
    size = len(text.encode("utf-8"))
    if size > MAX_QUERY_BYTES:
        raise ValueError(
            f"{name} is {size:,} bytes long, more than the {MAX_QUERY_BYTES:,} a query may "
            "hold; it was not sent"
        )
    return text


def require_encodable(name: str, value: str) -> str:
    """``value`` if UTF-8 can encode it, else ``ValueError`` naming ``name``: a lone
    surrogate (``"\\ud800"``, left by a bad decode) cannot go in a JSON request."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise ValueError(
            f"{name} cannot be sent: it holds {bad!r} at position {exc.start}, a lone "
            "surrogate UTF-8 cannot encode (check how the text was read or decoded)"
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
            out.append(TextPart(text=require_text(f"parts[{i}]", part)))
        elif isinstance(part, TextPart):
            require_encodable(f"parts[{i}].text", part.text)
            out.append(part)
        elif isinstance(part, DataPart):
            try:
                msgspec.json.encode(part.data)
            except UnicodeEncodeError:
                raise ValueError(
                    f"parts[{i}].data cannot be sent: a string in it holds a lone surrogate "
                    "UTF-8 cannot encode (check how the text was read or decoded)"
                ) from None
            out.append(part)
        elif isinstance(part, FilePart):
            out.append(part)
        else:
            raise TypeError(f"parts[{i}] must be a str or a Part, not {type(part).__name__}")
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


def _text_only(name: str) -> Callable[[str], list[Part]]:
    def build(value: str) -> list[Part]:
        return [TextPart(text=require_query(name, value))]

    return build


def _build_fetch(document_id: str) -> list[Part]:
    return [DataPart(data={"id": require_query("document_id", document_id)})]


def _day(when: str | dt.date) -> str | dt.date:
    """``when`` as a date (a datetime's day), or as the text the one query rule makes."""
    if isinstance(when, dt.datetime):
        return when.date()
    if isinstance(when, dt.date):
        return when
    if not isinstance(when, str):
        raise TypeError(f"when must be a str or a datetime.date, not {type(when).__name__}")
    return require_query("when", when)


def _build_readings(when: str | dt.date) -> list[Part]:
    # The skill takes a day in words only: a date goes as its ISO text, which is one.
    day = _day(when)
    return [TextPart(text=day if isinstance(day, str) else day.isoformat())]


def _build_saints(when: str | dt.date) -> list[Part]:
    day = _day(when)
    if isinstance(day, str):
        return [TextPart(text=day)]
    return [DataPart(data={"date": day.isoformat()})]


# Reading artifacts --------------------------------------------------------------------

_INT_TEXT = re.compile(r"\s*-?[0-9]{1,18}\s*")
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 60, 60, 40


def malformed(task: Task, what: str) -> MalformedResponseError:
    """The error for a task whose answer breaks the contract: ``what`` is wrong."""
    return MalformedResponseError(f"task {task.id}: {what}")


def text_parts(artifact: Artifact) -> list[str]:
    """The texts of the artifact's text parts, in order."""
    return [p.text for p in artifact.parts if isinstance(p, TextPart)]


def _data_with(artifact: Artifact, key: str) -> dict[str, Any] | None:
    return next((p.data for p in artifact.parts if isinstance(p, DataPart) and key in p.data), None)


def _as_id(value: object) -> str | None:
    """Ids are strings; some A2A servers turn numeric ones into ints or floats."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
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
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        # ASCII digits, and few of them: int() refuses over 4,300 digits (and "²").
        return int(value)
    return None


def brief(value: object) -> str:
    """A short repr of a value the service sent, however large or deep it is."""
    return _REPR.repr(value)


def _extra(raw: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The keys of ``raw`` not in ``known`` (most objects have none)."""
    if known.issuperset(raw):
        return {}
    return {k: v for k, v in raw.items() if k not in known}


# Answer -------------------------------------------------------------------------------


_CITATION_TEXT_FIELDS = (
    "cited_text",
    "cited_text_heading",
    "document_title",
    "document_author",
    "document_reference",
    "source_url",
)
_CITATION_KEYS = frozenset({*_CITATION_TEXT_FIELDS, "document_index", "document_year"})


def _citation(raw: object) -> Citation:
    if not isinstance(raw, dict):
        return Citation(extra={"value": raw})
    year = raw.get("document_year")
    return Citation(
        **{name: _opt_str(raw.get(name)) for name in _CITATION_TEXT_FIELDS},
        document_index=_opt_int(raw.get("document_index")),
        document_year=_opt_int(year) if _opt_int(year) is not None else _opt_str(year),
        extra=_extra(raw, _CITATION_KEYS),
    )


def parse_answer(task: Task, artifact: Artifact) -> Answer:
    texts = text_parts(artifact)
    if not texts:
        raise malformed(task, "the catholic_qa_response artifact has no text part")
    citations = (_data_with(artifact, "citations") or {}).get("citations") or []
    related = (_data_with(artifact, "related_questions") or {}).get("related_questions") or []
    if not isinstance(citations, list) or not isinstance(related, list):
        raise malformed(task, "citations and related_questions must be lists")
    return Answer(
        text="\n".join(texts),
        citations=[_citation(c) for c in citations],
        related_questions=[q for q in related if isinstance(q, str)],
        context_id=task.context_id,
        task=task,
    )


# Search -------------------------------------------------------------------------------


_HIT_KEYS = frozenset({"id", "url", "title"})


def _search_result(task: Task, raw: object) -> SearchResult:
    """One hit, its values converted where a server sent another type; or refused."""
    if type(raw) is dict and len(raw) == 3:
        # The service's own shape, three strings and nothing else, is taken as it is: the
        # checks below cost more than the rest of a hit's reading.
        ident, url, title = raw.get("id"), raw.get("url"), raw.get("title")
        if type(ident) is str and ident and type(url) is str and type(title) is str:
            return SearchResult(id=ident, url=url, title=title)
    if not isinstance(raw, dict):
        raise malformed(task, f"a search result is not an object: {brief(raw)}")
    ident = _as_id(raw.get("id"))
    if ident is None:
        raise malformed(task, f"a search result has no usable id: {brief(raw)}")
    return SearchResult(
        id=ident,
        url=_opt_str(raw.get("url")) or "",
        title=_opt_str(raw.get("title")) or "",
        extra=_extra(raw, _HIT_KEYS),
    )


def parse_search(task: Task, artifact: Artifact) -> list[SearchResult]:
    data = _data_with(artifact, "results")
    if data is None:
        raise malformed(task, "the search_results artifact has no data part with 'results'")
    results = data["results"]
    if not isinstance(results, list):
        raise malformed(task, "'results' is not a list")
    return [_search_result(task, raw) for raw in results]


# Fetch --------------------------------------------------------------------------------


_DOCUMENT_KEYS = frozenset({"id", "title", "author", "ref"})


def parse_document(task: Task, artifact: Artifact) -> Document:
    meta = _data_with(artifact, "id") or {}
    ident = _as_id(meta.get("id"))
    if ident is None:
        raise malformed(task, "the document artifact has no data part with an 'id'")
    return Document(
        id=ident,
        title=_opt_str(meta.get("title")),
        author=_opt_str(meta.get("author")),
        ref=_opt_str(meta.get("ref")),
        text="\n".join(text_parts(artifact)),
        extra=_extra(meta, _DOCUMENT_KEYS),
    )


# Readings and lookups -----------------------------------------------------------------


def parse_text(task: Task, artifact: Artifact) -> str:
    texts = text_parts(artifact)
    if not texts:
        raise malformed(task, f"the {artifact.name} artifact has no text part")
    return "\n".join(texts)


def parse_lookup(task: Task, artifact: Artifact) -> Lookup:
    """Every artifact's text and data: the service states neither their names nor shapes."""
    parts = [p for a in task.artifacts for p in a.parts]
    return Lookup(
        text="\n".join(p.text for p in parts if isinstance(p, TextPart)),
        data=[p.data for p in parts if isinstance(p, DataPart)],
        task=task,
    )


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
)
MASS_READINGS: Skill[str | dt.date, str] = Skill(
    "liturgical_readings",
    "default",
    "mass_readings",
    _build_readings,
    parse_text,
    not_found="No mass readings found.",
    description="The readings of the Catholic Mass for a day (first reading, psalm, "
    "second reading, gospel).",
)
SAINTS: Skill[str | dt.date, str] = Skill(
    "saints_of_the_day",
    "default",
    "martyrology",
    _build_saints,
    parse_text,
    not_found="No martyrology data found.",
    description="The Roman Martyrology entry for a day: the saints and blessed commemorated on it.",
)


def _lookup(skill_id: str, description: str) -> Skill[str, Lookup]:
    # Their artifacts and pool are not stated by the service: any artifact, the default pool.
    return Skill(
        skill_id,
        "default",
        None,
        _text_only("query"),
        parse_lookup,
        description=description,
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
LOOKUPS: tuple[Skill[str, Lookup], ...] = (
    SAINT_LOOKUP,
    PERSON_LOOKUP,
    POPE_LOOKUP,
    DIOCESE_LOOKUP,
    DIOCESE_STATISTICS_LOOKUP,
)
"""The five skills the service lists beyond its contract's table. Each is a client method
of its id (``client.pope_lookup(query)``) and a command of its id with dashes
(``magisterium-async pope-lookup QUERY``), both made from this table."""

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


def kept_as(skill: Skill[Any, Any] | None, task: Task) -> Literal["answer", "not_found"] | None:
    """What a cache may keep ``task`` as: the skill's answer, its "nothing found" answer,
    or nothing (a task not completed, or an answer :func:`read_result` refuses).

    A skill the table does not know (``None``) is kept whenever its task completed.
    """
    if task.state != TaskState.COMPLETED:
        return None
    if skill is None:
        return "answer"
    try:
        return "answer" if read_result(skill, task) is not None else "not_found"
    except MagisteriumError:
        return None
