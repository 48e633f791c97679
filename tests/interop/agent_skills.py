"""What the a2a-sdk test servers answer, with no dependency: shared by both server scripts
(run under a2a-sdk in their own virtualenvs) and by the tests that check the answers.

``answer()`` takes a message's skill id, text parts and data parts and returns an
:class:`Outcome`: a completed task's artifact (its name and parts, each ``("text", str)`` or
``("data", dict)``) in the shapes of the Magisterium service's ``document_search`` and
``document_fetch`` skills, or the reason of a task left failed or input-required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOT_FOUND = "Document not found."
EMPTY_QUERY = "nothing matches this"
NEEDS_INPUT = "needs_input"
DEFAULT_SKILL = "document_search"
"""The skill a message that names none runs (the service's is ``catholic_qa``, which
these agents do not have)."""
QUESTION = "Which document do you mean?"

# Search hits: one id is a JSON string, one a JSON integer (a generic A2A server may send
# either; a2a-sdk 1.x's v0.3 compat layer turns the integer into a float on the wire).
SEARCH_RESULTS: list[dict[str, Any]] = [
    {
        "id": "10234",
        "url": "https://www.vatican.va/content/leo-xiii/en/encyclicals/documents/"
        "hf_l-xiii_enc_15051891_rerum-novarum.html",
        "title": "Rerum Novarum",
    },
    {
        "id": 12345,
        "url": "https://www.vatican.va/archive/hist_councils/ii_vatican_council/documents/"
        "vat-ii_const_19641121_lumen-gentium_en.html",
        "title": "Lumen Gentium",
    },
]

DOCUMENTS: dict[str, dict[str, Any]] = {
    "12345": {
        "meta": {
            "id": 12345,
            "title": "Lumen Gentium",
            "author": "Second Vatican Council",
            "ref": "LG",
            "year": 1964,
        },
        "text": "Christ is the Light of nations. Because this is so, this Sacred Synod "
        "gathered together in the Holy Spirit eagerly desires ...",
    },
    "10234": {
        "meta": {"id": "10234", "title": "Rerum Novarum", "author": "Leo XIII", "ref": "RN"},
        "text": "That the spirit of revolutionary change, which has long been disturbing "
        "the nations of the world, should have passed beyond the sphere of politics ...",
    },
}

Part = tuple[str, Any]


@dataclass(frozen=True)
class Outcome:
    """How a task ends: ``completed`` with one artifact, or ``failed`` with a reason."""

    state: str
    artifact: str = ""
    parts: list[Part] = field(default_factory=list)
    reason: str = ""


def _search(texts: list[str]) -> Outcome:
    query = " ".join(texts).strip()
    results = [] if query == EMPTY_QUERY else [dict(hit) for hit in SEARCH_RESULTS]
    return Outcome("completed", "search_results", [("data", {"results": results})])


def _fetch(texts: list[str], datas: list[dict[str, Any]]) -> Outcome:
    ident: Any = next((d["id"] for d in datas if "id" in d), None)
    if ident is None and texts:
        ident = texts[0].strip()
    if isinstance(ident, float) and ident.is_integer():
        ident = int(ident)
    document = DOCUMENTS.get(str(ident))
    if document is None:
        return Outcome("completed", "document", [("text", NOT_FOUND)])
    parts: list[Part] = [("text", document["text"]), ("data", dict(document["meta"]))]
    return Outcome("completed", "document", parts)


def answer(skill_id: Any, texts: list[str], datas: list[dict[str, Any]]) -> Outcome:
    """The outcome of one message to ``skill_id`` (``None``: :data:`DEFAULT_SKILL`)."""
    if skill_id is None:
        skill_id = DEFAULT_SKILL
    if skill_id == "document_search":
        return _search(texts)
    if skill_id == "document_fetch":
        return _fetch(texts, datas)
    if skill_id == NEEDS_INPUT:  # a task left open, as generic A2A agents may leave one
        return Outcome("input-required", reason=QUESTION)
    return Outcome("failed", reason=f"Skill not found: {skill_id!r}")
