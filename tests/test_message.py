"""The user message of message/send: parts from what the caller gives, checked."""

from __future__ import annotations

from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._message import parts_from, send_params


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
