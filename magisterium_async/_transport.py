"""HTTP and the JSON-RPC envelope: one aiohttp session per client, every answer mapped.

The transport sends one request and turns whatever comes back into a :class:`Task` or a
:class:`MagisteriumError`; it never retries (the client does) and never raises a raw
aiohttp, JSON or msgspec exception.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import itertools
import logging
import platform
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import msgspec

from . import _version
from ._errors import (
    APIConnectionError,
    APITimeoutError,
    ClientClosedError,
    MalformedResponseError,
    UnexpectedStatusError,
    error_from_jsonrpc,
)
from ._models import Task

__all__ = [
    "CLOSED_MESSAGE",
    "ClientState",
    "Transport",
    "body_snippet",
    "check_base_url",
    "decode_response",
]

logger = logging.getLogger("magisterium_async")

_USER_AGENT = (
    f"magisterium-async/{_version.__version__} "
    f"python/{platform.python_version()} aiohttp/{aiohttp.__version__}"
)
_SNIPPET = 500
CLOSED_MESSAGE = "the client is closed; create a new AsyncMagisterium"


class ClientState(enum.Enum):
    """Where a client is in its life: a closed client cannot be reopened."""

    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


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
    """The answer we expect: decoded with its Task in one pass."""

    jsonrpc: Any = None
    id: Any = None
    result: Task | msgspec.UnsetType = msgspec.UNSET
    error: _ErrorObject | None = None


class _RawEnvelope(msgspec.Struct):
    """Any JSON-RPC answer, the result left undecoded: to say what is wrong with one."""

    jsonrpc: Any = None
    id: Any = None
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: _ErrorObject | None = None


_ENCODER = msgspec.json.Encoder()
_ENVELOPE_DECODER = msgspec.json.Decoder(_Envelope)
_RAW_ENVELOPE_DECODER = msgspec.json.Decoder(_RawEnvelope)
_TASK_DECODER = msgspec.json.Decoder(Task)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> str:
    """``url`` if it is safe to send the bearer token to, else ``ValueError``.

    Only ``https://`` is accepted, but for loopback hosts (the emulator), where
    ``http://`` is fine: anywhere else the token would travel in clear.
    """
    if not isinstance(url, str):
        raise TypeError(f"base_url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host, got {url!r}")
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; pass token= instead")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(
            f"base_url {url!r} uses plain http:// to a non-loopback host; the bearer token "
            "would travel in clear. Use https://"
        )
    return url


def body_snippet(payload: bytes) -> str:
    return payload[:_SNIPPET].decode("utf-8", "replace")


def _network_error(what: str, timeout: float, exc: BaseException) -> APIConnectionError:
    # TimeoutError first: it is an OSError too, and aiohttp's timeouts are ClientErrors too.
    if isinstance(exc, asyncio.TimeoutError):
        return APITimeoutError(f"{what} timed out after {timeout:g} s")
    return APIConnectionError(f"{what} failed: {type(exc).__name__}: {exc}")


_NETWORK_ERRORS = (asyncio.TimeoutError, aiohttp.ClientError, OSError)


def decode_response(
    method: str, request_id: int, status: int, payload: bytes, headers: Any = None
) -> Task:
    """Map one HTTP answer to the :class:`Task` it carries, or raise the error it means."""
    try:
        envelope: _Envelope | _RawEnvelope | None = _ENVELOPE_DECODER.decode(payload)
    except _DECODE_ERRORS:
        # Not an envelope holding a Task: decode again, leniently, to say what it is.
        try:
            envelope = _RAW_ENVELOPE_DECODER.decode(payload)
        except _DECODE_ERRORS:
            envelope = None
    result = _checked_result(method, request_id, status, payload, headers, envelope)
    if isinstance(result, Task):
        return result
    try:
        return _TASK_DECODER.decode(result)
    except _DECODE_ERRORS as exc:
        raise MalformedResponseError(
            f"{method}: the result is not a Task: {exc}", status=status, body=body_snippet(payload)
        ) from None


def _checked_result(
    method: str,
    request_id: int,
    status: int,
    payload: bytes,
    headers: Any,
    envelope: _Envelope | _RawEnvelope | None,
) -> Task | msgspec.Raw:
    """The envelope's result if the answer is a success for this request, else raise."""
    if envelope is not None and envelope.error is not None:
        err = envelope.error
        raise error_from_jsonrpc(
            err.code, err.message, err.data, status=status, method=method, headers=headers
        )
    if status in (401, 403, 429):
        raise error_from_jsonrpc(
            None, f"HTTP {status}", None, status=status, method=method, headers=headers
        )
    if status != 200:
        raise UnexpectedStatusError(
            f"{method}: unexpected HTTP {status}", status=status, body=body_snippet(payload)
        )
    if envelope is None:
        raise MalformedResponseError(
            f"{method}: the response is not a JSON-RPC object",
            status=status,
            body=body_snippet(payload),
        )
    if envelope.id != request_id or isinstance(envelope.id, bool):
        raise MalformedResponseError(
            f"{method}: response id {envelope.id!r} does not match request id {request_id}",
            status=status,
            body=body_snippet(payload),
        )
    if isinstance(envelope.result, msgspec.UnsetType):
        raise MalformedResponseError(
            f"{method}: the response has neither result nor error",
            status=status,
            body=body_snippet(payload),
        )
    return envelope.result


