"""The short way: a search's usual answer decoded straight into its hits yields exactly
what the long way (decode a Task, then read it) would, and anything else goes the long way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import magisterium_async as m
from magisterium_async._http._jsonrpc import decode_response
from magisterium_async._models import MAX_DEPTH
from magisterium_async._skills import SEARCH, read_result
from magisterium_async._usual import SearchAnswer, decode_usual
from tests.conftest import artifact, data, task_json, text
from tests.test_fuzz import FUZZ, SKILL_TASKS, envelopes, render

REQUEST_ID = 7
HITS = [{"id": f"{i}", "url": f"https://example.org/{i}", "title": f"T{i}"} for i in range(10)]


def answer_body(result: dict[str, Any], **envelope: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": REQUEST_ID, "result": result, **envelope}).encode()


def search_task(hits: list[Any], **task: Any) -> dict[str, Any]:
    return task_json(artifacts=[artifact("search_results", data({"results": hits}))], **task)


def long_way(body: bytes) -> Any:
    """What the long way makes of ``body``: the hits, or the error it raises."""
    try:
        task = decode_response("message/send", REQUEST_ID, 200, body, skill_id=SEARCH.id)
        return read_result(SEARCH, task)
    except m.MagisteriumError as error:
        return error


def test_the_service_s_usual_answer_goes_the_short_way() -> None:
    body = answer_body(search_task(HITS, task_id="t-9", context_id="c-9"))
    answer = decode_usual(SearchAnswer, REQUEST_ID, body)
    assert answer is not None
    assert (answer.id, answer.context_id, answer.state) == ("t-9", "c-9", "completed")
    assert answer.result() == long_way(body)
    assert [hit.id for hit in answer.result()] == [str(i) for i in range(10)]


@pytest.mark.parametrize(
    ("why", "body"),
    [
        ("a hit with a key of its own", answer_body(search_task([{**HITS[0], "score": 1}]))),
        ("a hit with an extra key", answer_body(search_task([{**HITS[0], "extra": {}}]))),
        ("a numeric id", answer_body(search_task([{**HITS[0], "id": 5}]))),
        ("an empty id", answer_body(search_task([{**HITS[0], "id": ""}]))),
        ("a failed task", answer_body(search_task([], state="failed", reason="no"))),
        (
            "nothing found",
            answer_body(task_json(artifacts=[artifact("search_results", text("x"))])),
        ),
        ("no search artifact", answer_body(task_json(artifacts=[]))),
        (
            "a part without its kind",
            answer_body(
                task_json(artifacts=[artifact("search_results", {"data": {"results": []}})])
            ),
        ),
        ("an error beside the result", answer_body(search_task(HITS), error=None)),
        (
            "another id",
            json.dumps({"jsonrpc": "2.0", "id": 8, "result": search_task(HITS)}).encode(),
        ),
        (
            "a float id",
            json.dumps({"jsonrpc": "2.0", "id": 7.0, "result": search_task(HITS)}).encode(),
        ),
        (
            "JSON-RPC 1.0",
            json.dumps({"jsonrpc": "1.0", "id": 7, "result": search_task(HITS)}).encode(),
        ),
        ("not JSON", b"{"),
    ],
)
def test_anything_else_goes_the_long_way(why: str, body: bytes) -> None:
    assert decode_usual(SearchAnswer, REQUEST_ID, body) is None, why


def test_of_two_search_artifacts_the_first_holds_the_hits() -> None:
    first, second = data({"results": HITS[:2]}), data({"results": HITS[2:]})
    body = answer_body(
        task_json(artifacts=[artifact("search_results", first), artifact("search_results", second)])
    )
    answer = decode_usual(SearchAnswer, REQUEST_ID, body)
    assert answer is not None
    assert answer.result() == long_way(body)
    assert [hit.id for hit in answer.result()] == ["0", "1"]


def test_a_value_nested_past_the_bound_goes_the_long_way_and_is_refused_there() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    body = answer_body({**search_task(HITS), "metadata": {"deep": deep}})
    assert decode_usual(SearchAnswer, REQUEST_ID, body) is None
    assert isinstance(long_way(body), m.MalformedResponseError)


@settings(FUZZ)
@given(envelopes(SKILL_TASKS["search"]))
def test_the_short_way_yields_what_the_long_way_would(envelope: Any) -> None:
    body = render(envelope, REQUEST_ID)
    answer = decode_usual(SearchAnswer, REQUEST_ID, body)
    if answer is None:
        return  # the long way's to judge, as before
    hits = long_way(body)
    assert not isinstance(hits, Exception), f"the long way refuses it: {hits}"
    assert answer.result() == hits
    assert [h.extra for h in answer.result()] == [h.extra for h in hits]
    task = decode_response("message/send", REQUEST_ID, 200, body)
    assert (answer.id, answer.context_id, answer.state) == (task.id, task.context_id, task.state)


@given(
    st.lists(
        st.fixed_dictionaries({"id": st.text(min_size=1), "url": st.text(), "title": st.text()}),
        max_size=50,
    )
)
def test_any_list_of_plain_hits_goes_the_short_way_unchanged(hits: list[dict[str, str]]) -> None:
    body = answer_body(search_task(hits))
    answer = decode_usual(SearchAnswer, REQUEST_ID, body)
    assert answer is not None
    assert answer.result() == long_way(body)
