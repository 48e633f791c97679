"""Reading a 429's wait: ``parse_seconds`` never raises, and one place reads body and header.

Decisions: a number (or a string of one) is seconds; ``-0.0`` is 0; a number too large for
a float is ``inf`` (the retry loop caps it at ``max_retry_after``); ``nan``, negatives,
bools, words (``"inf"``, ``"soon"``, an HTTP date) and other types are no wait at all
(the retry loop falls back to ``fallback_retry_after``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import magisterium_async as m
from magisterium_async._error_mapping import error_from_jsonrpc
from magisterium_async._http._jsonrpc import decode_response
from magisterium_async._retry_after import parse_seconds


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
def test_parse_seconds(value: Any, expected: float | None) -> None:
    seconds = parse_seconds(value)
    assert seconds == expected
    if seconds == 0.0:
        assert math.copysign(1.0, seconds) == 1.0  # never -0.0


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
def test_parse_seconds_never_raises_and_gives_no_negative_wait(value: Any) -> None:
    seconds = parse_seconds(value)
    assert seconds is None or (seconds >= 0 and not math.isnan(seconds))


def test_the_body_wait_comes_first_then_the_header() -> None:
    body = error_from_jsonrpc(
        -32003, "slow", {"retryAfter": 2}, status=429, headers={"Retry-After": "9"}
    )
    header = error_from_jsonrpc(
        -32003, "slow", {"retryAfter": "soon"}, status=429, headers={"Retry-After": "9"}
    )
    assert isinstance(body, m.RateLimitError) and isinstance(header, m.RateLimitError)
    assert (body.retry_after, header.retry_after) == (2.0, 9.0)


def test_a_bare_429_reads_its_header_and_a_broken_header_object_is_no_wait() -> None:
    with pytest.raises(m.RateLimitError) as info:
        decode_response("message/send", 1, 429, b"<html>slow down</html>", {"Retry-After": "4"})
    assert info.value.retry_after == 4.0

    class Broken:
        def get(self, name: str) -> str:
            raise RuntimeError("unreadable")

    error = error_from_jsonrpc(None, "HTTP 429", None, status=429, headers=Broken())
    assert isinstance(error, m.RateLimitError) and error.retry_after is None


def test_a_400_digit_retry_after_in_the_body_is_capped_not_an_overflow() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"slow","data":{"retryAfter":'
    body += b"9" * 400 + b"}}}"
    with pytest.raises(m.RateLimitError) as info:
        decode_response("message/send", 1, 429, body)
    assert info.value.retry_after == math.inf


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
    error = error_from_jsonrpc(-32003, "Rate limit exceeded", data, status=429)
    assert isinstance(error, m.RateLimitError)
    assert error.retry_after == expected
