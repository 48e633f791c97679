"""The user message of message/send: parts from what the caller gives, checked."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._message import new_message_id, parts_from, send_params


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
    ids = [new_message_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:3] + ids[-3:]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)


def test_a_forked_child_draws_ids_of_its_own() -> None:
    before = new_message_id()
    new_message_id.reseed()  # what a forked child runs first
    after = new_message_id()
    assert before[:24] != after[:24]
    assert len({new_message_id() for _ in range(100)}) == 100


def test_ids_stay_uuid_shaped_when_the_counter_wraps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "urandom", lambda n: b"\xff" * n)
    ids = type(new_message_id)()  # counting from the last 48-bit value
    last, wrapped = ids(), ids()
    assert (last[-12:], wrapped[-12:]) == ("f" * 12, "0" * 12)
    assert str(uuid.UUID(wrapped)) == wrapped


_FORK = """
import os
from magisterium_async._message import new_message_id
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, new_message_id().encode())
    os._exit(0)
os.close(write)
child = os.read(read, 100).decode()
os.waitpid(pid, 0)
print(child, new_message_id())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_repeats_its_parent_s_ids() -> None:
    # In a fresh interpreter: forking this multi-threaded test process would warn.
    done = subprocess.run([sys.executable, "-c", _FORK], capture_output=True, text=True)
    child, parent = done.stdout.split()
    assert child[:24] != parent[:24]