def _rpc_headers(token: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": _USER_AGENT,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class Transport:
    """One aiohttp session to one endpoint, opened lazily inside the running loop."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        max_concurrency: int,
        connect_timeout: float,
        trace_configs: Sequence[aiohttp.TraceConfig] = (),
    ) -> None:
        self._url = base_url
        self._token = token
        self._rpc_headers = _rpc_headers(token)
        self._get_headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._max_concurrency = max_concurrency
        self._connect_timeout = connect_timeout
        self._trace_configs = list(trace_configs)
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None
        self.state = ClientState.UNOPENED

    def __repr__(self) -> str:
        return f"<Transport {self._url} {self.state.value}>"

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self.state is ClientState.CLOSED:
            raise ClientClosedError(CLOSED_MESSAGE)
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_concurrency, limit_per_host=self._max_concurrency
            )
            self._session = aiohttp.ClientSession(
                connector=connector, trace_configs=self._trace_configs or None
            )
            self.state = ClientState.OPENED
        return self._session

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        # A client uses a few values (one per pool): build each once, not per request.
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(
                total=seconds, sock_connect=min(seconds, self._connect_timeout)
            )
            self._timeouts[seconds] = timeout
        return timeout

    def _headers_for(self, token: str) -> dict[str, str]:
        # The token changes once an hour at most: rebuild the headers only then.
        if token != self._token:
            self._token = token
            self._rpc_headers = _rpc_headers(token)
        return self._rpc_headers

    async def rpc(
        self, method: str, params: Any, *, timeout: float, token: str | None = None
    ) -> Task:
        """Send one JSON-RPC request and return the Task it answers, or raise.

        ``token`` replaces the transport's own for this request and the next ones.
        """
        session = self._ensure_session()
        request_id = next(self._ids)
        body = _ENCODER.encode(_Request("2.0", request_id, method, params))
        rpc_headers = self._rpc_headers if token is None else self._headers_for(token)
        logger.debug("POST %s method=%s id=%d", self._url, method, request_id)
        try:
            async with session.post(
                self._url,
                data=body,
                headers=rpc_headers,
                allow_redirects=False,
                timeout=self._timeout(timeout),
            ) as response:
                payload = await response.read()
                status, headers = response.status, response.headers
        except _NETWORK_ERRORS as exc:
            raise _network_error(method, timeout, exc) from exc
        return decode_response(method, request_id, status, payload, headers)

    async def get(self, url: str, *, timeout: float) -> tuple[int, Any, bytes]:
        """GET a public URL (no token sent); the status, headers and body."""
        session = self._ensure_session()
        logger.debug("GET %s", url)
        try:
            async with session.get(
                url,
                headers=self._get_headers,
                allow_redirects=False,
                timeout=self._timeout(timeout),
            ) as response:
                return response.status, response.headers, await response.read()
        except _NETWORK_ERRORS as exc:
            raise _network_error(f"GET {url}", timeout, exc) from exc

    async def aclose(self) -> None:
        """Close the session; the transport cannot be used afterwards."""
        self.state = ClientState.CLOSED
        session, self._session = self._session, None
        if session is not None:
            await session.close()
