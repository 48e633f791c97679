"""The skill table: what each skill sends, its pool, its "nothing found" answer and a
task's state."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest

from magisterium_async import (
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
    pool_for,
    read_result,
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


def test_pool_for_unknown_and_default_skills() -> None:
    assert pool_for(None) == "expensive"  # the service's default skill is catholic_qa
    assert pool_for("saint_lookup") == "default"
    assert pool_for("catholic_qa") == "expensive"


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
