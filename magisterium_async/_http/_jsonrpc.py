"""HTTP and the JSON-RPC envelope: one aiohttp session per client, every answer mapped.

The transport sends one request and turns whatever comes back into a :class:`Task` or a
:class:`MagisteriumError`; it never retries (the client does) and never raises a raw
aiohttp, JSON or msgspec exception.
"""

from __future__ import annotations

import asyncio
import itertools
import platform
import reprlib
import socket
import ssl
from collections.abc import Sequence
from typing import Any, NoReturn

import aiohttp
import msgspec

from magisterium_async import _version
from magisterium_async._clock import Clock, LoopClock, within
from magisterium_async._config import BASE_URL_ENV, DEFAULT_MAX_RESPONSE_BYTES
from magisterium_async._config import base_url as resolve_base_url
from magisterium_async._errors import (
    APIConnectionError,
    APIResponseError,
    APITimeoutError,
    JSONRPCError,
    MalformedResponseError,
    TLSError,
    UnexpectedStatusError,
    error_for_status,
    with_answer,
)
from magisterium_async._http._base import (
    ACCEPT_ENCODING,
    SNIPPET,
    AiohttpTransport,
    HTTPRequest,
    HTTPTransport,
    body_snippet,
    check_base_url,
)
from magisterium_async._http._dialect import V03, Dialect
from magisterium_async._http._proxy import Proxies
from magisterium_async._models import (
    MAX_ANSWER_DEPTH,
    MAX_DEPTH,
    Task,
    deeper_than,
    json_deeper_than,
    opening_brackets,
    task_deeper_than,
)
from magisterium_async._telemetry import with_trace_context

__all__ = [
    "JSONRPCClient",
    "decode_response",
    "encode_params",
    "endpoint",
]

_USER_AGENT = (
    f"magisterium-async/{_version.__version__} "
    f"python/{platform.python_version()} aiohttp/{aiohttp.__version__}"
)


class _Request(msgspec.Struct):
    jsonrpc: str
    id: int
    method: str
    params: Any


class _ErrorObject(msgspec.Struct):
    code: Any = None
    message: Any = None
    data: Any = None


class _Envelope(msgspec.Struct):
    """Any JSON-RPC answer, its result left undecoded (the dialect's to read)."""

    jsonrpc: Any = None
    id: Any = None
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: _ErrorObject | None = None


_ENCODER = msgspec.json.Encoder()
_ENVELOPE_DECODER = msgspec.json.Decoder(_Envelope)
_TASK_DECODER = msgspec.json.Decoder(Task)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 40, 40, 40


def encode_params(params: Any) -> msgspec.Raw:
    """A request's params as JSON, ready to be sent in any request's envelope."""
    return msgspec.Raw(_ENCODER.encode(params))


def endpoint(given: str | None) -> str:
    """The endpoint to call: ``given``, else ``$MAGISTERIUM_BASE_URL``, else the service's,
    checked by :func:`check_base_url`; a bad value of the variable is refused naming it."""
    url = resolve_base_url(given)
    try:
        return check_base_url(url)
    except ValueError as exc:
        if given is None:
            raise ValueError(f"${BASE_URL_ENV}: {exc}") from None
        raise


def _network_error(what: str, timeout: float, exc: BaseException) -> APIConnectionError:
    """The SDK error for a network failure, with a description safe to log: aiohttp's
    ``str()`` names the URL and the reason, never the request's headers (its ``repr`` does)."""
    # TimeoutError first: it is an OSError too, and aiohttp's timeouts are ClientErrors too.
    if isinstance(exc, asyncio.TimeoutError):
        return APITimeoutError(f"{what} timed out after {timeout:g} s")
    detail = _safe_str(exc)
    if isinstance(exc, _TLS_ERRORS):
        return TLSError(f"{what} failed: TLS: {type(exc).__name__}: {detail}".rstrip(": "))
    error = APIConnectionError(f"{what} failed: {type(exc).__name__}: {detail}".rstrip(": "))
    error.reached_server = not isinstance(exc, _NOT_SENT_ERRORS)
    return error


