"""Reading artifacts: answers, citations, search hits and documents in the service's
shape and in the shapes other servers send, and short messages for what cannot be read."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from magisterium_async import Citation, MalformedResponseError, Task
from magisterium_async._skills import ASK, FETCH, SEARCH, read_result
from tests.conftest import artifact, data, task_json, text


def decode(raw: dict[str, Any]) -> Task:
    return msgspec.convert(raw, Task)


def test_answer_with_citations_and_related_questions() -> None:
    citation = {
        "cited_text": "God is love",
        "cited_text_heading": "1",
        "document_title": "Deus Caritas Est",
        "document_index": 0.0,
        "document_author": "Benedict XVI",
        "document_year": 2005,
        "document_reference": "DCE 1",
        "source_url": "https://example.org/dce",
        "relevance": 0.9,
    }
    task = decode(
        task_json(
            artifacts=[
                artifact(
                    "catholic_qa_response",
                    text("Love is the heart of the faith."),
                    data({"citations": [citation]}),
                    data({"related_questions": ["What is charity?"]}),
                )
            ]
        )
    )
    answer = read_result(ASK, task)
    assert answer is not None
    assert answer.text == "Love is the heart of the faith."
    assert answer.related_questions == ["What is charity?"]
    assert answer.context_id == "ctx-1"
    assert answer.task is task
    assert answer.citations == [
        Citation(
            cited_text="God is love",
            cited_text_heading="1",
            document_title="Deus Caritas Est",
            document_index=0,
            document_author="Benedict XVI",
            document_year=2005,
            document_reference="DCE 1",
            source_url="https://example.org/dce",
            extra={"relevance": 0.9},
        )
    ]


def test_answer_without_citations() -> None:
    task = decode(task_json(artifacts=[artifact("catholic_qa_response", text("Yes."))]))
    answer = read_result(ASK, task)
    assert answer is not None
    assert (answer.citations, answer.related_questions) == ([], [])


def test_search_results_accept_float_and_int_ids() -> None:
    results = [
        {"id": "12345", "url": "https://x/1", "title": "Lumen Gentium"},
        {"id": 678.0, "url": "https://x/2", "title": "Dei Verbum", "score": 3},
        {"id": 9, "url": "https://x/3", "title": "Gaudium et Spes"},
    ]
    task = decode(task_json(artifacts=[artifact("search_results", data({"results": results}))]))
    hits = read_result(SEARCH, task)
    assert hits is not None
    assert [(h.id, h.title) for h in hits] == [
        ("12345", "Lumen Gentium"),
        ("678", "Dei Verbum"),
        ("9", "Gaudium et Spes"),
    ]
    assert hits[1].extra == {"score": 3}


def search_task(*results: Any) -> Task:
    return decode(
        task_json(artifacts=[artifact("search_results", data({"results": list(results)}))])
    )


def test_search_results_keep_unknown_keys_and_fill_missing_text() -> None:
    hits = read_result(
        SEARCH,
        search_task(
            {"id": "1", "url": "https://x/1", "title": "A"},
            {"id": "2", "url": "https://x/2", "title": "B", "score": 0.5, "lang": "la"},
            {"id": "3"},
            {"id": "4", "url": None, "title": 1962, "score": 1},
        ),
    )
    assert hits is not None
    assert [(h.id, h.url, h.title, h.extra) for h in hits] == [
        ("1", "https://x/1", "A", {}),
        ("2", "https://x/2", "B", {"score": 0.5, "lang": "la"}),
        ("3", "", "", {}),
        ("4", "", "1962", {"score": 1}),
    ]


@pytest.mark.parametrize(
    ("hit", "words"),
    [
        ("just a string", "not an object"),
        ({"id": "", "url": "u", "title": "t"}, "no usable id"),
        ({"id": 1.5, "url": "u", "title": "t"}, "no usable id"),
        ({"id": True, "url": "u", "title": "t"}, "no usable id"),
        ({"url": "u", "title": "t", "other": 1}, "no usable id"),
    ],
)
def test_malformed_hits_name_what_is_wrong(hit: Any, words: str) -> None:
    with pytest.raises(MalformedResponseError, match=words):
        read_result(SEARCH, search_task({"id": "1", "url": "u", "title": "t"}, hit))


def answer_task(*citations: Any) -> Task:
    parts = [text("Yes."), data({"citations": list(citations)})]
    return decode(task_json(artifacts=[artifact("catholic_qa_response", *parts)]))


def test_citations_in_other_shapes_are_normalized() -> None:
    answer = read_result(
        ASK,
        answer_task(
            {"document_title": "Lumen Gentium", "document_index": 2, "document_year": 1964},
            {"document_title": 7, "document_index": "3", "document_year": "1965"},
            {"document_year": "c. 1200", "cited_text": True, "page": 4},
            "a bare string",
        ),
    )
    assert answer is not None
    assert answer.citations == [
        Citation(document_title="Lumen Gentium", document_index=2, document_year=1964),
        Citation(document_title="7", document_index=3, document_year=1965),
        Citation(document_year="c. 1200", cited_text="true", extra={"page": 4}),
        Citation(extra={"value": "a bare string"}),
    ]
    assert type(answer.citations[0]) is Citation


def test_document_without_extra_keys_has_empty_extra() -> None:
    meta = {"id": 42.0, "title": "Dei Verbum"}
    task = decode(task_json(artifacts=[artifact("document", text("Dei Verbum"), data(meta))]))
    doc = read_result(FETCH, task)
    assert doc is not None
    assert (doc.id, doc.title, doc.author, doc.extra) == ("42", "Dei Verbum", None, {})


def answer_with_citation(citation: Any) -> Task:
    return decode(
        task_json(
            artifacts=[
                artifact(
                    "catholic_qa_response", text("An answer."), data({"citations": [citation]})
                )
            ]
        )
    )


@pytest.mark.parametrize(
    ("index", "year", "expected"),
    [
        ("9" * 5000, "9" * 5000, (None, "9" * 5000)),  # past Python's int-digit limit
        ("12", " 1965 ", (12, 1965)),
        ("²", "١٩٦٥", (None, "١٩٦٥")),  # digits int() refuses, or that are not ASCII
        (float("inf"), float("nan"), (None, "nan")),
        (10**400, 3.0, (10**400, 3)),
        ([1], {"y": 1}, (None, None)),
    ],
)
def test_citation_numbers_of_any_shape_never_raise(index: Any, year: Any, expected: Any) -> None:
    answer = read_result(
        ASK, answer_with_citation({"document_index": index, "document_year": year})
    )
    assert answer is not None
    (citation,) = answer.citations
    assert (citation.document_index, citation.document_year) == expected


def test_messages_about_huge_or_deep_hits_stay_short() -> None:
    deep: Any = 1
    for _ in range(60):
        deep = [deep]
    for hit in ({"id": None, "title": "t" * 1_000_000}, {"id": deep}, "x" * 1_000_000):
        raw = task_json(artifacts=[artifact("search_results", data({"results": [hit]}))])
        with pytest.raises(MalformedResponseError) as info:
            read_result(SEARCH, decode(raw))
        assert len(str(info.value)) < 300
