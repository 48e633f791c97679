"""Hostile answers through every public method: only SDK errors, and every call ends.

Each example scripts a short sequence of answers (valid-ish envelopes with mutated fields,
deep nesting, huge numbers, wrong types, odd statuses and headers, corrupt compression,
hangs and dropped connections), replayed in a cycle for as long as the client keeps
asking. Through ``MockTransport`` and a ``VirtualClock`` a call costs a millisecond, so
each method sees a few dozen such scripts. Every call must end with its result or a
``MagisteriumError``, within a bound of virtual time and of requests.

Examples are derandomized (the same ones on every run); ``MAGISTERIUM_FUZZ_EXAMPLES=N``
runs N per method with fresh randomness, for a deeper search on a workstation.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import json
import os
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import magisterium_async as m
from magisterium_async._models import MAX_DEPTH
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock

_EXAMPLES = int(os.environ.get("MAGISTERIUM_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXAMPLES or 150,
    derandomize=not _EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

POLICY = m.RetryPolicy(
    max_retries=2, max_retry_after=10.0, fallback_retry_after=1.0, rate_limit_budget=30.0
)
TIMEOUT = 5.0
# Attempts and backoffs, the rate-limit budget and one more capped wait, with room.
TIME_BOUND = (POLICY.max_retries + 1) * TIMEOUT + 1.5 + 30.0 + 10.0 + 5.0
REQUEST_BOUND = 100


class Runaway(Exception):
    """A call went on asking: raised by the handler, so it reaches the test as is."""


# Values ------------------------------------------------------------------------------


def deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


HOSTILE = [
    deep(1000),
    deep(MAX_DEPTH + 1),
    deep(20000),
    '{"a":' * 1000 + "1" + "}" * 1000,
    "1" + "0" * 400,
    "-" + "9" * 4000,
    "1e400",
    "-0.0",
    "1e-300",
    '"' + "9" * 5000 + '"',
    '"' + "x" * 100_000 + '"',
    '"\u00b2"',
    '"\\ud800"',
    "null",
    "true",
    "[]",
    "{}",
    "0",
    "-1",
    "3.5",
]
RAW = "\x00RAW{}\x00"


@dataclass(frozen=True)
class Raw:
    """A raw JSON text spliced into an otherwise generated body."""

    text: str


def render(value: Any, request_id: Any) -> bytes:
    """``value`` as JSON: ``Raw`` leaves spliced in verbatim, ``ID`` as the request's id."""
    raws: list[str] = []

    def prepare(v: Any) -> Any:
        if isinstance(v, Raw):
            raws.append(v.text)
            return RAW.format(len(raws) - 1)
        if v is ID:
            return request_id
        if v is FLOAT_ID:
            return float(request_id) if isinstance(request_id, int) else 1.0
        if isinstance(v, dict):
            return {k: prepare(x) for k, x in v.items()}
        if isinstance(v, list):
            return [prepare(x) for x in v]
        return v

    text = json.dumps(prepare(value))
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(RAW.format(i)), raw)
    return text.encode("utf-8", "surrogatepass")


ID, FLOAT_ID = object(), object()


