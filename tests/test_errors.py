"""The error tree: its docstring and the package's exports agree; errors
without an answer name none.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import magisterium_async as m
from magisterium_async._errors import error_for_status, masked_url
from magisterium_async.testing import MockRequest, MockResponse, MockTransport


def test_timeout_is_a_connection_error() -> None:
    assert issubclass(m.APITimeoutError, m.APIConnectionError)


# The tree and the package's exports agree ---------------------------------------


def _tree_names() -> set[str]:
    from magisterium_async import _errors

    doc = _errors.__doc__ or ""
    return set(re.findall(r"[├└]── (\w+)", doc)) | {"MagisteriumError"}


def test_the_docstring_tree_and_exports_agree() -> None:
    from magisterium_async import _errors

    classes = {
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, m.MagisteriumError)
    }
    assert _tree_names() == classes
    assert classes <= set(m.__all__)
    assert all(getattr(m, name) is getattr(_errors, name) for name in classes)


def test_the_docstring_tree_draws_each_class_under_its_parent() -> None:
    from magisterium_async import _errors

    doc = _errors.__doc__ or ""
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        drawn = re.search(r"[├└]── (\w+)", line)
        if drawn is None:
            if line.strip().startswith("MagisteriumError"):
                stack = [(0, "MagisteriumError")]
            continue
        depth = drawn.start()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert stack, line
        cls = getattr(_errors, drawn.group(1))
        assert cls.__bases__[0] is getattr(_errors, stack[-1][1]), line
        stack.append((depth, drawn.group(1)))


def test_errors_without_an_answer_name_none() -> None:
    error = m.APIConnectionError("refused")
    assert (error.status_code, error.request_id, dict(error.headers)) == (None, None, {})
    assert str(error) == "refused"


# Which error an answer is: JSON-RPC codes and HTTP statuses to classes, and the answer
# --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (-32700, 200, m.ParseError),
        (-32600, 200, m.InvalidRequestError),
        (-32601, 200, m.MethodNotFoundError),
        (-32602, 200, m.InvalidParamsError),
        (-32603, 200, m.InternalServerError),
        (-32001, 200, m.TaskNotFoundError),
        (-32002, 200, m.SkillNotFoundError),
        (-32003, 429, m.RateLimitError),
        (-32004, 401, m.AuthenticationError),
        (-32005, 403, m.PlanRequiredError),
    ],
)
def test_each_code_has_its_class(code: int, status: int, cls: type[m.JSONRPCError]) -> None:
    error = error_for_status(status, "msg", code=code, data={"k": 1})
    assert type(error) is cls
    assert (error.code, error.message, error.data) == (code, "msg", {"k": 1})
    assert isinstance(error, m.MagisteriumError)


@pytest.mark.parametrize(
    ("status", "cls"),
    [(429, m.RateLimitError), (401, m.AuthenticationError), (403, m.PlanRequiredError)],
)
def test_status_decides_when_the_code_is_unknown(status: int, cls: type) -> None:
    assert type(error_for_status(status, "x", code=-1, data=None)) is cls


@pytest.mark.parametrize("code", [-32003, -32004, -32005])
def test_generic_a2a_meanings_of_service_codes_are_plain_errors(code: int) -> None:
    # Generic A2A: push notifications / operation / content type not supported, HTTP 200.
    error = error_for_status(200, "This operation is not supported", code=code, data=None)
    assert type(error) is m.JSONRPCError
    assert error.code == code


def test_unknown_code_keeps_what_was_said() -> None:
    error = error_for_status(200, "odd", code=-31999, data=[1])
    assert type(error) is m.JSONRPCError
    assert (error.code, error.message, error.data) == (-31999, "odd", [1])


def test_skill_not_found_on_cancel_means_not_cancelable() -> None:
    error = error_for_status(
        200, "Task cannot be canceled", code=-32002, data=None, method="tasks/cancel"
    )
    assert isinstance(error, m.TaskNotCancelableError)
    assert not isinstance(error, m.SkillNotFoundError)  # `except SkillNotFoundError` misses it
    assert error.code == -32002


def test_skill_not_found_names_the_skill() -> None:
    error = error_for_status(404, "Skill not found", code=-32002, data={"skillId": "pope_lookupp"})
    assert isinstance(error, m.SkillNotFoundError) and error.skill_id == "pope_lookupp"
    assert str(error) == "Skill not found: 'pope_lookupp' (JSON-RPC error -32002) [HTTP 404]"
    bare = error_for_status(404, "Skill not found", code=-32002, data=None)
    assert isinstance(bare, m.SkillNotFoundError) and bare.skill_id is None
    assert str(bare) == "Skill not found (JSON-RPC error -32002) [HTTP 404]"


def test_skill_not_found_names_the_skill_asked_for_where_the_service_does_not() -> None:
    asked = error_for_status(200, "Skill not found", code=-32002, data=None, skill_id="x")
    assert isinstance(asked, m.SkillNotFoundError) and asked.skill_id == "x"
    said = error_for_status(200, "no", code=-32002, data={"skillId": "y"}, skill_id="x")
    assert isinstance(said, m.SkillNotFoundError) and said.skill_id == "y"


# Errors from an HTTP answer say which answer ---------------------------------------------

TOKEN = "secret-token-do-not-show"
ANSWER_HEADERS = {
    "X-Request-Id": "req-abc123",
    "Set-Cookie": "session=s3cr3t",
    "Authorization": "Bearer leaked",
    "X-RateLimit-Remaining": "0",
}


async def _error_from(answer: Callable[[MockRequest], MockResponse]) -> m.MagisteriumError:
    transport = MockTransport(answer)
    client = m.AsyncMagisterium(
        token=TOKEN,
        base_url="http://127.0.0.1:9/a2a",
        transport=transport,
        rate_limits=m.RateLimits.unlimited(),
        retry_policy=m.RetryPolicy(max_retries=0, rate_limit_budget=0.001),
    )
    async with client:
        with pytest.raises(m.MagisteriumError) as info:
            await client.search("grace")
    sent = transport.requests[-1].json["id"]
    assert info.value.jsonrpc_id == sent
    return info.value


@pytest.mark.parametrize(
    ("answer", "cls", "status"),
    [
        (lambda r: MockResponse(401, ANSWER_HEADERS, "no"), m.AuthenticationError, 401),
        (
            lambda r: MockResponse.error(
                r,
                -32003,
                "Rate limit exceeded",
                {"retryAfter": 0},
                status=429,
                headers=ANSWER_HEADERS,
            ),
            m.RateLimitError,
            429,
        ),
        (
            lambda r: MockResponse(503, ANSWER_HEADERS, "<html>busy</html>"),
            m.UnexpectedStatusError,
            503,
        ),
        (
            lambda r: MockResponse.error(r, -32603, "boom", headers=ANSWER_HEADERS),
            m.InternalServerError,
            200,
        ),
    ],
    ids=["401", "429", "5xx", "jsonrpc"],
)
async def test_errors_carry_status_request_id_and_redacted_headers(
    answer: Callable[[MockRequest], MockResponse], cls: type[m.MagisteriumError], status: int
) -> None:
    error = await _error_from(answer)
    assert type(error) is cls
    assert error.status_code == status
    assert not hasattr(error, "status")  # one status attribute
    assert error.server_request_id == "req-abc123"
    assert error.request_id == f"{error.jsonrpc_id} / req-abc123"
    assert error.headers["x-ratelimit-remaining"] == "0"  # case-insensitive
    assert error.headers["set-cookie"] == error.headers["authorization"] == "<redacted>"
    text = str(error)
    assert text.endswith(f"[HTTP {status}, request {error.jsonrpc_id} / req-abc123]")
    assert TOKEN not in text and "s3cr3t" not in text and "leaked" not in repr(error.headers)


async def test_request_id_without_a_server_header_is_the_jsonrpc_id() -> None:
    error = await _error_from(lambda r: MockResponse.error(r, -32602, "bad"))
    assert error.server_request_id is None
    assert error.request_id == str(error.jsonrpc_id)
    assert str(error) == f"bad (JSON-RPC error -32602) [HTTP 200, request {error.jsonrpc_id}]"


async def test_a_body_too_large_still_names_the_request() -> None:
    transport = MockTransport(lambda r: MockResponse(200, {}, b"x" * 2048))
    async with m.AsyncMagisterium(
        token=TOKEN,
        base_url="http://127.0.0.1:9/a2a",
        transport=transport,
        max_response_bytes=1024,
    ) as client:
        with pytest.raises(m.ResponseTooLargeError) as info:
            await client.search("grace")
    assert info.value.jsonrpc_id == transport.requests[0].json["id"]
    assert info.value.status_code == 200


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, m.AuthenticationError),
        (403, m.PlanRequiredError),
        (429, m.RateLimitError),
        (404, m.UnexpectedStatusError),
        (502, m.UnexpectedStatusError),
    ],
)
def test_one_function_maps_a_bare_status_to_its_error(status: int, cls: type) -> None:
    headers = {"Retry-After": "3", "Request-Id": "r1"}
    error = error_for_status(status, "GET x", headers=headers, body="<html>")
    assert type(error) is cls
    assert error.status_code == status and error.request_id == "r1"
    if isinstance(error, m.RateLimitError):
        assert error.retry_after == 3.0
    if isinstance(error, m.UnexpectedStatusError):
        assert (str(error), error.body) == (f"GET x [HTTP {status}, request r1]", "<html>")


def test_the_same_function_maps_an_error_object_and_names_the_request() -> None:
    error = error_for_status(
        200, "Task cannot be canceled", code=-32002, method="tasks/cancel", jsonrpc_id=7
    )
    assert type(error) is m.TaskNotCancelableError and error.request_id == "7"
    assert str(error) == "Task cannot be canceled (JSON-RPC error -32002) [HTTP 200, request 7]"
    odd = error_for_status(200, 3, code=True, data={"x": 1})  # a bool is no code
    assert type(odd) is m.JSONRPCError and (odd.message, odd.code) == ("JSON-RPC error", 0)


# Reading a 429's wait: never raises, never negative; the body first, then the header
# --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7.0),
        (2.5, 2.5),
        ("3", 3.0),
        (" 4.5 ", 4.5),
        (0, 0.0),
        (-0.0, 0.0),
        ("-0", 0.0),
        (10**400, math.inf),
        ("9" * 400, math.inf),
        (1e308 * 10, math.inf),
        (-(10**400), None),
        (math.nan, None),
        ("nan", None),
        ("inf", None),
        ("-Infinity", None),
        (-1, None),
        (-1e-9, None),
        (True, None),
        (False, None),
        ("soon", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
        ("", None),
        (None, None),
        ([1], None),
        ({"s": 1}, None),
    ],
)
def test_a_wait_of_any_shape(value: Any, expected: float | None) -> None:
    body = m.RateLimitError("slow", data={"retryAfter": value}).retry_after
    assert body == expected
    if body == 0.0:
        assert math.copysign(1.0, body) == 1.0  # never -0.0
    if isinstance(value, str):
        assert m.RateLimitError("slow", headers={"Retry-After": value}).retry_after == expected


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )
)
def test_a_wait_never_raises_and_is_never_negative(value: Any) -> None:
    seconds = m.RateLimitError("slow", data={"retryAfter": value}).retry_after
    assert seconds is None or (seconds >= 0 and not math.isnan(seconds))


def test_the_body_wait_comes_first_then_the_header() -> None:
    body = error_for_status(
        429, "slow", code=-32003, data={"retryAfter": 2}, headers={"Retry-After": "9"}
    )
    header = error_for_status(
        429, "slow", code=-32003, data={"retryAfter": "soon"}, headers={"Retry-After": "9"}
    )
    assert isinstance(body, m.RateLimitError) and isinstance(header, m.RateLimitError)
    assert (body.retry_after, header.retry_after) == (2.0, 9.0)


async def test_a_bare_429_reads_its_header_and_a_broken_header_object_is_no_wait() -> None:
    answer = MockResponse(429, {"Retry-After": "4"}, "<html>slow down</html>")
    error = await _error_from(lambda r: answer)
    assert isinstance(error, m.RateLimitError) and error.retry_after == 4.0

    class Broken:
        def get(self, name: str) -> str:
            raise RuntimeError("unreadable")

    error = error_for_status(429, "HTTP 429", code=None, data=None, headers=Broken())
    assert isinstance(error, m.RateLimitError) and error.retry_after is None


async def test_a_400_digit_retry_after_in_the_body_is_capped_not_an_overflow() -> None:
    def answer(request: MockRequest) -> MockResponse:
        error = {"code": -32003, "message": "slow", "data": {"retryAfter": 0}}
        body = json.dumps({"jsonrpc": "2.0", "id": request.json["id"], "error": error})
        return MockResponse(429, {}, body.replace('"retryAfter": 0', '"retryAfter": ' + "9" * 400))

    error = await _error_from(answer)
    assert isinstance(error, m.RateLimitError) and error.retry_after == math.inf


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"retryAfter": 7}, 7.0),
        ({"retryAfter": 2.5}, 2.5),
        ({"retryAfter": "3"}, 3.0),
        ({"retryAfter": "soon"}, None),
        ({"retryAfter": -1}, None),
        ({"retryAfter": True}, None),
        ({}, None),
        (None, None),
        ("text", None),
    ],
)
def test_retry_after_from_data_even_when_malformed(data: Any, expected: float | None) -> None:
    error = error_for_status(429, "Rate limit exceeded", code=-32003, data=data)
    assert isinstance(error, m.RateLimitError)
    assert error.retry_after == expected


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:pw@h/1", "rediss://user:***@h/1"),
        ("redis://user@h/1", "redis://user@h/1"),
        ("redis://h/0?password=pw&db=1", "redis://h/0?password=***&db=1"),
        ("redis://h/0?db=1&PASSWORD=pw", "redis://h/0?db=1&PASSWORD=***"),
        (
            "redis+sentinel://h1,h2/svc?sentinel_password=s3&ssl_password=k&db=2",
            "redis+sentinel://h1,h2/svc?sentinel_password=***&ssl_password=***&db=2",
        ),
        ("http://u:p@w@proxy:3128", "http://u:***@proxy:3128"),
        ("https://proxy.example:8443", "https://proxy.example:8443"),
        ("/var/lib/credentials.json", "/var/lib/credentials.json"),
    ],
)
def test_masked_url_hides_every_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown


# The tree in docs/errors.md is the tree in the code --------------------------------------


def _documented_tree() -> dict[str, str]:
    """Each exception the tree in docs/errors.md names → the class it names as parent."""
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "errors.md").read_text(encoding="utf-8")
    block = page[page.index("```\nMagisteriumError") + 4 :]
    block = block[: block.index("```")]
    parents: dict[str, str] = {}
    stack: list[str] = []  # the last class named at each depth
    for line in block.splitlines():
        prefix = re.match(r"[│├└─\s]*", line)
        assert prefix is not None
        depth = len(prefix.group()) // 4
        names = re.findall(r"\b[A-Z]\w*Error\b", line)
        if not names:
            continue
        del stack[depth:]
        for name in names:
            parents[name] = stack[-1] if stack else ""
        stack.append(names[0])
    return parents


def test_every_exported_exception_is_in_the_docs_tree_under_its_parent() -> None:
    exported = {
        name
        for name in m.__all__
        if isinstance(getattr(m, name), type) and issubclass(getattr(m, name), BaseException)
    }
    tree = _documented_tree()
    assert sorted(exported - set(tree)) == [], "add these to the tree in docs/errors.md"
    assert sorted(set(tree) - exported) == [], "the tree in docs/errors.md names these"
    for name, parent in tree.items():
        cls = getattr(m, name)
        expected = cls.__bases__[0].__name__ if name != "MagisteriumError" else ""
        assert parent == expected, f"docs/errors.md puts {name} under {parent or 'nothing'}"
