"""The skill table: what each skill sends, its pool, its "nothing found" answer and a
task's state.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

import msgspec
import pytest

import magisterium_async as m
from magisterium_async import (
    Citation,
    DataPart,
    MalformedResponseError,
    Task,
    TaskFailedError,
    TextPart,
)
from magisterium_async._skills import (
    ASK,
    FETCH,
    MASS_READINGS,
    SAINTS,
    SEARCH,
    SKILLS,
    parts_from,
    read_result,
    send_params,
)
from tests.conftest import artifact, data, task_json, text


def decode(raw: dict[str, Any]) -> Task:
    return msgspec.convert(raw, Task)


def test_table_holds_every_skill_with_its_pool_and_artifact() -> None:
    assert {s.id: (s.pool, s.artifact) for s in SKILLS.values()} == {
        "catholic_qa": ("expensive", "catholic_qa_response"),
        "document_search": ("default", "search_results"),
        "document_fetch": ("default", "document"),
        "liturgical_readings": ("default", "mass_readings"),
        "saints_of_the_day": ("default", "martyrology"),
        # The service states neither the lookups' artifacts nor their pool.
        "saint_lookup": ("default", None),
        "person_lookup": ("default", None),
        "pope_lookup": ("default", None),
        "diocese_lookup": ("default", None),
        "diocese_statistics_lookup": ("default", None),
    }


def test_builders_send_the_contracts_parts() -> None:
    assert FETCH.build("12345") == [DataPart(data={"id": "12345"})]
    assert SEARCH.build("grace") == [TextPart(text="grace")]
    assert SAINTS.build(dt.date(2026, 3, 19)) == [DataPart(data={"date": "2026-03-19"})]
    assert SAINTS.build("next Sunday") == [TextPart(text="next Sunday")]
    assert MASS_READINGS.build("today") == [TextPart(text="today")]


@pytest.mark.parametrize(
    ("skill", "value", "error", "name"),
    [
        (SEARCH, "", ValueError, "query"),
        (SEARCH, "   ", ValueError, "query"),
        (SEARCH, 3, TypeError, "query"),
        (ASK, None, TypeError, "question"),
        (FETCH, "", ValueError, "document_id"),
        (FETCH, 1.5, TypeError, "document_id"),
        (SAINTS, 20260319, TypeError, "when"),
        (MASS_READINGS, "\n", ValueError, "when"),
    ],
)
def test_bad_arguments_name_what_was_wrong(skill: Any, value: Any, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        skill.build(value)


def test_search_nothing_found_is_an_empty_list() -> None:
    task = decode(task_json(artifacts=[artifact("search_results", data({"results": []}))]))
    assert read_result(SEARCH, task) == []


def test_document_and_document_not_found() -> None:
    meta = {"id": "12345", "title": "Lumen Gentium", "author": "Vatican II", "ref": "LG", "y": 1}
    task = decode(
        task_json(artifacts=[artifact("document", text("Christ is the light"), data(meta))])
    )
    doc = read_result(FETCH, task)
    assert doc is not None
    assert (doc.id, doc.title, doc.author, doc.ref, doc.text) == (
        "12345",
        "Lumen Gentium",
        "Vatican II",
        "LG",
        "Christ is the light",
    )
    assert doc.extra == {"y": 1}
    missing = decode(task_json(artifacts=[artifact("document", text("Document not found."))]))
    assert read_result(FETCH, missing) is None


@pytest.mark.parametrize(
    ("skill", "name", "not_found"),
    [
        (MASS_READINGS, "mass_readings", "No mass readings found."),
        (SAINTS, "martyrology", "No martyrology data found."),
    ],
)
def test_text_skills_and_their_not_found_texts(skill: Any, name: str, not_found: str) -> None:
    found = decode(task_json(artifacts=[artifact(name, text("First reading: Is 2:1-5"))]))
    assert read_result(skill, found) == "First reading: Is 2:1-5"
    missing = decode(task_json(artifacts=[artifact(name, text(not_found))]))
    assert read_result(skill, missing) is None


def test_failed_task_raises_with_the_reason() -> None:
    task = decode(task_json(state="failed", reason="the skill raised: boom"))
    with pytest.raises(TaskFailedError) as info:
        read_result(SEARCH, task)
    assert info.value.reason == "the skill raised: boom"
    assert info.value.task is task


@pytest.mark.parametrize(
    "raw",
    [
        task_json(state="working"),
        task_json(artifacts=[artifact("other", text("x"))]),
        task_json(artifacts=[artifact("search_results", text("no data"))]),
        task_json(artifacts=[artifact("search_results", data({"results": "nope"}))]),
        task_json(artifacts=[artifact("search_results", data({"results": [{"url": "u"}]}))]),
    ],
)
def test_wrong_shapes_are_malformed_response_errors(raw: dict[str, Any]) -> None:
    with pytest.raises(MalformedResponseError):
        read_result(SEARCH, decode(raw))


def test_an_odd_state_is_named_briefly() -> None:
    with pytest.raises(MalformedResponseError, match="in state 'wwww") as info:
        read_result(SEARCH, decode(task_json(state="w" * 100_000)))
    assert len(str(info.value)) < 200


# The user message of message/send: parts from what the caller gives, checked
# --------------------------------------------------------------------------------


def test_a_string_a_part_or_a_sequence_make_the_parts() -> None:
    data = m.DataPart(data={"a": 1})
    assert parts_from("hi") == [m.TextPart(text="hi")]
    assert parts_from(data) == [data]
    assert parts_from(["hi", data]) == [m.TextPart(text="hi"), data]


@pytest.mark.parametrize(
    ("parts", "error", "match"),
    [
        ([], ValueError, "at least one part"),
        ([3], TypeError, r"parts\[0\] must be a str or a Part, not int"),
        (["ok", " "], ValueError, r"parts\[1\]"),
        (7, TypeError, "parts must be a str, a Part or a sequence"),
    ],
)
def test_bad_parts_are_refused_by_name(parts: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parts_from(parts)


def test_the_message_names_its_skill_and_context_and_has_a_fresh_id() -> None:
    first = send_params([m.TextPart(text="x")], "document_search", "ctx").message
    second = send_params([m.TextPart(text="x")], None, None).message
    assert (first.metadata, first.context_id, first.role) == (
        {"skillId": "document_search"},
        "ctx",
        "user",
    )
    assert second.metadata is None and second.context_id is None
    assert first.message_id != second.message_id
    with pytest.raises(ValueError, match="context_id"):
        send_params([m.TextPart(text="x")], None, " ")


def test_message_ids_are_unique_version_4_uuids() -> None:
    ids = [send_params([m.TextPart(text="x")], None, None).message.message_id for _ in range(100)]
    assert len(set(ids)) == len(ids)
    for value in ids[:3]:
        parsed = uuid.UUID(value)
        assert (str(parsed), parsed.version, parsed.variant) == (value, 4, uuid.RFC_4122)


# Reading artifacts: answers, citations, search hits and documents in the service's
# --------------------------------------------------------------------------------


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


LONE = "grace \ud800 nature"  # a lone surrogate, as a bad decode leaves one


async def test_text_utf8_cannot_encode_is_refused_by_name_before_anything_is_sent() -> None:
    from magisterium_async import tools
    from magisterium_async.testing import MockResponse, MockTransport

    transport = MockTransport(lambda request: MockResponse(status=500))
    calls = {
        "query": lambda c: c.search(LONE),
        "question": lambda c: c.ask(LONE),
        "document_id": lambda c: c.fetch(LONE),
        "when": lambda c: c.saints(LONE),
        "context_id": lambda c: c.ask("grace", context_id=LONE),
        "task_id": lambda c: c.get_task(LONE),
        "skill_id": lambda c: c.send_message("grace", skill_id=LONE),
        "parts[0]": lambda c: c.send_message(LONE),
        "parts[1].text": lambda c: c.send_message(["grace", TextPart(text=LONE)]),
        "parts[0].data": lambda c: c.send_message(DataPart(data={"q": [LONE]})),
    }
    async with m.AsyncMagisterium(token="t", transport=transport) as client:
        for name, call in calls.items():
            with pytest.raises(ValueError, match=rf"^{re.escape(name)} cannot be sent") as info:
                await call(client)
            assert not isinstance(info.value, UnicodeError), name
        for lookup in ("saint_lookup", "pope_lookup", "diocese_statistics_lookup"):
            with pytest.raises(
                ValueError, match=r"^query cannot be sent: .*'\\ud800' at position 6"
            ):
                await getattr(client, lookup)(LONE)
        with pytest.raises(
            ValueError, match="document_search: bad arguments: query cannot be sent"
        ):
            await tools.call_tool(client, "document_search", {"query": LONE})
    assert transport.requests == []
