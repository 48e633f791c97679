"""Everything magisterium_async raises on purpose.

The tree, in one glance::

    MagisteriumError                  root; catch this to catch everything below
    ├── ClientClosedError             the client was closed while the call waited; nothing sent
    ├── APIConnectionError            the request never got an answer (DNS, refused, reset)
    │   ├── APITimeoutError           ... because it took longer than the timeout
    │   └── TLSError                  ... because the TLS handshake or certificate failed
    ├── APIResponseError              an answer arrived that is not the contract's
    │   ├── MalformedResponseError    not JSON, not strict JSON-RPC 2.0, wrong shape, too deep
    │   ├── ResponseTooLargeError     the body (decompressed) passed ``max_response_bytes``
    │   └── UnexpectedStatusError     an HTTP status the contract does not use (a proxy's 502)
    ├── JSONRPCError                  the service answered with a JSON-RPC ``error`` object
    │   ├── ParseError                -32700
    │   ├── InvalidRequestError       -32600
    │   ├── MethodNotFoundError       -32601
    │   ├── InvalidParamsError        -32602
    │   ├── InternalServerError       -32603
    │   ├── TaskNotFoundError         -32001
    │   ├── SkillNotFoundError        -32002 (``.skill_id``)
    │   │   └── TaskNotCancelableError  -32002 answered to ``tasks/cancel`` (generic A2A)
    │   ├── RateLimitError            -32003 / HTTP 429  (``.retry_after``)
    │   ├── AuthenticationError       -32004 / HTTP 401
    │   │   └── LoginRequiredError    the stored sign-in cannot be refreshed: log in again
    │   └── PlanRequiredError         -32005 / HTTP 403
    ├── TaskFailedError               the task ran and ended ``failed`` (``.task``, ``.reason``)
    ├── StateError                    a harvest's state database cannot be read or written
    ├── OutputFileError               a harvest's output is not the file it wrote (left as is)
    ├── SharedQuotaError              the Redis-shared quota cannot be used (no redis-py, bad URL)
    ├── SharedStateError              a multi-worker harvest's Redis state is unreachable or lost
    ├── CredentialsError              the credentials file, or Redis store, is unsafe or unreadable
    └── OAuthError                    the authorization server refused or answered off-spec

``ValueError`` and ``TypeError`` are raised, before anything is sent, for arguments that
cannot be right.

Every error made from an HTTP answer says which one: ``.status_code`` (the HTTP status),
``.request_id`` (the JSON-RPC id we sent, then `` / `` and the server's request-id header
when it sent one; also apart as ``.jsonrpc_id`` and ``.server_request_id``) and
``.headers`` (the answer's headers, case-insensitive, with authorization and cookies
redacted); ``str()`` ends with them in brackets. Errors that had no answer leave them
``None`` (``.headers`` empty).

This module owns the tree. Which error an answer is (a JSON-RPC code, an HTTP status) is
decided in :mod:`._error_mapping`; a 429's wait is read by :mod:`._retry_after`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from magisterium_async._retry_after import retry_after_from

if TYPE_CHECKING:
    from magisterium_async._models import Task

_NO_HEADERS: Mapping[str, str] = CIMultiDictProxy(CIMultiDict())

__all__ = [
    "APIConnectionError",
    "APIResponseError",
    "APITimeoutError",
    "AuthenticationError",
    "ClientClosedError",
    "CredentialsError",
    "InternalServerError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONRPCError",
    "LoginRequiredError",
    "MagisteriumError",
    "MalformedResponseError",
    "MethodNotFoundError",
    "OAuthError",
    "OutputFileError",
    "ParseError",
    "PlanRequiredError",
    "RateLimitError",
    "ResponseTooLargeError",
    "SharedQuotaError",
    "SharedStateError",
    "SkillNotFoundError",
    "StateError",
    "TLSError",
    "TaskFailedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnexpectedStatusError",
]


class MagisteriumError(Exception):
    """Root of every error the library raises on purpose.

    An error made from an HTTP answer names it (see
    :func:`._error_mapping.with_answer`); the others leave these ``None`` and ``headers``
    empty.
    """

    status_code: int | None = None
    """The HTTP status of the answer, or ``None`` when there was none."""
    request_id: str | None = None
    """The JSON-RPC id we sent, then ``" / "`` and :attr:`server_request_id` when the
    server sent one (just the latter for a GET): what a support ticket or a log query
    needs."""
    jsonrpc_id: int | None = None
    """The JSON-RPC ``id`` of the request that got this answer."""
    server_request_id: str | None = None
    """The server's own id for the request (``X-Request-Id`` and the like), if it sent one."""
    headers: Mapping[str, str] = _NO_HEADERS
    """The answer's headers (case-insensitive), authorization and cookies redacted."""
    _answer_note = ""

    @property
    def status(self) -> int | None:
        """The HTTP status; the older name of :attr:`status_code`."""
        return self.status_code

    @status.setter
    def status(self, value: int | None) -> None:
        self.status_code = value

    def __str__(self) -> str:
        return super().__str__() + self._answer_note


