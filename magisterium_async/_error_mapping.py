"""Which error an answer is: the one home of "JSON-RPC code or HTTP status to error".

:func:`error_from_jsonrpc` maps a JSON-RPC error object (and its HTTP status),
:func:`error_for_status` an HTTP status with nothing more to say; :func:`with_answer` tells
an error the answer it came from (status, redacted headers, request ids). The classes
themselves are the tree in :mod:`._errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from multidict import CIMultiDict, CIMultiDictProxy

from magisterium_async._errors import (
    AuthenticationError,
    InternalServerError,
    InvalidParamsError,
    InvalidRequestError,
    JSONRPCError,
    MagisteriumError,
    MethodNotFoundError,
    ParseError,
    PlanRequiredError,
    RateLimitError,
    SkillNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnexpectedStatusError,
    skill_named,
)

__all__ = ["REQUEST_ID_HEADERS", "error_for_status", "error_from_jsonrpc", "with_answer"]

E = TypeVar("E", bound=MagisteriumError)

REQUEST_ID_HEADERS = ("X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Amzn-RequestId")
"""Where a server names its own id for a request, in the order they are looked for."""

_REDACTED_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "set-cookie2"}
)
_REDACTED = "<redacted>"

_BY_CODE: dict[int, type[JSONRPCError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequestError,
        MethodNotFoundError,
        InvalidParamsError,
        InternalServerError,
        TaskNotFoundError,
        SkillNotFoundError,
        RateLimitError,
        AuthenticationError,
        PlanRequiredError,
    )
}
_BY_STATUS: dict[int, type[JSONRPCError]] = {
    429: RateLimitError,
    401: AuthenticationError,
    403: PlanRequiredError,
}
_STATUS_BOUND: dict[type[JSONRPCError], int] = {cls: status for status, cls in _BY_STATUS.items()}


def error_from_jsonrpc(
    code: Any,
    message: Any,
    data: Any,
    *,
    status: int,
    method: str = "",
    headers: Any = None,
    skill_id: str | None = None,
) -> JSONRPCError:
    """Map one JSON-RPC error object (and its HTTP status) to the exception to raise.

    The code decides; where the code is unknown the HTTP status decides (a 429 with an odd
    code is still a rate limit); otherwise a plain :class:`JSONRPCError` keeps what was said.
    A :class:`RateLimitError` reads its wait from ``data`` and then from ``headers`` (the
    HTTP response's, for ``Retry-After``).

    The service always sends -32003, -32004 and -32005 with HTTP 429, 401 and 403. Generic
    A2A servers use the same codes with HTTP 200 for other things ("push notifications not
    supported", "unsupported operation", "content type not supported"), so with any other
    status those codes are a plain :class:`JSONRPCError`: never a pool-wide pause for an
    answer that is no rate limit. ``skill_id`` (the skill the request named) names the
    skill of a :class:`SkillNotFoundError` whose ``data`` does not.
    """
    text = message if isinstance(message, str) and message else "JSON-RPC error"
    int_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    cls = _BY_CODE.get(int_code) if int_code is not None else None
    if (cls in _STATUS_BOUND and _STATUS_BOUND[cls] != status) or cls is None:
        cls = _BY_STATUS.get(status, JSONRPCError)
    if cls is SkillNotFoundError and method == "tasks/cancel":
        cls = TaskNotCancelableError
    final = int_code if int_code is not None else cls.code
    if cls is RateLimitError:
        return RateLimitError(text, code=final, data=data, status=status, headers=headers)
    if cls is SkillNotFoundError:
        named = skill_named(data)
        return SkillNotFoundError(
            text,
            code=final,
            data=data,
            status=status,
            skill_id=named if named is not None else skill_id,
        )
    return cls(text, code=final, data=data, status=status)


def error_for_status(
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: str = "",
    jsonrpc_id: int | None = None,
) -> MagisteriumError:
    """The one mapping of an HTTP status (with no JSON-RPC error to say more) to its error.

    401 is an :class:`AuthenticationError`, 403 a :class:`PlanRequiredError`, 429 a
    :class:`RateLimitError` (its wait read from ``Retry-After``), and anything else an
    :class:`UnexpectedStatusError` keeping the first characters of ``body``. The answer's
    details are attached by :func:`with_answer`.
    """
    cls = _BY_STATUS.get(status)
    error: MagisteriumError
    if cls is RateLimitError:
        error = RateLimitError(message, status=status, headers=headers)
    elif cls is not None:
        error = cls(message, status=status)
    else:
        error = UnexpectedStatusError(message, status=status, body=body)
    return with_answer(error, status=status, headers=headers, jsonrpc_id=jsonrpc_id)


def with_answer(
    error: E,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    jsonrpc_id: int | None = None,
) -> E:
    """``error``, told the HTTP answer it came from: status, headers (redacted), ids.

    What is not given is left as it was, so the transport can add the JSON-RPC id to an
    error the HTTP layer made. ``str(error)`` then ends with ``[HTTP 429, request 7 / abc]``.
    """
    if status is not None:
        error.status_code = status
    if headers is not None:
        error.headers = _redact(headers)
        error.server_request_id = _server_request_id(error.headers)
    if jsonrpc_id is not None:
        error.jsonrpc_id = jsonrpc_id
    ids = [str(i) for i in (error.jsonrpc_id, error.server_request_id) if i is not None]
    error.request_id = " / ".join(ids) or None
    note = [f"HTTP {error.status_code}"] if error.status_code is not None else []
    if error.request_id is not None:
        note.append(f"request {error.request_id}")
    error._answer_note = f" [{', '.join(note)}]" if note else ""
    return error


def _redact(headers: Mapping[str, str]) -> Mapping[str, str]:
    copy: CIMultiDict[str] = CIMultiDict()
    try:
        items = headers.items()
        for name, value in items:
            copy.add(name, _REDACTED if name.lower() in _REDACTED_HEADERS else value)
    except Exception:  # a headers object that cannot be read is headers not given
        pass
    return CIMultiDictProxy(copy)


def _server_request_id(headers: Mapping[str, str]) -> str | None:
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return None