def weighted(*branches: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``branches``, each drawn ``weight`` times as often (``one_of`` drops repeats)."""
    return st.sampled_from([s for weight, s in branches for _ in range(weight)]).flatmap(
        lambda strategy: strategy
    )


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    leaves,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=8,
)
hostile = st.sampled_from(HOSTILE).map(Raw)
anything = weighted((3, json_values), (1, hostile))
texts = st.one_of(st.text(max_size=20), st.sampled_from(["", " ", "Document not found."]))
maybe_text = weighted((3, texts), (1, anything))

ARTIFACT_NAMES = [
    "catholic_qa_response",
    "search_results",
    "document",
    "mass_readings",
    "martyrology",
]
NOT_FOUND = ["Document not found.", "No mass readings found.", "No martyrology data found."]

hits = st.one_of(
    st.fixed_dictionaries(
        {"id": st.one_of(st.text(max_size=8), st.integers(), st.floats(), anything)},
        optional={"url": maybe_text, "title": maybe_text, "extra": anything},
    ),
    anything,
)
citations = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "cited_text": maybe_text,
            "document_title": maybe_text,
            "document_index": anything,
            "document_year": anything,
            "source_url": maybe_text,
            "other": anything,
        },
    ),
    anything,
)
data_values = st.one_of(
    st.fixed_dictionaries({"results": st.one_of(st.lists(hits, max_size=3), anything)}),
    st.fixed_dictionaries({"citations": st.one_of(st.lists(citations, max_size=3), anything)}),
    st.fixed_dictionaries(
        {"related_questions": st.one_of(st.lists(maybe_text, max_size=3), anything)}
    ),
    st.fixed_dictionaries(
        {"id": anything}, optional={"title": maybe_text, "author": maybe_text, "ref": maybe_text}
    ),
    st.dictionaries(st.text(max_size=6), anything, max_size=3),
)
parts = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("text"), "text": st.one_of(texts, st.sampled_from(NOT_FOUND))}
    ),
    st.fixed_dictionaries({"kind": st.just("data"), "data": data_values}),
    st.fixed_dictionaries(
        {"kind": st.just("file"), "file": st.fixed_dictionaries({}, optional={"uri": texts})}
    ),
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["text", "data", "odd"])},
        optional={"text": anything, "data": anything, "metadata": anything},
    ),
)
artifacts = st.fixed_dictionaries(
    {
        "artifactId": st.text(max_size=6),
        "name": st.one_of(st.sampled_from(ARTIFACT_NAMES), st.text(max_size=6)),
        "parts": st.lists(parts, min_size=0, max_size=3),
    },
    optional={"metadata": anything},
)
messages = st.fixed_dictionaries(
    {
        "kind": st.just("message"),
        "role": st.just("agent"),
        "messageId": st.text(max_size=4),
        "parts": st.lists(parts, max_size=2),
    }
)
tasks = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["task", "task", "task", "message"]),
        "id": st.one_of(st.text(min_size=1, max_size=8), anything),
        "contextId": st.text(max_size=8),
        "status": st.fixed_dictionaries(
            {
                "state": st.sampled_from(
                    ["completed", "completed", "failed", "working", "canceled", "odd"]
                )
            },
            optional={"message": messages, "timestamp": maybe_text},
        ),
    },
    optional={
        "artifacts": st.lists(artifacts, max_size=2),
        "history": st.lists(messages, max_size=1),
        "metadata": anything,
        "unknownField": anything,
    },
)


def good_task(name: str, parts_: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[Any]:
    """A task shaped like the skill's answer, its parts drawn from ``parts_``."""
    good_message = st.fixed_dictionaries(
        {
            "kind": st.just("message"),
            "role": st.just("agent"),
            "messageId": st.text(max_size=4),
            "parts": st.lists(text_part(), max_size=1),
        }
    )
    return st.fixed_dictionaries(
        {
            "kind": st.just("task"),
            "id": st.text(min_size=1, max_size=8),
            "contextId": st.text(max_size=8),
            "status": st.fixed_dictionaries(
                {"state": st.sampled_from(["completed"] * 6 + ["failed", "working"])},
                optional={"message": good_message},
            ),
            "artifacts": st.tuples(
                st.fixed_dictionaries(
                    {"artifactId": st.just("a-1"), "name": st.just(name), "parts": parts_}
                ),
                weighted((3, st.just([])), (1, st.lists(artifacts, max_size=1))),
            ).map(lambda pair: [pair[0], *pair[1]]),
        },
        optional={
            "history": st.lists(good_message, max_size=1),
            "metadata": st.dictionaries(st.text(max_size=4), anything, max_size=2),
        },
    )


def text_part(value: st.SearchStrategy[Any] = texts) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"kind": st.just("text"), "text": value})