class ClientClosedError(MagisteriumError):
    """The client was closed while this call waited for its turn; nothing was sent."""


class APIConnectionError(MagisteriumError):
    """The request got no answer: the connection failed, was refused or was dropped.

    ``reached_server`` is ``False`` when nothing was sent (the connection was refused, the
    host did not resolve): such a try spends none of the quota."""

    reached_server = True


class APITimeoutError(APIConnectionError):
    """The request took longer than its timeout."""


class TLSError(APIConnectionError):
    """The TLS handshake failed or the server's certificate was refused: not retried, as
    it will not go away by itself (check the URL, the proxy, or the system's CA store)."""


class APIResponseError(MagisteriumError):
    """The service (or something in front of it) answered outside the contract.

    ``status`` is the HTTP status and ``body`` the first 500 characters of the body, so the
    answer is never lost.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class MalformedResponseError(APIResponseError):
    """The body is not JSON, not a JSON-RPC response, or not shaped as the contract says."""


class ResponseTooLargeError(APIResponseError):
    """The body, once decompressed, is larger than the client's ``max_response_bytes``
    (``.limit``); reading stopped there, so memory stays bounded. Not retried."""

    def __init__(
        self, message: str, *, limit: int, status: int | None = None, body: str = ""
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.limit = limit


class UnexpectedStatusError(APIResponseError):
    """An HTTP status the contract does not use, such as an HTML 502 from a proxy."""


class JSONRPCError(MagisteriumError):
    """The service answered with a JSON-RPC error object: ``code``, ``message``, ``data``."""

    code: int = 0

    def __init__(
        self, message: str, *, code: int | None = None, data: Any = None, status: int = 200
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        self.status = status

    def __str__(self) -> str:
        return f"{self.message} (JSON-RPC error {self.code}){self._answer_note}"


class ParseError(JSONRPCError):
    """-32700: the service could not parse the request body as JSON."""

    code = -32700


class InvalidRequestError(JSONRPCError):
    """-32600: the request is not a valid JSON-RPC request."""

    code = -32600


class MethodNotFoundError(JSONRPCError):
    """-32601: the service does not know the method."""

    code = -32601


class InvalidParamsError(JSONRPCError):
    """-32602: missing or invalid params; also cancelling a task that is already terminal."""

    code = -32602


class InternalServerError(JSONRPCError):
    """-32603: an unexpected fault in the service; retried like a 5xx."""

    code = -32603


class TaskNotFoundError(JSONRPCError):
    """-32001: the task id is unknown or expired (tasks are kept for 24 hours).

    Generic A2A servers (not the Magisterium service) also use -32001 this way.
    """

    code = -32001


class SkillNotFoundError(JSONRPCError):
    """-32002: the service does not know the ``skillId``; ``skill_id`` names it.

    Generic A2A servers use -32002 for "task not cancelable" instead; when the error came
    from ``tasks/cancel`` it is raised as :class:`TaskNotCancelableError`, a subclass.
    """

    code = -32002

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        status: int = 200,
        skill_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, data=data, status=status)
        self.skill_id = skill_id if skill_id is not None else skill_named(data)
        """The skill id the request named (``None`` when unknown, as for ``tasks/cancel``)."""

    def __str__(self) -> str:
        if self.skill_id is None:
            return super().__str__()
        return f"{self.message}: {self.skill_id!r} (JSON-RPC error {self.code}){self._answer_note}"


def skill_named(data: Any) -> str | None:
    """The ``skillId`` an error's ``data`` names, if any."""
    if isinstance(data, dict) and isinstance(data.get("skillId"), str):
        return str(data["skillId"])
    return None