def raise_alone(error: BaseException) -> NoReturn:
    """Raise ``error`` with neither a ``__cause__`` nor a ``__context__``.

    For errors that replace aiohttp's, whose ``repr`` shows the request's headers (the
    token among them). Raising outside the ``except`` block is not enough: on 3.10 a
    pure-Python task (pytest-asyncio's, for one) runs the step inside its own handler of
    that aiohttp error, and ``raise`` would attach it all the same.
    """
    try:
        raise error from None
    finally:
        error.__context__ = None


def _safe_str(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientResponseError):
        # Built from the status and message alone: never from request_info.
        return f"{exc.status}, {exc.message}"[:SNIPPET]
    try:
        return str(exc)[:SNIPPET]
    except Exception:  # a str() that fails must not hide the failure it describes
        return ""


_NETWORK_ERRORS = (asyncio.TimeoutError, aiohttp.ClientError, OSError)
_TLS_ERRORS = (aiohttp.ClientSSLError, aiohttp.ServerFingerprintMismatch, ssl.SSLError)
# No connection was made (refused, the host did not resolve): nothing reached the server.
_NOT_SENT_ERRORS = (aiohttp.ClientConnectorError, ConnectionRefusedError, socket.gaierror)


def _parse(payload: bytes) -> tuple[_Envelope | None, str | None]:
    """The envelope, and what makes it not a strict JSON-RPC 2.0 answer (``None``: nothing)."""
    # Before decoding: how deep a decoder recurses, and so what it refuses, differs between
    # interpreters, and it skips unknown fields unseen.
    if json_deeper_than(payload, MAX_ANSWER_DEPTH):
        return None, f"the response is nested more than {MAX_ANSWER_DEPTH} levels deep"
    try:
        envelope = _ENVELOPE_DECODER.decode(payload)
    except RecursionError:
        return None, f"the response is nested too deeply to decode (over {MAX_DEPTH} levels)"
    except _DECODE_ERRORS:
        return None, "the response is not a JSON-RPC object"
    error = envelope.error
    if error is not None and deeper_than(error.data, MAX_DEPTH):
        return None, f"error.data is nested more than {MAX_DEPTH} levels deep"
    return envelope, _protocol_problem(envelope)


def _protocol_problem(envelope: _Envelope) -> str | None:
    if envelope.jsonrpc != "2.0":
        return f"the response's jsonrpc is {_brief(envelope.jsonrpc)}, not '2.0'"
    has_result = not isinstance(envelope.result, msgspec.UnsetType)
    if envelope.error is not None:
        if has_result:
            return "the response has both result and error"
        if not _is_int(envelope.error.code) or not isinstance(envelope.error.message, str):
            return "the error object needs an integer code and a string message"
    elif not has_result:
        return "the response has neither result nor error"
    return None


def _is_int(value: object) -> bool:
    return type(value) is int


def _brief(value: object) -> str:
    return _REPR.repr(value)


def _id_problem(envelope: _Envelope, request_id: int) -> str | None:
    """A result must carry the request's id; an error may carry ``null`` (JSON-RPC 2.0)."""
    if _is_int(envelope.id) and envelope.id == request_id:
        return None
    if envelope.id is None and envelope.error is not None:
        return None
    return f"response id {_brief(envelope.id)} does not match request id {request_id}"


