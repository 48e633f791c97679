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
    │   ├── TaskNotCancelableError    -32002 answered to ``tasks/cancel`` (generic A2A)
    │   ├── RateLimitError            -32003 / HTTP 429  (``.retry_after``)
    │   ├── AuthenticationError       -32004 / HTTP 401
    │   │   └── LoginRequiredError    the stored sign-in cannot be refreshed: log in again
    │   ├── PlanRequiredError         -32005 / HTTP 403
    │   └── VersionNotSupportedError  -32009: the server does not speak the A2A version sent
    ├── NotSupportedError             the server does not offer the call (ListTasks before 1.0)
    ├── TaskFailedError               the task ran and ended ``failed`` (``.task``, ``.reason``)
    ├── StateError                    a harvest's state database cannot be read or written
    ├── OutputFileError               a harvest's output is not the file it wrote (left as is)
    ├── SharedQuotaError              the shared quota cannot be used (no redis-py, bad URL, TLS)
    ├── CacheError                    the cache cannot be used (not its file, no redis-py, TLS)
    ├── CredentialsError              the credentials file, or Redis store, is unsafe or unreadable
    └── OAuthError                    the authorization server refused or answered off-spec

``ValueError`` and ``TypeError`` are raised, before anything is sent, for arguments that
cannot be right.

An A2A 1.0 server's error ``data`` is a list of typed details; the ``reason`` of its
``google.rpc.ErrorInfo`` (``.reason``) decides the class before the code does, and its
``metadata`` is read as 0.3's ``data`` is (``retryAfter``, ``skillId``).

Every error made from an HTTP answer says which one: ``.status_code`` (the HTTP status),
``.request_id`` (the JSON-RPC id we sent, then `` / `` and the server's request-id header
when it sent one; also apart as ``.jsonrpc_id`` and ``.server_request_id``) and
``.headers`` (the answer's headers, case-insensitive, with authorization and cookies
redacted); ``str()`` ends with them in brackets. Errors that had no answer leave them
``None`` (``.headers`` empty).

