"""The JSON-RPC envelope and :class:`JSONRPCClient`: a request out, a result or an error back.

One request is sent, and whatever comes back is turned into what its method answers or a
:class:`MagisteriumError`; nothing here retries (the call does), and nothing raises a raw
aiohttp, JSON or msgspec exception.
"""

from __future__ import annotations

import asyncio
import itertools
import platform
import socket
import ssl
from collections.abc import Mapping
from typing import Any, Literal, NoReturn

import aiohttp
import msgspec

from magisterium_async import _version
from magisterium_async._clock import Clock, within
from magisterium_async._config import BASE_URL_ENV, DEFAULT_BASE_URL, from_env
from magisterium_async._errors import (
    APIConnectionError,
    APIResponseError,
    APITimeoutError,
    MagisteriumError,
    MalformedResponseError,
    TLSError,
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
from magisterium_async._models import (
    MAX_ANSWER_DEPTH,
    MAX_DEPTH,
    deeper_than,
    json_deeper_than,
    opening_brackets,
    task_deeper_than,
)
from magisterium_async._telemetry import with_trace_context

_HEADERS = {
    "Accept": "application/json",
    "Accept-Encoding": ACCEPT_ENCODING,
    "User-Agent": f"magisterium-async/{_version.__version__} "
    f"python/{platform.python_version()} aiohttp/{aiohttp.__version__}",
}
"""The headers of every request (the agent card's GET has just these)."""


class _ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any = None


class _Envelope(msgspec.Struct):
    """A JSON-RPC 2.0 answer, its result left undecoded (the dialect's to read)."""

    jsonrpc: Literal["2.0"]
    id: int | None = None
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: _ErrorObject | None = None


_ENCODER = msgspec.json.Encoder()
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_NETWORK_ERRORS = (asyncio.TimeoutError, aiohttp.ClientError, OSError)
_TLS_ERRORS = (aiohttp.ClientSSLError, aiohttp.ServerFingerprintMismatch, ssl.SSLError)
# No connection was made (refused, the host did not resolve): nothing reached the server.
_NOT_SENT_ERRORS = (aiohttp.ClientConnectorError, ConnectionRefusedError, socket.gaierror)


def endpoint(given: str | None) -> str:
    """The endpoint to call: ``given``, else ``$MAGISTERIUM_BASE_URL``, else the service's,
    checked by :func:`check_base_url`; a bad value of the variable is refused naming it."""
    try:
        return check_base_url(
            given if given is not None else from_env(BASE_URL_ENV) or DEFAULT_BASE_URL
        )
    except ValueError as exc:
        if given is None:
            raise ValueError(f"${BASE_URL_ENV}: {exc}") from None
        raise


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


def _network_error(what: str, timeout: float, exc: BaseException) -> APIConnectionError:
    """The SDK error for a network failure, with a description safe to log: aiohttp's
    ``str()`` names the URL and the reason, never the request's headers (its ``repr`` does)."""
    # TimeoutError first: it is an OSError too, and aiohttp's timeouts are ClientErrors too.
    if isinstance(exc, asyncio.TimeoutError):
        return APITimeoutError(f"{what} timed out after {timeout:g} s")
    if isinstance(exc, aiohttp.ClientResponseError):
        detail = f"{exc.status}, {exc.message}"  # never from request_info
    else:
        try:
            detail = str(exc)
        except Exception:  # a str() that fails must not hide the failure it describes
            detail = ""
    said = f"{type(exc).__name__}: {detail[:SNIPPET]}".rstrip(": ")
    if isinstance(exc, _TLS_ERRORS):
        return TLSError(f"{what} failed: TLS: {said}")
    error = APIConnectionError(f"{what} failed: {said}")
    error.reached_server = not isinstance(exc, _NOT_SENT_ERRORS)
    return error


def _parse(payload: bytes, request_id: int) -> tuple[_Envelope | None, str | None]:
    """The envelope, and what makes it not a strict JSON-RPC 2.0 answer to the request
    ``request_id`` names (``None``: nothing)."""
    # Before decoding: how deep a decoder recurses, and so what it refuses, differs between
    # interpreters, and it skips unknown fields unseen.
    if json_deeper_than(payload, MAX_ANSWER_DEPTH):
        return None, f"the response is nested more than {MAX_ANSWER_DEPTH} levels deep"
    try:
        envelope = _ENVELOPE.decode(payload)
    except RecursionError:
        return None, f"the response is nested too deeply to decode (over {MAX_DEPTH} levels)"
    except _DECODE_ERRORS as exc:
        return None, f"the response is not a JSON-RPC 2.0 answer: {exc}"
    error, has_result = envelope.error, envelope.result is not msgspec.UNSET
    if error is not None and deeper_than(error.data, MAX_DEPTH):
        return None, f"error.data is nested more than {MAX_DEPTH} levels deep"
    if error is not None and has_result:
        return envelope, "the response has both result and error"
    if error is None and not has_result:
        return envelope, "the response has neither result nor error"
    # A result must carry the request's id; an error may carry null (JSON-RPC 2.0).
    if envelope.id != request_id and (error is None or envelope.id is not None):
        return envelope, f"response id {envelope.id} does not match request id {request_id}"
    return envelope, None


def decode_response(
    method: str,
    request_id: int,
    status: int,
    payload: bytes,
    headers: Mapping[str, str] | None = None,
    *,
    skill_id: str | None = None,
    dialect: Dialect = V03,
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
    ``dialect``, the one spoken, reads the result of ``method``.
    """
    answer: dict[str, Any] = {"headers": headers, "jsonrpc_id": request_id}

    def malformed(problem: str) -> MagisteriumError:
        error = MalformedResponseError(
            f"{method}: {problem}", status_code=status, body=body_snippet(payload)
        )
        return with_answer(error, status=status, **answer)

    envelope, problem = _parse(payload, request_id)
    error = envelope.error if envelope is not None else None
    if error is not None and (problem is None or status in (401, 403, 429)):
        raise error_for_status(
            status,
            error.message,
            code=error.code,
            data=error.data,
            method=method,
            skill_id=skill_id,
            **answer,
        )
    if status != 200:
        said = f"{method}: unexpected HTTP {status}"
        if status in (401, 403, 429):
            said = f"HTTP {status}"
        elif status == 407:
            said = (
                f"{method}: the proxy asks for credentials it was not given or refused "
                "(HTTP 407 Proxy Authentication Required): put them in the proxy's URL"
            )
        raise error_for_status(status, said, body=body_snippet(payload), **answer)
    if problem is not None or envelope is None:
        raise malformed(problem or "")
    assert isinstance(envelope.result, msgspec.Raw)  # an answer with no problem but a result
    try:
        decoded = dialect.decode(method, envelope.result)
    except RecursionError:
        decoded = None
    except _DECODE_ERRORS as exc:
        what = "a page of tasks" if method == "tasks/list" else "a Task"
        raise malformed(f"the result is not {what}: {exc}") from None
    except ValueError as exc:  # the dialect's "not what this method answers"
        raise malformed(str(exc)) from None
    # No value nests deeper than the body has brackets: most answers skip the walk.
    if decoded is not None and opening_brackets(payload) <= MAX_DEPTH:
        return decoded
    tasks = getattr(decoded, "tasks", [decoded])
    if decoded is None or any(task_deeper_than(task, MAX_DEPTH) for task in tasks):
        raise malformed(f"the result holds values nested more than {MAX_DEPTH} levels deep")
    return decoded


class JSONRPCClient:
    """The JSON-RPC client of one endpoint over an :class:`HTTPTransport`: one request per
    :meth:`rpc`, its answer mapped to a result or an error.

    Arguments:
        base_url: the endpoint requests go to (unless their dialect names another).
        token: the token of a request that names none (``None``: none is sent).
        http: the transport: the real one bounds each exchange on its sockets (aiohttp's
            timeout, in real time); any other (an in-memory one) is bounded here, on
            ``clock``, so a virtual-time test sees the same timeouts.
        max_response_bytes: the largest answer read, decompressed.
        clock: the client's.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        http: HTTPTransport,
        *,
        max_response_bytes: int,
        clock: Clock,
    ) -> None:
        self.base_url = base_url
        self.http = http
        self._max_response_bytes = max_response_bytes
        self._clock = clock
        self._bound_here = not isinstance(http, AiohttpTransport)
        self._ids = itertools.count(1)
        self._token = token

    async def _exchange(
        self, method: str, url: str, headers: Any, body: bytes | None, timeout: float, what: str
    ) -> tuple[int, Mapping[str, str], bytes]:
        request = HTTPRequest(method, url, headers, body, timeout, self._max_response_bytes, what)
        try:
            if self._bound_here:
                exchange = self.http.send(request)
                return await within(self._clock, timeout, exchange, asyncio.TimeoutError)
            return await self.http.send(request)
        except _NETWORK_ERRORS as exc:
            failure = _network_error(what, timeout, exc)
        # aiohttp's exceptions carry the request's headers, the token among them.
        raise_alone(failure)

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
        """Send one JSON-RPC request and return what it answers (a Task, a page of
        tasks), or raise.

        ``method`` names the operation by its A2A 0.3 method and ``params`` are as built
        for 0.3; ``dialect``, the one spoken, names the method and writes the params as its
        wire does, may name another endpoint and adds its headers. ``token`` replaces the
        client's own for this request; ``skill_id`` (the skill a ``message/send`` names)
        goes into the errors it meets.
        """
        request_id = next(self._ids)
        name, params = dialect.method(method), dialect.params(params)
        body = _ENCODER.encode(
            {"jsonrpc": "2.0", "id": request_id, "method": name, "params": params}
        )
        headers = {"Content-Type": "application/json", **_HEADERS, **dialect.headers}
        token = token or self._token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        url = dialect.url or self.base_url
        try:
            status, answer_headers, payload = await self._exchange(
                "POST", url, with_trace_context(headers), body, timeout, method
            )
        except APIResponseError as error:  # the body could not be read (too large, corrupt)
            with_answer(error, jsonrpc_id=request_id)
            raise
        return decode_response(
            method, request_id, status, payload, answer_headers, skill_id=skill_id, dialect=dialect
        )

    async def get(self, url: str, *, timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        """GET a public URL (no token sent): its status, headers and body; any status but
        200 is raised as its error."""
        what = f"GET {url}"
        headers = with_trace_context(_HEADERS)
        status, answer, body = await self._exchange("GET", url, headers, None, timeout, what)
        if status != 200:
            said = f"HTTP {status}" if status == 429 else f"unexpected HTTP {status}"
            raise error_for_status(
                status, f"{what}: {said}", headers=answer, body=body_snippet(body)
            )
        return status, answer, body

    async def aclose(self) -> None:
        """Close the HTTP transport; this one cannot be used afterwards."""
        await self.http.aclose()