def decode_response(
    method: str,
    request_id: int,
    status: int,
    payload: bytes,
    headers: Any = None,
    *,
    skill_id: str | None = None,
    dialect: Dialect | None = None,
) -> Any:
    """Map one HTTP answer to the result it carries, or raise the error it means.

    HTTP 401, 403 and 429 raise their class whatever the body (its error object, if any,
    adds the details). Anything else must be a strict JSON-RPC 2.0 answer to this request
    (``"jsonrpc": "2.0"``, the request's integer id, exactly one of ``result`` and
    ``error``): its error object is raised, a non-200 status without one is an
    :class:`UnexpectedStatusError`, and a 200 that breaks the protocol is a
    :class:`MalformedResponseError`. Every error raised carries the answer (status,
    headers, ``request_id``: see :func:`with_answer`). ``skill_id`` is the skill the
    request named: a :class:`SkillNotFoundError` names it where the service did not.
    ``dialect`` is the one spoken (``None``: today's, whose results are Tasks); its
    ``decode`` reads the result of ``method``.
    """
    try:
        return _decode(method, request_id, status, payload, headers, skill_id, dialect)
    except (APIResponseError, JSONRPCError) as error:
        with_answer(error, status=status, headers=headers, jsonrpc_id=request_id)
        raise


def _decode(
    method: str,
    request_id: int,
    status: int,
    payload: bytes,
    headers: Any,
    skill_id: str | None,
    dialect: Dialect | None,
) -> Any:
    envelope, problem = _parse(payload)
    if problem is None and envelope is not None:
        problem = _id_problem(envelope, request_id)
    err = envelope.error if envelope is not None else None
    usable = err is not None and _is_int(err.code)
    if err is not None and (usable if status in (401, 403, 429) else problem is None):
        raise error_for_status(
            status,
            err.message,
            code=err.code,
            data=err.data,
            method=method,
            headers=headers,
            skill_id=skill_id,
        )
    if status == 407:
        raise UnexpectedStatusError(
            f"{method}: the proxy asks for credentials it was not given or refused "
            "(HTTP 407 Proxy Authentication Required): put them in the proxy's URL",
            status_code=status,
            body=body_snippet(payload),
        )
    if status != 200:
        contract = status in (401, 403, 429)
        what = f"HTTP {status}" if contract else f"{method}: unexpected HTTP {status}"
        raise error_for_status(status, what, headers=headers, body=body_snippet(payload))
    if problem is not None or envelope is None:
        raise MalformedResponseError(
            f"{method}: {problem}", status_code=status, body=body_snippet(payload)
        )
    assert isinstance(envelope.result, msgspec.Raw)
    return _result(method, envelope.result, dialect, status, payload)


def _result(
    method: str, raw: msgspec.Raw, dialect: Dialect | None, status: int, payload: bytes
) -> Any:
    """The result of ``method`` as ``dialect`` reads it (today's: a Task); malformed when
    it cannot be read, or holds values nested too deeply."""
    decoded: Any
    try:
        if dialect is None:
            decoded = _TASK_DECODER.decode(raw)
        else:
            decoded = dialect.decode(method, bytes(raw))
    except RecursionError:
        decoded = None
    except _DECODE_ERRORS as exc:
        raise MalformedResponseError(
            f"{method}: the result is not a Task: {exc}",
            status_code=status,
            body=body_snippet(payload),
        ) from None
    except ValueError as exc:  # the dialect's "not what this method answers"
        raise MalformedResponseError(
            f"{method}: {exc}", status_code=status, body=body_snippet(payload)
        ) from None
    # No value nests deeper than the body has brackets: most answers skip the walk.
    if decoded is not None and opening_brackets(payload) <= MAX_DEPTH:
        return decoded
    tasks = getattr(decoded, "tasks", [decoded])
    if decoded is None or any(task_deeper_than(task, MAX_DEPTH) for task in tasks):
        raise MalformedResponseError(
            f"{method}: the result holds values nested more than {MAX_DEPTH} levels deep",
            status_code=status,
            body=body_snippet(payload),
        )
    return decoded


def _common_headers() -> dict[str, str]:
    """The headers of every request (the GET of the agent card's are just these)."""
    return {
        "Accept": "application/json",
        "Accept-Encoding": ACCEPT_ENCODING,
        "User-Agent": _USER_AGENT,
    }


