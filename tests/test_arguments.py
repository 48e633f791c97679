"""The skills' arguments as tools take them: what each struct accepts, refuses, and gives
the skill's ``build``."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from magisterium_async._arguments import (
    DayArguments,
    DocumentArguments,
    LookupArguments,
    QueryArguments,
    QuestionArguments,
    SaintsDayArguments,
)


def test_each_struct_gives_its_skill_the_one_value_it_builds_from() -> None:
    assert QueryArguments(query="grace").value() == "grace"
    assert DocumentArguments(id="doc-1").value() == "doc-1"
    assert LookupArguments(query="Augustine").value() == "Augustine"
    assert QuestionArguments(question="Why?").value() == "Why?"


def test_a_question_continues_a_conversation_only_when_given_one() -> None:
    assert QuestionArguments(question="Why?").context is None
    assert QuestionArguments(question="And then?", context_id="ctx-1").context == "ctx-1"
    assert QueryArguments(query="grace").context is None  # only catholic_qa has one


def test_no_day_means_today() -> None:
    assert DayArguments().value() == "today"
    assert DayArguments(when="next Sunday").value() == "next Sunday"
    assert SaintsDayArguments().value() == "today"


@pytest.mark.parametrize(
    ("when", "value"),
    [
        ("2026-03-19", dt.date(2026, 3, 19)),
        (" 2026-03-19 ", dt.date(2026, 3, 19)),
        ("next Sunday", "next Sunday"),
        ("Easter Sunday 2026", "Easter Sunday 2026"),
    ],
)
def test_a_saints_day_goes_as_a_date_when_it_is_one(when: str, value: object) -> None:
    assert SaintsDayArguments(when=when).value() == value


def test_a_saints_day_that_does_not_exist_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"when: '2026-02-30' is not a date that exists"):
        SaintsDayArguments(when="2026-02-30").value()


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        (QueryArguments, b'{"query": ""}', r"\$\.query"),
        (QueryArguments, b"{}", r"missing required field `query`"),
        (DocumentArguments, b'{"id": "d", "extra": 1}', r"unknown field `extra`"),
        (QuestionArguments, b'{"question": "Why?", "context_id": 5}', r"\$\.context_id"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(
    kind: type[msgspec.Struct], raw: bytes, message: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.json.decode(raw, type=kind)


def test_optional_fields_take_null_as_not_given() -> None:
    # OpenAI's strict mode sends every property, with null for "not given".
    decoded = msgspec.json.decode(
        b'{"question": "Why?", "context_id": null}', type=QuestionArguments
    )
    assert decoded.context is None
    assert msgspec.json.decode(b'{"when": null}', type=DayArguments).value() == "today"
