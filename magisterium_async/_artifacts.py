"""Reading a completed task's artifact into its result type, forgiving of the service.

Each skill's ``parse`` (see the table in :mod:`._skills`) is one of the readers here. They
take what the contract promises and what real servers send beside it: numeric ids as
ints or floats, numbers as strings, unknown keys (kept in ``extra``), missing text (empty).
What cannot be read is a :class:`MalformedResponseError` naming the task and, briefly,
what was wrong.
"""

from __future__ import annotations

import math
import re
import reprlib
from typing import Any

from magisterium_async._errors import MalformedResponseError
from magisterium_async._models import (
    Answer,
    Artifact,
    Citation,
    DataPart,
    Document,
    SearchResult,
    Task,
    TextPart,
)

__all__ = [
    "brief",
    "malformed",
    "parse_answer",
    "parse_document",
    "parse_lookup",
    "parse_search",
    "parse_text",
    "text_parts",
]

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
    """The keys of ``raw`` not in ``known``: most objects have none, so skip the copy."""
    if len(raw) <= len(known) and known.issuperset(raw):
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
_STR_OR_NONE = (str, type(None))
_INT_OR_NONE = (int, type(None))


def _citation(raw: object) -> Citation:
    if not isinstance(raw, dict):
        return Citation(extra={"value": raw})
    if (
        _CITATION_KEYS.issuperset(raw)
        and type(raw.get("document_index")) in _INT_OR_NONE
        and type(raw.get("document_year")) in _INT_OR_NONE
        and all(type(raw.get(name)) in _STR_OR_NONE for name in _CITATION_TEXT_FIELDS)
    ):
        # The service's own shape, every value already of its field's type.
        return Citation(**raw)
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
    """A hit in any other shape than the service's own: converted, or refused."""
    if not isinstance(raw, dict):
        raise malformed(task, f"a search result is not an object: {brief(raw)}")
    ident, url, title = raw.get("id"), raw.get("url"), raw.get("title")
    if type(ident) is not str or not ident:
        ident = _as_id(ident)
        if ident is None:
            raise malformed(task, f"a search result has no usable id: {brief(raw)}")
    if type(url) is not str:
        url = _opt_str(url) or ""
    if type(title) is not str:
        title = _opt_str(title) or ""
    return SearchResult(id=ident, url=url, title=title, extra=_extra(raw, _HIT_KEYS))


def parse_search(task: Task, artifact: Artifact) -> list[SearchResult]:
    data = _data_with(artifact, "results")
    if data is None:
        raise malformed(task, "the search_results artifact has no data part with 'results'")
    results = data["results"]
    if not isinstance(results, list):
        raise malformed(task, "'results' is not a list")
    hits = []
    for raw in results:
        # The service's own shape, checked first and inline: a search has up to 50 hits,
        # and these checks are a good part of what a search costs the client.
        if type(raw) is dict and len(raw) == 3:
            ident, url, title = raw.get("id"), raw.get("url"), raw.get("title")
            if type(ident) is str and ident and type(url) is str and type(title) is str:
                hits.append(SearchResult(id=ident, url=url, title=title))
                continue
        hits.append(_search_result(task, raw))
    return hits


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


def parse_lookup(task: Task, artifact: Artifact) -> dict[str, Any]:
    """Every artifact's text and data: the service states neither their names nor shapes."""
    parts = [p for a in task.artifacts for p in a.parts]
    return {
        "text": "\n".join(p.text for p in parts if isinstance(p, TextPart)),
        "data": [p.data for p in parts if isinstance(p, DataPart)],
    }
