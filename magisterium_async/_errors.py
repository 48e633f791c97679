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
    ├── SharedQuotaError              the shared quota cannot be used (bad URL, Redis refused)
    ├── CacheError                    the cache cannot be used (not its file, bad URL, refused)
    ├── CredentialsError              the credentials file, or Redis store, is unsafe or unreadable
    └── OAuthError                    the authorization server refused or answered off-spec

``ValueError`` and ``TypeError`` are raised, before anything is sent, for arguments that
cannot be right.

Which error an answer is, :func:`error_for_status` alone decides (the OpenAI SDK's one
mapping): an A2A 1.0 error's ``ErrorInfo.reason``, then the JSON-RPC code, then the HTTP
status. Every error made from an answer names it: ``.status_code`` (the HTTP status;
``None`` where no answer came), ``.request_id`` (the JSON-RPC id we sent, then `` / ``
and the server's request-id header when it sent one; apart as ``.jsonrpc_id`` and
``.server_request_id``) and ``.headers`` (case-insensitive, authorization and cookies
redacted); ``str()`` ends with them in brackets.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from multidict import CIMultiDict, CIMultiDictProxy

if TYPE_CHECKING:
    from magisterium_async._models import Task

_NO_HEADERS: Mapping[str, str] = CIMultiDictProxy(CIMultiDict())


class MagisteriumError(Exception):
    """Root of every error the library raises on purpose. An error made from an HTTP
    answer names it (see :func:`with_answer`); the others leave these ``None`` and
    ``headers`` empty."""

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
    """The service (or something in front of it) answered outside the contract:
    ``status_code`` is the HTTP status and ``body`` the first 500 characters of the body,
    so the answer is never lost."""

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
    """-32001: the task id is unknown or expired (tasks are kept for 24 hours)."""

    code = -32001


class SkillNotFoundError(JSONRPCError):
    """-32002: the service does not know the skill; ``skill_id`` names it (as the error's
    ``data`` does, else as the request did; ``None`` when neither says)."""

    code = -32002
    skill_id: str | None = None

    def __str__(self) -> str:
        if self.skill_id is None:
            return super().__str__()
        return f"{self.message}: {self.skill_id!r} (JSON-RPC error {self.code}){self._answer_note}"


