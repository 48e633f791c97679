"""The error tree and the mapping of JSON-RPC codes and HTTP statuses to classes."""

from __future__ import annotations

from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._errors import error_from_jsonrpc


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
    error = error_from_jsonrpc(code, "msg", {"k": 1}, status=status)
    assert type(error) is cls
    assert (error.code, error.message, error.data) == (code, "msg", {"k": 1})
    assert isinstance(error, m.MagisteriumError)


@pytest.mark.parametrize(
    ("status", "cls"),
    [(429, m.RateLimitError), (401, m.AuthenticationError), (403, m.PlanRequiredError)],
)
def test_status_decides_when_the_code_is_unknown(status: int, cls: type) -> None:
    assert type(error_from_jsonrpc(-1, "x", None, status=status)) is cls


@pytest.mark.parametrize("code", [-32003, -32004, -32005])
def test_generic_a2a_meanings_of_service_codes_are_plain_errors(code: int) -> None:
    # Generic A2A: push notifications / operation / content type not supported, HTTP 200.
    error = error_from_jsonrpc(code, "This operation is not supported", None, status=200)
    assert type(error) is m.JSONRPCError
    assert error.code == code


def test_unknown_code_keeps_what_was_said() -> None:
    error = error_from_jsonrpc(-31999, "odd", [1], status=200)
    assert type(error) is m.JSONRPCError
    assert (error.code, error.message, error.data) == (-31999, "odd", [1])


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


def test_skill_not_found_on_cancel_means_not_cancelable() -> None:
    error = error_from_jsonrpc(
        -32002, "Task cannot be canceled", None, status=200, method="tasks/cancel"
    )
    assert isinstance(error, m.TaskNotCancelableError)
    assert isinstance(error, m.SkillNotFoundError)


def test_timeout_is_a_connection_error() -> None:
    assert issubclass(m.APITimeoutError, m.APIConnectionError)


def test_skill_not_found_names_the_skill() -> None:
    error = error_from_jsonrpc(-32002, "Skill not found", {"skillId": "pope_lookupp"}, status=404)
    assert isinstance(error, m.SkillNotFoundError) and error.skill_id == "pope_lookupp"
    assert str(error) == "Skill not found: 'pope_lookupp' (JSON-RPC error -32002)"
    bare = error_from_jsonrpc(-32002, "Skill not found", None, status=404)
    assert isinstance(bare, m.SkillNotFoundError) and bare.skill_id is None
    assert str(bare) == "Skill not found (JSON-RPC error -32002)"
