"""The wire models: camelCase on the wire, tolerant decoding, tagged parts."""

from __future__ import annotations

import msgspec

from magisterium_async import DataPart, FilePart, Message, Task, TextPart
from magisterium_async._models import MAX_DEPTH, deeper_than, json_deeper_than, task_deeper_than


def test_task_decodes_parts_by_kind_and_ignores_unknown_fields() -> None:
    raw = b"""{"kind": "task", "id": "t", "contextId": "c", "future": 1,
      "status": {"state": "completed", "timestamp": "2026-01-01T00:00:00Z", "x": 2},
      "artifacts": [{"artifactId": "a", "name": "n", "parts": [
        {"kind": "text", "text": "hi", "extra": true},
        {"kind": "data", "data": {"n": 1.0, "nested": {"list": [1, "two", null]}}},
        {"kind": "file", "file": {"name": "f.pdf", "mimeType": "application/pdf", "uri": "u"}}
      ]}],
      "history": [{"role": "user", "kind": "message", "messageId": "m",
                   "parts": [{"kind": "text", "text": "q"}]}]}"""
    task = msgspec.json.decode(raw, type=Task)
    text_part, data_part, file_part = task.artifacts[0].parts
    assert isinstance(text_part, TextPart) and text_part.text == "hi"
    assert isinstance(data_part, DataPart) and data_part.data["n"] == 1.0
    assert isinstance(file_part, FilePart) and file_part.file.mime_type == "application/pdf"
    assert task.context_id == "c" and task.state == "completed"
    assert task.history[0].text == "q"


def test_message_encodes_camel_case_and_leaves_out_defaults() -> None:
    message = Message(
        role="user", parts=[TextPart(text="q")], message_id="m-1", metadata={"skillId": "s"}
    )
    assert msgspec.json.decode(msgspec.json.encode(message)) == {
        "kind": "message",
        "role": "user",
        "parts": [{"kind": "text", "text": "q"}],
        "messageId": "m-1",
        "metadata": {"skillId": "s"},
    }


def test_failure_reason_falls_back_when_the_service_gave_none() -> None:
    task = msgspec.convert({"id": "t", "contextId": "c", "status": {"state": "failed"}}, Task)
    assert "failed" in task.failure_reason


def nest(depth: int) -> object:
    value: object = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def test_deeper_than_counts_lists_and_objects_without_recursing() -> None:
    assert not deeper_than("scalar", 0)
    assert not deeper_than(nest(5), 5)
    assert deeper_than(nest(6), 5)
    assert deeper_than(nest(100_000), MAX_DEPTH)  # iterative: no RecursionError
    assert not deeper_than([[1], {"a": [2]}, []], 3)


def test_json_deeper_than_reads_the_bytes_strings_and_unknown_fields_included() -> None:
    assert not json_deeper_than(b'{"a": [[1], {"b": []}]}', 4)
    assert json_deeper_than(b'{"a": [[1], {"b": []}]}', 3)
    assert json_deeper_than(b"[" * 100_000 + b"]" * 100_000, MAX_DEPTH)  # no recursion
    # Brackets in strings, after escaped quotes and backslashes, are text.
    assert not json_deeper_than(b'["[[[[", "\\"[[[[", "\\\\", "{{{{"]', 1)
    assert json_deeper_than(b'["\\\\", [[]]]', 2)


def test_task_deeper_than_looks_at_every_free_form_value() -> None:
    deep = nest(MAX_DEPTH + 1)
    part = {"kind": "text", "text": "x"}
    base = {"id": "t", "contextId": "c", "status": {"state": "completed"}}
    message = {"role": "agent", "kind": "message", "messageId": "m"}
    places = [
        {"metadata": {"deep": deep}},
        {"artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"d": deep}}]}]},
        {"artifacts": [{"artifactId": "a", "parts": [part], "metadata": {"d": deep}}]},
        {"history": [{**message, "parts": [{**part, "metadata": {"d": deep}}]}]},
        {
            "status": {
                "state": "failed",
                "message": {**message, "parts": [part], "metadata": {"d": deep}},
            }
        },
    ]
    assert not task_deeper_than(msgspec.convert(base, Task), MAX_DEPTH)
    for place in places:
        assert task_deeper_than(msgspec.convert({**base, **place}, Task), MAX_DEPTH), place
