"""The wire models: camelCase on the wire, tolerant decoding, tagged parts."""

from __future__ import annotations

import json

import msgspec
import pytest

from magisterium_async import (
    Citation,
    DataPart,
    Document,
    FilePart,
    HarvestedDocument,
    Message,
    SearchResult,
    Task,
    TextPart,
)
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


def test_deeper_than_counts_lists_and_objects_and_never_raises_recursion_error() -> None:
    assert not deeper_than("scalar", 0)
    assert not deeper_than(nest(5), 5)
    assert deeper_than(nest(6), 5)
    assert deeper_than(nest(100_000), MAX_DEPTH)  # no RecursionError
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


# Results as JSON, and in sets ------------------------------------------------------------


def _results() -> tuple[SearchResult, Document, Citation]:
    hit = SearchResult(id="7", url="https://x/7", title="Lumen gentium", extra={"year": [1964]})
    document = Document(id="7", title="LG", author=None, ref="AAS 57", text="…", extra={"n": 1})
    citation = Citation(document_title="LG", document_index=3, extra={"page": {"n": 5}})
    return hit, document, citation


def test_results_encode_to_json_and_back_as_the_docs_say() -> None:
    hit, document, citation = _results()
    harvested = HarvestedDocument(**msgspec.structs.asdict(document), queries=("grace",))
    # json.dumps alone raises TypeError on them; the docs give these two ways.
    with pytest.raises(TypeError):
        json.dumps([hit])
    text = json.dumps([hit, document, citation, harvested], default=msgspec.to_builtins)
    assert json.loads(text)[0] == {
        "id": "7",
        "url": "https://x/7",
        "title": "Lumen gentium",
        "extra": {"year": [1964]},
    }
    assert json.loads(text)[3]["queries"] == ["grace"]
    assert msgspec.json.decode(msgspec.json.encode([hit]), type=list[SearchResult]) == [hit]
    assert msgspec.json.decode(msgspec.json.encode(citation), type=Citation) == citation
    assert msgspec.to_builtins(document)["ref"] == "AAS 57"


def test_results_are_hashable_and_equal_ones_hash_equal() -> None:
    hit, document, citation = _results()
    harvested = HarvestedDocument(**msgspec.structs.asdict(document), queries=("grace",))
    for value in (hit, document, citation, harvested):
        twin = msgspec.json.decode(msgspec.json.encode(value), type=type(value))
        assert twin == value and twin is not value and hash(twin) == hash(value)
        assert len({value, twin}) == 1
    # Hits of several searches collected in a set: one per distinct hit.
    other = SearchResult(id="8", url="https://x/8", title="Dei verbum")
    assert {hit, other, msgspec.structs.replace(hit)} == {hit, other}