def _rpc_headers(token: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **_common_headers()}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class JSONRPCClient:
    """The JSON-RPC client of one endpoint over an :class:`HTTPTransport`: one request per
    :meth:`rpc`, its answer mapped to a result or an error."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        max_concurrency: int,
        connect_timeout: float,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        clock: Clock | None = None,
        http: HTTPTransport | None = None,
        trace_configs: Sequence[aiohttp.TraceConfig] = (),
        proxies: Proxies | None = None,
    ) -> None:
        self._url = base_url
        self._token = token
        self._rpc_headers = _rpc_headers(token)
        self._get_headers = _common_headers()
        self._max_response_bytes = max_response_bytes
        self._clock: Clock = clock or LoopClock()
        self.http: HTTPTransport = http or AiohttpTransport(
            max_concurrency=max_concurrency,
            connect_timeout=connect_timeout,
            trace_configs=trace_configs,
            proxies=proxies,
        )
        # The real transport bounds each exchange on its sockets (aiohttp's timeout, in real
        # time); any other (an in-memory one) is bounded here, on the client's clock, so a
        # virtual-time test sees the same timeouts.
        self._bound_here = not isinstance(self.http, AiohttpTransport)
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<JSONRPCClient {self._url}>"

    @property
    def base_url(self) -> str:
        """The endpoint requests go to (unless their dialect names another)."""
        return self._url

    async def _exchange(
        self, method: str, url: str, headers: Any, body: bytes | None, timeout: float, what: str
    ) -> tuple[int, Any, bytes]:
        failure: APIConnectionError | None = None
        try:
            request = HTTPRequest(
                method, url, headers, body, timeout, self._max_response_bytes, what
            )
            exchange = self.http.send(request)
            if self._bound_here:
                return await within(self._clock, timeout, exchange, asyncio.TimeoutError)
            return await exchange
        except _NETWORK_ERRORS as exc:
            failure = _network_error(what, timeout, exc)
        # aiohttp's exceptions carry the request's headers, the token among them.
        raise_alone(failure)

    def _headers_for(self, token: str) -> dict[str, str]:
        # The token changes once an hour at most: rebuild the headers only then.
        if token != self._token:
            self._token = token
            self._rpc_headers = _rpc_headers(token)
        return self._rpc_headers

    async def rpc(
        self,
        method: str,
        params: Any,
        token: str | None = None,
        *,
        timeout: float,
        skill_id: str | None = None,
        dialect: Dialect = V03,
    ) -> Any:
        """Send one JSON-RPC request and return what it answers (a Task, in today's
        dialect), or raise.

        ``method`` names the operation by its A2A 0.3 method; ``dialect``, the one spoken,
        names the method on the wire, may name another endpoint and adds its headers;
        ``params`` are already in its shape. ``token`` replaces the client's own for this
        request and the next ones; ``skill_id`` (the skill a ``message/send`` names) goes
        into the errors it meets.
        """
        request_id = next(self._ids)
        body = _ENCODER.encode(_Request("2.0", request_id, dialect.method(method), params))
        headers = self._rpc_headers if token is None else self._headers_for(token)
        if dialect.headers:
            headers = {**headers, **dialect.headers}
        url = dialect.url or self._url
        try:
            status, answer_headers, payload = await self._exchange(
                "POST", url, with_trace_context(headers), body, timeout, method
            )
        except APIResponseError as error:  # the body could not be read (too large, corrupt)
            with_answer(error, jsonrpc_id=request_id)
            raise
        spoken = dialect if dialect.version == "1.0" else None  # 0.3's results are Tasks
        return decode_response(
            method, request_id, status, payload, answer_headers, skill_id=skill_id, dialect=spoken
        )

    async def get(self, url: str, *, timeout: float) -> tuple[int, Any, bytes]:
        """GET a public URL (no token sent); the status, headers and body."""
        headers = with_trace_context(self._get_headers)
        return await self._exchange("GET", url, headers, None, timeout, f"GET {url}")

    async def aclose(self) -> None:
        """Close the HTTP transport; this one cannot be used afterwards."""
        await self.http.aclose()