Below the tree: :func:`error_from_jsonrpc` and :func:`error_for_status`, which decide
which error an answer is (a JSON-RPC code, an HTTP status); :func:`with_answer`, which
tells an error the answer it came from; and :func:`retry_after_from`, which reads a 429's
wait (``retryAfter`` in the error's ``data`` first, then the ``Retry-After`` header).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from multidict import CIMultiDict, CIMultiDictProxy

if TYPE_CHECKING:
    from magisterium_async._models import Task

_NO_HEADERS: Mapping[str, str] = CIMultiDictProxy(CIMultiDict())

__all__ = [
    "REQUEST_ID_HEADERS",
    "APIConnectionError",
    "APIResponseError",
    "APITimeoutError",
    "AuthenticationError",
    "CacheError",
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
    "NotSupportedError",
    "OAuthError",
    "OutputFileError",
    "ParseError",
    "PlanRequiredError",
    "RateLimitError",
    "ResponseTooLargeError",
    "SharedQuotaError",
    "SkillNotFoundError",
    "StateError",
    "TLSError",
    "TaskFailedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnexpectedStatusError",
    "VersionNotSupportedError",
    "error_details",
    "error_for_status",
    "error_from_jsonrpc",
    "is_transient",
    "masked_url",
    "parse_seconds",
    "retry_after_from",
    "with_answer",
]


class MagisteriumError(Exception):
    """Root of every error the library raises on purpose.

    An error made from an HTTP answer names it (see
    :func:`with_answer`); the others leave these ``None`` and ``headers``
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

    ``status_code`` is the HTTP status and ``body`` the first 500 characters of the body,
    so the answer is never lost.
    """

    def __init__(self, message: str, *, status_code: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class MalformedResponseError(APIResponseError):
    """The body is not JSON, not a JSON-RPC response, or not shaped as the contract says."""


class ResponseTooLargeError(APIResponseError):
    """The body, once decompressed, is larger than the client's ``max_response_bytes``
    (``.limit``); reading stopped there, so memory stays bounded. Not retried."""

    def __init__(
        self, message: str, *, limit: int, status_code: int | None = None, body: str = ""
    ) -> None:
        super().__init__(message, status_code=status_code, body=body)
        self.limit = limit


class UnexpectedStatusError(APIResponseError):
    """An HTTP status the contract does not use, such as an HTML 502 from a proxy."""


class JSONRPCError(MagisteriumError):
    """The service answered with a JSON-RPC error object: ``code``, ``message``, ``data``
    (as sent: an object in A2A 0.3, a list of typed details in 1.0), and ``reason``: the
    ``ErrorInfo`` reason of a 1.0 error (``"TASK_NOT_FOUND"``), else ``None``."""

    code: int = 0
    reason: str | None = None

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        status_code: int | None = 200,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.data = data
        self.status_code = status_code

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
    from ``tasks/cancel`` it is raised as :class:`TaskNotCancelableError`, apart.
    """

    code = -32002

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        status_code: int | None = 200,
        skill_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, data=data, status_code=status_code)
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


class TaskNotCancelableError(JSONRPCError):
    """-32002 answered to ``tasks/cancel``: generic A2A's "task not cancelable" (the task
    has ended). Not a :class:`SkillNotFoundError`, though it shares its code: a cancel
    names no skill, and ``except SkillNotFoundError`` must not swallow a refused cancel.

    The Magisterium service itself answers -32602 for this case; other A2A servers answer
    -32002, which the service's contract reserves for an unknown skill.
    """

    code = -32002


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
        status_code: int | None = 429,
        retry_after: float | None = None,
        headers: Any = None,
    ) -> None:
        super().__init__(message, code=code, data=data, status_code=status_code)
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
        super().__init__(message, status_code=None)  # no HTTP answer said so: the store did

    def __str__(self) -> str:
        return self.message


class PlanRequiredError(JSONRPCError):
    """-32005 / HTTP 403: A2A needs a Pro, Organization or Enterprise plan."""

    code = -32005


class VersionNotSupportedError(JSONRPCError):
    """-32009: the server does not speak the A2A version the request was sent in (an A2A
    1.0 server asked without ``A2A-Version: 1.0``). With ``protocol="auto"`` the client
    reads the agent card and sends the call again in the version it offers."""

    code = -32009


class NotSupportedError(MagisteriumError):
    """The server does not offer what was asked (``list_tasks`` needs A2A 1.0's
    ``ListTasks``); nothing was sent."""


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
    """The shared quota cannot be used: redis-py is missing or the URL is invalid (raised
    when the client is made), or Redis's TLS certificate is not one ``ssl_ca_certs``
    verifies (raised by each call: a misconfiguration, not an outage to fall back for)."""


class CacheError(MagisteriumError):
    """The cache given to the client cannot be used as named: the file is a database (or
    anything) the cache did not make, its directory is missing, redis-py is missing, or
    the URL is invalid. Raised when the client is made; the file is left untouched. Also
    raised by each call when Redis's TLS certificate is not one ``ssl_ca_certs`` verifies.

    A cache that fails later (unreachable, corrupt) raises nothing: calls go to the
    service without it, and one warning is logged."""


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
    ``status_code`` the HTTP status, when there was an answer.
    """

    def __init__(
        self, message: str, *, error: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.error = error
        self.status_code = status_code


# Which errors may go away by themselves ------------------------------------------------


def is_transient(error: MagisteriumError, *, retry_timeouts: bool = True) -> bool:
    """Whether ``error`` may go away by itself: a dropped connection, a timeout, a 5xx."""
    if isinstance(error, TLSError):
        return False  # a refused certificate or handshake stays refused
    if isinstance(error, APITimeoutError):
        return retry_timeouts
    if isinstance(error, (APIConnectionError, InternalServerError)):
        return True
    if isinstance(error, UnexpectedStatusError):
        status = error.status_code
        return status is not None and (status >= 500 or status == 408)
    return False


# A 429's wait ------------------------------------------------------------------------


def retry_after_from(data: Any, headers: Any = None) -> float | None:
    """A 429's wait in seconds: ``data.retryAfter`` first, then ``Retry-After``."""
    seconds = parse_seconds(data.get("retryAfter")) if isinstance(data, dict) else None
    if seconds is None and headers is not None:
        try:
            seconds = parse_seconds(headers.get("Retry-After"))
        except Exception:  # a headers object that cannot be read is a header not given
            seconds = None
    return seconds


def parse_seconds(value: object) -> float | None:
    """A wait the service gave (``retryAfter``, ``Retry-After``), in seconds; never raises.

    A number, or a string of digits holding one: ``-0.0`` is ``0.0``; a number too large
    to hold in a float (a 400-digit integer, ``1e999``, which JSON decodes to ``inf``) is
    ``inf``, for the caller to cap. ``None`` for what is no usable wait: ``nan``, a
    negative number, a bool, anything else, a string that is no number (``"soon"``,
    ``"inf"``, an HTTP date).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, int):
        if value < 0:
            return None
        try:
            return float(value)
        except OverflowError:
            return math.inf
    if isinstance(value, str) and any(word in value.lower() for word in ("inf", "nan")):
        return None  # a word, not a number of seconds
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds + 0.0  # -0.0 becomes 0.0


# Which error an answer is --------------------------------------------------------------

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
        VersionNotSupportedError,
    )
}
_BY_REASON: dict[str, type[JSONRPCError]] = {
    # A2A 1.0's reasons (domain a2a-protocol.org) ...
    "PARSE_ERROR": ParseError,
    "INVALID_REQUEST": InvalidRequestError,
    "METHOD_NOT_FOUND": MethodNotFoundError,
    "INVALID_PARAMS": InvalidParamsError,
    "INTERNAL_ERROR": InternalServerError,
    "TASK_NOT_FOUND": TaskNotFoundError,
    "TASK_NOT_CANCELABLE": TaskNotCancelableError,
    "VERSION_NOT_SUPPORTED": VersionNotSupportedError,
    # ... whose codes the service gives other meanings: never its rate limit or auth errors
    "PUSH_NOTIFICATION_NOT_SUPPORTED": JSONRPCError,
    "UNSUPPORTED_OPERATION": JSONRPCError,
    "CONTENT_TYPE_NOT_SUPPORTED": JSONRPCError,
    "INVALID_AGENT_RESPONSE": JSONRPCError,
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": JSONRPCError,
    "EXTENSION_SUPPORT_REQUIRED": JSONRPCError,
    # ... and the service's own meanings of -32002 to -32005, named
    "SKILL_NOT_FOUND": SkillNotFoundError,
    "RATE_LIMIT_EXCEEDED": RateLimitError,
    "UNAUTHENTICATED": AuthenticationError,
    "PAID_PLAN_REQUIRED": PlanRequiredError,
}
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
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
    reason, readable = error_details(data)
    cls = _BY_REASON.get(reason) if reason is not None else None
    if cls is None:
        cls = _BY_CODE.get(int_code) if int_code is not None else None
        if (cls in _STATUS_BOUND and _STATUS_BOUND[cls] != status) or cls is None:
            cls = _BY_STATUS.get(status, JSONRPCError)
        if cls is SkillNotFoundError and method == "tasks/cancel":
            cls = TaskNotCancelableError
    final = int_code if int_code is not None else cls.code
    error: JSONRPCError
    if cls is RateLimitError:
        wait = retry_after_from(readable, headers)
        error = RateLimitError(
            text, code=final, data=data, status_code=status, retry_after=wait, headers=headers
        )
    elif issubclass(cls, SkillNotFoundError):
        named = skill_named(readable)
        error = cls(
            text,
            code=final,
            data=data,
            status_code=status,
            skill_id=named if named is not None or cls is not SkillNotFoundError else skill_id,
        )
    else:
        error = cls(text, code=final, data=data, status_code=status)
    error.reason = reason
    return error


def error_details(data: Any) -> tuple[str | None, Any]:
    """An error's ``data`` read in either dialect: the ``reason`` of an A2A 1.0
    ``ErrorInfo`` (``None`` without one), and what to read as 0.3's ``data`` object
    (``retryAfter``, ``skillId``): 1.0's ``ErrorInfo.metadata``, with a ``RetryInfo``'s
    delay as ``retryAfter``; 0.3's ``data`` as it is."""
    if not isinstance(data, list):
        return None, data
    reason: str | None = None
    readable: dict[str, Any] = {}
    for detail in data:
        if not isinstance(detail, dict):
            continue
        kind = detail.get("@type")
        if kind == _ERROR_INFO and reason is None:
            if isinstance(detail.get("reason"), str):
                reason = detail["reason"]
            metadata = detail.get("metadata")
            if isinstance(metadata, dict):
                readable = {**metadata, **readable}
        elif kind == _RETRY_INFO and isinstance(detail.get("retryDelay"), str):
            delay = detail["retryDelay"].strip()
            readable.setdefault("retryAfter", delay[:-1] if delay.endswith("s") else delay)
    return reason, readable


def error_for_status(
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: str = "",
    jsonrpc_id: int | None = None,
) -> MagisteriumError:
    """The mapping of an HTTP status (with no JSON-RPC error to say more) to its error.

    401 is an :class:`AuthenticationError`, 403 a :class:`PlanRequiredError`, 429 a
    :class:`RateLimitError` (its wait read from ``Retry-After``), and anything else an
    :class:`UnexpectedStatusError` keeping the first characters of ``body``. The answer's
    details are attached by :func:`with_answer`.
    """
    cls = _BY_STATUS.get(status)
    error: MagisteriumError
    if cls is RateLimitError:
        error = RateLimitError(message, status_code=status, headers=headers)
    elif cls is not None:
        error = cls(message, status_code=status)
    else:
        error = UnexpectedStatusError(message, status_code=status, body=body)
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


def masked_url(url: str) -> str:
    """``url`` as a message or a log line may show it: its password, and any query key
    ending in ``password`` (``password=``, ``sentinel_password=``, ``ssl_password=``: redis-py
    reads them there), replaced by ``***``.

    For every URL the library names in its messages: a Redis URL, a credential store's
    location, a proxy.
    """
    base, sep, query = url.partition("?")
    scheme, colon_slashes, rest = base.partition("://")
    if colon_slashes and "@" in rest:
        userinfo, _, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        hidden = ":***" if colon else ("***" if not user else "")
        base = f"{scheme}://{user}{hidden}@{host}"
    return base + sep + re.sub(r"(?i)(^|&)([^=&]*password=)[^&]*", r"\1\2***", query)


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