class TaskNotCancelableError(JSONRPCError):
    """-32002 answered to ``tasks/cancel``: generic A2A's "task not cancelable" (the task
    has ended). Not a :class:`SkillNotFoundError`, though it shares its code: a cancel
    names no skill, and ``except SkillNotFoundError`` must not swallow a refused cancel.
    (The Magisterium service itself answers -32602 for this case.)"""

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
        if retry_after is None:
            retry_after = _seconds(_details(data)[1].get("retryAfter"))
        if retry_after is None and headers is not None:
            # A headers object that cannot be read is a header not given.
            with contextlib.suppress(Exception):
                retry_after = _seconds(headers.get("Retry-After"))
        self.retry_after = retry_after


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
    when the client is made), or Redis refused (the user or password, an ACL user's
    commands, the TLS certificate; raised by each call: a misconfiguration, not an outage
    to fall back for)."""


class CacheError(MagisteriumError):
    """The cache given to the client cannot be used as named: the file is a database (or
    anything) the cache did not make, its directory is missing, redis-py is missing, or
    the URL is invalid (raised when the client is made; the file is left untouched); or
    Redis refused, as for :class:`SharedQuotaError` (raised by each call).

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
    """The authorization server refused a sign-in step, or answered outside the OAuth
    specs: ``error`` is the OAuth error code it sent (``"invalid_grant"``, ...), or
    ``None``; ``status_code`` the HTTP status, when there was an answer."""

    def __init__(
        self, message: str, *, error: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.error = error
        self.status_code = status_code


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


# Which error an answer is --------------------------------------------------------------

E = TypeVar("E", bound=MagisteriumError)

# Each code's class (-32002 is the service's SkillNotFoundError; tasks/cancel's is apart).
_BY_CODE = {c.code: c for c in JSONRPCError.__subclasses__() if c is not TaskNotCancelableError}
# The service sends these three codes only with these statuses; generic A2A servers use
# the codes with HTTP 200 for other things ("push notifications not supported", ...).
_BY_STATUS: dict[int, type[JSONRPCError]] = {
    429: RateLimitError,
    401: AuthenticationError,
    403: PlanRequiredError,
}
_STATUS_OF = {cls: status for status, cls in _BY_STATUS.items()}
_BY_REASON: dict[str, type[JSONRPCError]] = {  # A2A 1.0's (domain a2a-protocol.org)
    "PARSE_ERROR": ParseError,
    "INVALID_REQUEST": InvalidRequestError,
    "METHOD_NOT_FOUND": MethodNotFoundError,
    "INVALID_PARAMS": InvalidParamsError,
    "INTERNAL_ERROR": InternalServerError,
    "TASK_NOT_FOUND": TaskNotFoundError,
    "TASK_NOT_CANCELABLE": TaskNotCancelableError,
    "VERSION_NOT_SUPPORTED": VersionNotSupportedError,
}


def error_for_status(
    status: int,
    message: object,
    *,
    code: object = None,
    data: Any = None,
    method: str = "",
    headers: Mapping[str, str] | None = None,
    body: str = "",
    jsonrpc_id: int | None = None,
    skill_id: str | None = None,
) -> MagisteriumError:
    """The error an answer is, told the answer (:func:`with_answer`).

    Arguments:
        status: the HTTP status.
        message: the error object's message, or what to say of a bare status.
        code: the JSON-RPC error object's ``code``; ``None`` when the body held none.
        data: its ``data``, in either dialect (0.3's object, 1.0's list of details).
        method: the JSON-RPC method asked (-32002 to ``tasks/cancel`` is
            :class:`TaskNotCancelableError`).
        headers, jsonrpc_id: the answer's headers and the id we sent.
        body: the body, kept by an :class:`UnexpectedStatusError`.
        skill_id: the skill the request named, for a :class:`SkillNotFoundError`.

    The class: an A2A 1.0 ``ErrorInfo.reason`` first; then the code, where -32003, -32004
    and -32005 count only with HTTP 429, 401 and 403 (with any other status they are
    generic A2A's other meanings: a plain :class:`JSONRPCError`, never a pool-wide pause);
    then the status (401, 403, 429); else a plain :class:`JSONRPCError` keeping what was
    said, or, with no error object, an :class:`UnexpectedStatusError`.
    """
    reason, readable = _details(data)
    number = code if isinstance(code, int) and not isinstance(code, bool) else None
    cls = _BY_REASON.get(reason) if reason is not None else None
    if cls is None:
        cls = _BY_CODE.get(number) if number is not None else None
        if cls is None or _STATUS_OF.get(cls, status) != status:
            cls = _BY_STATUS.get(status, JSONRPCError)
        if cls is SkillNotFoundError and method == "tasks/cancel":
            cls = TaskNotCancelableError
    error: MagisteriumError
    if code is None and cls is JSONRPCError:
        error = UnexpectedStatusError(str(message), status_code=status, body=body)
    else:
        text = message if isinstance(message, str) and message else "JSON-RPC error"
        wait: dict[str, Any] = {"headers": headers} if cls is RateLimitError else {}
        error = cls(text, code=cls.code if number is None else number, data=data, **wait)
        error.status_code, error.reason = status, reason
        if isinstance(error, SkillNotFoundError):
            named = readable.get("skillId")
            error.skill_id = named if isinstance(named, str) else skill_id
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
        error.server_request_id = None
        for name in ("X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Amzn-RequestId"):
            value = error.headers.get(name)
            if isinstance(value, str) and value.strip():
                error.server_request_id = value.strip()[:200]
                break
    if jsonrpc_id is not None:
        error.jsonrpc_id = jsonrpc_id
    ids = [str(i) for i in (error.jsonrpc_id, error.server_request_id) if i is not None]
    error.request_id = " / ".join(ids) or None
    note = [f"HTTP {error.status_code}"] if error.status_code is not None else []
    if error.request_id is not None:
        note.append(f"request {error.request_id}")
    error._answer_note = f" [{', '.join(note)}]" if note else ""
    return error


def _details(data: Any) -> tuple[str | None, Any]:
    """An error's ``data`` read in either dialect: the ``reason`` of an A2A 1.0
    ``ErrorInfo`` (``None`` without one), and what to read as 0.3's ``data`` object
    (``retryAfter``, ``skillId``): 1.0's ``ErrorInfo.metadata``, with a ``RetryInfo``'s
    delay as ``retryAfter``; 0.3's ``data`` as it is (``{}`` when it is no object)."""
    if not isinstance(data, list):
        return None, data if isinstance(data, dict) else {}
    reason: str | None = None
    readable: dict[str, Any] = {}
    for detail in data:
        kind = detail.get("@type") if isinstance(detail, dict) else None
        if kind == "type.googleapis.com/google.rpc.ErrorInfo" and reason is None:
            reason = detail["reason"] if isinstance(detail.get("reason"), str) else None
            if isinstance(detail.get("metadata"), dict):
                readable = {**detail["metadata"], **readable}
        elif kind == "type.googleapis.com/google.rpc.RetryInfo":
            delay = detail.get("retryDelay")
            if isinstance(delay, str):
                readable.setdefault("retryAfter", delay.strip().removesuffix("s"))
    return reason, readable


def _seconds(value: object) -> float | None:
    """A wait the service gave (``retryAfter``, ``Retry-After``), in seconds; never raises.

    A number, or a string holding one: ``-0.0`` is ``0.0``; one too large for a float (a
    400-digit integer, ``1e999``, which JSON decodes to ``inf``) is ``inf``, for the caller
    to cap. ``None`` for no usable wait: ``nan``, a negative number, a bool, a word
    (``"soon"``, ``"inf"``, an HTTP date), anything else.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, str) and re.search("(?i)inf|nan", value):
        return None  # a word, not a number of seconds
    try:
        seconds = float(value)
    except ValueError:
        return None
    except OverflowError:  # an int too large for a float
        return math.inf if isinstance(value, int) and value > 0 else None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds + 0.0  # -0.0 becomes 0.0


def masked_url(url: str) -> str:
    """``url`` as a message or a log line may show it: its password, and any query key
    ending in ``password`` (``password=``, ``sentinel_password=``, ``ssl_password=``: redis-py
    reads them there), replaced by ``***``. For every URL the library names in its
    messages: a Redis URL, a credential store's location, a proxy."""
    base, sep, query = url.partition("?")
    scheme, colon_slashes, rest = base.partition("://")
    if colon_slashes and "@" in rest:
        userinfo, _, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        hidden = ":***" if colon else ("***" if not user else "")
        base = f"{scheme}://{user}{hidden}@{host}"
    return base + sep + re.sub(r"(?i)(^|&)([^=&]*password=)[^&]*", r"\1\2***", query)


_URL_RUN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")


def masked_text(text: str, words: Iterable[str] = ()) -> str:
    """``text``, a message that may quote what a user typed (argparse's), with every URL
    in it as :func:`masked_url` shows it: each of ``words`` (the words typed, and an
    option's value after its ``=``) that holds a password, quoted or not, whatever it holds
    (a space too); then every other ``scheme://`` run of ``text``, to a space."""
    for word in words:
        for typed in (word, word.partition("=")[2]):
            shown = masked_url(typed)
            if shown != typed:
                text = text.replace(repr(typed), repr(shown)).replace(typed, shown)
    return _URL_RUN.sub(_masked_run, text)


def _masked_run(found: re.Match[str]) -> str:
    run = found.group()
    url = run.rstrip("'\"),;")  # the quote or the punctuation around it
    return masked_url(url) + run[len(url) :]


def _redact(headers: Mapping[str, str]) -> Mapping[str, str]:
    copy: CIMultiDict[str] = CIMultiDict()
    try:
        for name, value in headers.items():
            secret = name.lower() in ("authorization", "proxy-authorization", "cookie")
            copy.add(
                name, "<redacted>" if secret or name.lower().startswith("set-cookie") else value
            )
    except Exception:  # a headers object that cannot be read is headers not given
        pass
    return CIMultiDictProxy(copy)