class TaskNotCancelableError(SkillNotFoundError):
    """-32002 answered to ``tasks/cancel``: generic A2A's "task not cancelable".

    The Magisterium service itself answers -32602 for this case; other A2A servers answer
    -32002, which the service's contract reserves for an unknown skill.
    """


class RateLimitError(JSONRPCError):
    """-32003 / HTTP 429: a quota ran out. ``retry_after`` is the wait the service gave, in
    seconds (``error.data.retryAfter``, else the ``Retry-After`` header): ``None`` when it
    gave none or nothing usable, ``inf`` when it gave a number too large to mean anything
    (the retry loop caps every wait at ``RetryPolicy.max_retry_after``)."""

    code = -32003

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        status: int = 429,
        retry_after: float | None = None,
        headers: Any = None,
    ) -> None:
        super().__init__(message, code=code, data=data, status=status)
        self.retry_after = (
            retry_after if retry_after is not None else retry_after_from(data, headers)
        )


class AuthenticationError(JSONRPCError):
    """-32004 / HTTP 401: the bearer token is missing or invalid."""

    code = -32004


class LoginRequiredError(AuthenticationError):
    """The stored sign-in cannot be renewed (the refresh token was revoked or expired, or
    there is none): run ``magisterium-async login`` again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=401)

    def __str__(self) -> str:
        return self.message


class PlanRequiredError(JSONRPCError):
    """-32005 / HTTP 403: A2A needs a Pro, Organization or Enterprise plan."""

    code = -32005


class TaskFailedError(MagisteriumError):
    """The task ran and ended in state ``failed``; ``reason`` is the service's explanation."""

    def __init__(self, task: Task, reason: str) -> None:
        super().__init__(f"task {task.id} failed: {reason}")
        self.task = task
        self.reason = reason


class StateError(MagisteriumError):
    """A harvest's state database cannot be opened, read or written (``.path``)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class OutputFileError(MagisteriumError):
    """An output file (``.path``) a harvest will not write to: it is not the file the
    harvest wrote, or not as it left it. The file is left as it was."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class SharedQuotaError(MagisteriumError):
    """The shared quota cannot be used: redis-py is missing, or the URL is invalid."""


class SharedStateError(MagisteriumError):
    """The harvest's shared state in Redis is unreachable or was lost: the harvest stops;
    every worker's own state is intact, so ``--resume`` continues it."""


class CredentialsError(MagisteriumError):
    """The credentials store (``.path``: the file, or the Redis URL with its password
    masked) cannot be used: group or others can read the file, it cannot be read or
    written, it is not a credentials file, or Redis does not answer. Nothing was sent."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class OAuthError(MagisteriumError):
    """The authorization server refused a sign-in step, or answered outside the OAuth specs.

    ``error`` is the OAuth error code it sent (``"invalid_grant"``, ...), or ``None``;
    ``status`` the HTTP status, when there was an answer.
    """

    def __init__(self, message: str, *, error: str | None = None, status: int | None = None):
        super().__init__(message)
        self.error = error
        self.status = status