def data_part(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({"kind": st.just("data"), "data": value})


good_hits = st.fixed_dictionaries(
    {
        "id": st.one_of(st.text(min_size=1, max_size=6), st.integers(0, 10**6)),
        "url": texts,
        "title": texts,
    }
)
SKILL_TASKS = {
    "ask": good_task(
        "catholic_qa_response",
        st.tuples(
            text_part(),
            data_part(st.fixed_dictionaries({"citations": st.lists(citations, max_size=3)})),
            data_part(
                st.fixed_dictionaries({"related_questions": st.lists(maybe_text, max_size=2)})
            ),
        ).map(list),
    ),
    "search": good_task(
        "search_results",
        st.lists(
            data_part(
                st.fixed_dictionaries(
                    {"results": st.lists(weighted((3, good_hits), (1, hits)), max_size=4)}
                )
            ),
            min_size=1,
            max_size=2,
        ),
    ),
    "fetch": good_task(
        "document",
        st.one_of(
            st.tuples(
                text_part(),
                data_part(
                    st.fixed_dictionaries(
                        {"id": st.one_of(st.text(min_size=1, max_size=6), anything)},
                        optional={"title": maybe_text, "author": maybe_text, "ref": maybe_text},
                    )
                ),
            ).map(list),
            st.just([{"kind": "text", "text": "Document not found."}]),
        ),
    ),
    "mass_readings": good_task(
        "mass_readings",
        st.lists(text_part(st.one_of(texts, st.just("No mass readings found."))), max_size=2),
    ),
    "saints": good_task(
        "martyrology",
        st.lists(text_part(st.one_of(texts, st.just("No martyrology data found."))), max_size=2),
    ),
    "task": tasks,
}


ids = st.sampled_from([ID, ID, ID, ID, FLOAT_ID, None, "1", 0, -1, True, Raw("1" + "0" * 400)])
codes = st.one_of(
    st.sampled_from(
        [-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005]
    ),
    st.integers(-(2**63), 2**63),
    st.sampled_from(["-32603", None, 1.5]),
    hostile,
)
retry_afters = st.one_of(
    st.sampled_from([0, -0.0, 0.5, 2, -1, 1e308, "5", "inf", "nan", "soon", None, True]),
    hostile,
)
errors = st.fixed_dictionaries(
    {"code": codes, "message": maybe_text},
    optional={
        "data": st.one_of(
            st.fixed_dictionaries({"retryAfter": retry_afters}, optional={"other": anything}),
            anything,
        )
    },
)


def envelopes(task: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a right answer holding ``task``; else one with its envelope mutated."""
    right = st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": st.just(ID), "result": task})
    mutated = st.one_of(
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": ids, "result": st.one_of(task, tasks, anything)},
            optional={"error": st.one_of(st.none(), errors), "extra": anything},
        ),
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": ids, "error": weighted((3, errors), (1, anything))},
            optional={"extra": anything},
        ),
        st.fixed_dictionaries(
            {"id": ids, "result": task},
            optional={"jsonrpc": st.sampled_from(["1.0", None, 2.0, ""])},
        ),
        anything,
    )
    return weighted((3, right), (2, mutated))


cards = st.one_of(
    st.fixed_dictionaries(
        {"name": maybe_text},
        optional={
            "skills": st.one_of(
                st.lists(st.fixed_dictionaries({"id": maybe_text}), max_size=2), anything
            ),
            "capabilities": anything,
            "protocolVersion": maybe_text,
            "extra": anything,
        },
    ),
    anything,
)
statuses = weighted(
    (6, st.just(200)),
    (2, st.sampled_from([401, 403, 429, 429, 500, 502, 503, 404, 301, 307, 204, 408])),
    (1, st.integers(100, 599)),
)
header_sets = st.fixed_dictionaries(
    {},
    optional={
        "Retry-After": st.sampled_from(
            ["0", "-0.0", "1" * 400, "inf", "nan", "5", "soon", "1e-300"]
        ),
        "Cache-Control": st.sampled_from(
            ["max-age=" + "9" * 400, "max-age=0", "no-store", "max-age=" + "9" * 5000, "max-age=-1"]
        ),
        "Content-Length": st.sampled_from(["0", "1" * 30, "abc", "-5"]),
    },
)


@dataclass(frozen=True)
class Answer:
    """One scripted answer: ``kind`` is ``answer``, ``hang``, ``drop`` or ``garbage``."""

    kind: str
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: Any = None
    encoding: str | None = None

    def __repr__(self) -> str:
        body = f"{self.body!r:.120}"
        return f"Answer({self.kind}, {self.status}, {self.headers!r:.120}, {body}, {self.encoding})"

    def response(self, request: MockRequest) -> MockResponse:
        body = (
            self.body if isinstance(self.body, bytes) else render(self.body, _request_id(request))
        )
        headers = dict(self.headers)
        if self.encoding == "gzip":
            body = gzip.compress(body)
        if self.encoding is not None:
            headers["Content-Encoding"] = self.encoding
        return MockResponse(status=self.status, headers=headers, content=body)


def _request_id(request: MockRequest) -> Any:
    body = request.json
    return body.get("id") if isinstance(body, dict) else None


def answers(bodies: st.SearchStrategy[Any]) -> st.SearchStrategy[Answer]:
    encodings = st.sampled_from([None] * 8 + ["gzip", "gzip", "br", "deflate"])
    headers = weighted((2, st.just({})), (1, header_sets)).map(lambda h: tuple(h.items()))
    return weighted(
        (8, st.builds(Answer, st.just("answer"), statuses, headers, bodies, encodings)),
        (1, st.builds(Answer, st.just("answer"), statuses, body=st.binary(max_size=40))),
        (1, st.sampled_from([Answer("hang"), Answer("drop")])),
    )


def rpc_scripts(kind: str = "task") -> st.SearchStrategy[list[Answer]]:
    """One to four answers for a call of ``kind`` (a key of ``SKILL_TASKS``)."""
    return st.lists(answers(envelopes(SKILL_TASKS[kind])), min_size=1, max_size=4)


def mostly_right_scripts(kind: str) -> st.SearchStrategy[list[Answer]]:
    """Scripts where most answers are right: for a harvest to get as far as fetching."""
    right = st.builds(
        Answer,
        st.just("answer"),
        st.just(200),
        body=st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": st.just(ID), "result": SKILL_TASKS[kind]}
        ),
    )
    return st.lists(
        weighted((2, right), (1, answers(envelopes(SKILL_TASKS[kind])))), min_size=1, max_size=4
    )


card_scripts = st.lists(answers(cards), min_size=1, max_size=3)


# Running one call --------------------------------------------------------------------


Scripts = dict[str, list[Answer]]
"""Answers by what the request asks for: a skill id, ``"task"`` for tasks/get and
tasks/cancel, ``"card"`` for a GET."""


def _key(request: MockRequest) -> str:
    if request.method == "GET":
        return "card"
    body = request.json
    message = body["params"].get("message") if body["method"] == "message/send" else None
    return (message.get("metadata") or {}).get("skillId", "catholic_qa") if message else "task"


class Scripted:
    """The handler: each kind's answers in a cycle, refusing to go on past the bound."""

    def __init__(self, scripts: Scripts, clock: VirtualClock, bound: int) -> None:
        self.scripts = scripts
        self.clock = clock
        self.bound = bound
        self.count = 0
        self.seen: dict[str, int] = {}

    async def __call__(self, request: MockRequest) -> MockResponse:
        key = _key(request)
        script = self.scripts.get(key) or next(iter(self.scripts.values()))
        answer = script[self.seen.get(key, 0) % len(script)]
        self.seen[key] = self.seen.get(key, 0) + 1
        self.count += 1
        if self.count > self.bound:
            raise Runaway(f"more than {self.bound} requests; answers: {self.scripts!r:.1000}")
        if answer.kind == "hang":
            await self.clock.sleep(float("inf"))
        if answer.kind == "drop":
            raise ConnectionResetError("connection reset by peer")
        return answer.response(request)


Call = Callable[[m.AsyncMagisterium], Awaitable[Any]]


def check(script: list[Answer] | Scripts, call: Call, *, calls: int = 1) -> None:
    """Run ``call`` against ``script``: it must end in time, with a result or an SDK error."""
    scripts = script if isinstance(script, dict) else {"any": script}
    outcome = asyncio.run(_check(scripts, call, calls))
    if currently_in_test_context():  # hypothesis statistics: what the examples ended in
        event(outcome)


async def _check(script: Scripts, call: Call, calls: int) -> str:
    clock = VirtualClock()
    handler = Scripted(script, clock, REQUEST_BOUND * calls)
    client = m.AsyncMagisterium(
        token="fuzz-token-0123456789",
        base_url="https://a2a.example/api/v1/a2a",
        rate_limits=m.RateLimits.unlimited(),
        retry_policy=POLICY,
        timeout=TIMEOUT,
        clock=clock,
        transport=MockTransport(handler),
    )
    async with client:
        task = asyncio.ensure_future(call(client))
        # Harvests touch sqlite in threads, which the virtual clock does not wait for.
        for _ in range(1000):
            await clock.run_until_idle()
            if task.done():
                break
            await asyncio.wait({task}, timeout=0.05)
        assert task.done(), f"the call did not end; script: {script!r:.2000}"
        try:
            outcome = f"returned {type(task.result()).__name__}"
        except m.MagisteriumError as exc:
            str(exc), repr(exc)  # their text can be built
            outcome = f"raised {type(exc).__name__}"
        # Anything else, Runaway included, fails the example as is.
    assert clock.now() <= TIME_BOUND * calls, (clock.now(), script)
    return outcome


# Every public method -----------------------------------------------------------------


@FUZZ
@given(rpc_scripts("ask"))
def test_ask(script: list[Answer]) -> None:
    check(script, lambda c: c.ask("What is grace?"))


@FUZZ
@given(rpc_scripts("search"))
def test_search(script: list[Answer]) -> None:
    check(script, lambda c: c.search("grace"))


@FUZZ
@given(rpc_scripts("fetch"))
def test_fetch(script: list[Answer]) -> None:
    check(script, lambda c: c.fetch("12345"))


@FUZZ
@given(rpc_scripts("mass_readings"))
def test_mass_readings(script: list[Answer]) -> None:
    check(script, lambda c: c.mass_readings("today"))


@FUZZ
@given(rpc_scripts("saints"), st.sampled_from(["today", dt.date(2026, 3, 19)]))
def test_saints(script: list[Answer], when: Any) -> None:
    check(script, lambda c: c.saints(when))


@FUZZ
@given(rpc_scripts())
def test_send_message(script: list[Answer]) -> None:
    check(script, lambda c: c.send_message("hello", skill_id="saint_lookup"))


@FUZZ
@given(rpc_scripts())
def test_get_task(script: list[Answer]) -> None:
    check(script, lambda c: c.get_task("task-1"))


@FUZZ
@given(rpc_scripts())
def test_cancel_task(script: list[Answer]) -> None:
    check(script, lambda c: c.cancel_task("task-1"))


@FUZZ
@given(card_scripts)
def test_agent_card(script: list[Answer]) -> None:
    async def twice(client: m.AsyncMagisterium) -> None:
        try:
            await client.agent_card()
        finally:
            await client.agent_card()

    check(script, twice, calls=3)


async def _batch(batch: Any) -> None:
    async for item in batch:
        assert item.error is None or isinstance(item.error, m.MagisteriumError), item.error
        event(f"item: {type(item.error).__name__ if item.error else 'ok'}")


@settings(FUZZ, max_examples=max(_EXAMPLES // 4, 40))
@given(rpc_scripts("search"))
def test_search_many(script: list[Answer]) -> None:
    check(script, lambda c: _batch(c.search_many(["a", "b", "c"], concurrency=2)), calls=3)


@settings(FUZZ, max_examples=max(_EXAMPLES // 4, 40))
@given(rpc_scripts("fetch"))
def test_fetch_many(script: list[Answer]) -> None:
    check(script, lambda c: _batch(c.fetch_many(["1", "2", "3"], concurrency=2)), calls=3)


async def _harvest(client: m.AsyncMagisterium) -> None:
    harvest = client.harvest(["a", "b"], concurrency=2)
    async for document in harvest:
        assert isinstance(document, m.Document)
        event("harvested a document")
    assert all(isinstance(f.error, m.MagisteriumError) for f in harvest.failures)


@settings(FUZZ, max_examples=max(_EXAMPLES // 4, 40))
@given(mostly_right_scripts("search"), mostly_right_scripts("fetch"))
def test_harvest(searches: list[Answer], fetches: list[Answer]) -> None:
    # Two searches and at most a few fetches (the script's hits are few).
    check({"document_search": searches, "document_fetch": fetches}, _harvest, calls=12)


@pytest.mark.parametrize(
    "answer",
    [
        Answer(
            "answer",
            429,
            body={
                "jsonrpc": "2.0",
                "id": ID,
                "error": {"code": -32003, "message": "x", "data": {"retryAfter": value}},
            },
        )
        for value in (0, -0.0, 1e-300, Raw("1" + "0" * 400))
    ],
    ids=["0", "-0.0", "1e-300", "400 digits"],
)
def test_no_retry_after_makes_a_call_ask_without_bound(answer: Answer) -> None:
    check([answer], lambda c: c.search("grace"))


# Raw HTTP over a socket ----------------------------------------------------------------

RAW_TOKEN = "raw-fuzz-token-0123456789"
RAW_POLICY = m.RetryPolicy(
    max_retries=0,
    max_retry_after=0.2,
    fallback_retry_after=0.1,
    rate_limit_budget=0.3,
    total_timeout=10.0,
)

status_lines = weighted(
    (
        4,
        st.sampled_from(
            [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 429 Too Many\r\n", b"HTTP/1.0 502 Bad\r\n"]
        ),
    ),
    (
        1,
        st.builds(
            lambda code, reason: b"HTTP/1.1 %d %s\r\n" % (code, reason),
            st.one_of(st.integers(100, 599), st.integers(0, 99999)),
            st.binary(max_size=12).filter(lambda b: b"\r" not in b and b"\n" not in b),
        ),
    ),
    (
        1,
        st.sampled_from(
            [b"HTTP/1.1 200\r\n", b"HTTP/2 200 OK\r\n", b"ICY 200 OK\r\n", b"\r\n", b""]
        ),
    ),
    (1, st.binary(max_size=30).map(lambda b: b + b"\r\n")),
)
raw_headers = st.lists(
    st.one_of(
        st.sampled_from(
            [
                b"Content-Length: 5",
                b"Content-Length: -1",
                b"Content-Length: 99999999999999999999999",
                b"Transfer-Encoding: chunked",
                b"Content-Encoding: gzip",
                b"Content-Encoding: br",
                b"Content-Type: application/json",
                b"Retry-After: 0.01",
                b"X-Long: " + b"a" * 9000,
                b"Bad Header",
            ]
        ),
        st.binary(max_size=20).filter(lambda b: b"\r" not in b and b"\n" not in b),
    ),
    max_size=4,
)
raw_bodies = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [
            b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c",'
            b'"status":{"state":"completed"}}}',
            b"zz\r\n",
            b"5\r\nabc",
            b"\x1f\x8b\x08\x00garbage",
        ]
    ),
)


@settings(FUZZ, max_examples=max(_EXAMPLES // 2, 80))
@given(status_lines, raw_headers, raw_bodies)
def test_raw_http_answers_over_a_socket(status: bytes, headers: list[bytes], body: bytes) -> None:
    answer = status + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body
    event(asyncio.run(_raw_exchange(answer)))


async def _raw_exchange(answer: bytes) -> str:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with m.AsyncMagisterium(
            token=RAW_TOKEN,
            base_url=f"http://127.0.0.1:{port}/api/v1/a2a",
            # Real time here: 429s wait a tenth of a second or so, a few times at most.
            retry_policy=RAW_POLICY,
            timeout=5.0,
        ) as client:
            try:
                await client.get_task("t")
            except m.MagisteriumError as exc:
                seen: list[BaseException] = []
                link: BaseException | None = exc
                while link is not None and link not in seen:
                    seen.append(link)
                    assert RAW_TOKEN not in repr(link) and RAW_TOKEN not in str(link)
                    link = link.__cause__ or link.__context__
                assert RAW_TOKEN not in "".join(traceback.format_exception(exc))
                return f"raised {type(exc).__name__}"
            return "returned"
    finally:
        server.close()
        await server.wait_closed()
