"""HTTP, the client's one seam to the network: a request goes out, a bounded body comes back.

:class:`HTTPTransport` is what the JSON-RPC layer needs of HTTP; :class:`AiohttpTransport`
is the real one and ``magisterium_async.testing.MockTransport`` the in-memory one. Both
bound the body with :func:`read_body`, which inflates it itself, so ``max_response_bytes``
bounds the decompressed size and the memory of every answer, whatever aiohttp's version.

Each request goes through the proxy :class:`Proxies` names for its URL (``docs/network.md``).
aiohttp's own ``trust_env`` is not used: it would also read ``~/.netrc`` and put its Basic
credentials in place of the bearer token. A proxy's credentials stay in its URL, which
aiohttp sends to the proxy alone; every text made here shows its password as ``***``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import re
import urllib.request
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

import aiohttp

from magisterium_async._errors import MalformedResponseError, ResponseTooLargeError, masked_url

ACCEPT_ENCODING = "gzip, deflate"
"""What the client accepts: the encodings :func:`read_body` inflates within its bound."""

_CHUNK = 64 * 1024
_INFLATE_STEP = 256 * 1024  # decoded bytes per zlib call: bounds the temporary copies
SNIPPET = 500
"""How much of an answer's body, or of a failure's text, an error quotes."""
_DIGITS = re.compile(r"[0-9]{1,19}")


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> str:
    """``url`` (without a trailing slash) if it is safe to send the bearer token to, else
    ``ValueError``.

    Only ``https://`` is accepted, but for loopback hosts (the emulator), where
    ``http://`` is fine: anywhere else the token would travel in clear.
    """
    if not isinstance(url, str):
        raise TypeError(f"base_url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - read for its check: a port out of range raises here
    except ValueError:
        raise ValueError(f"base_url has no valid port (0 to 65535), got {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host, got {url!r}")
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; pass token= instead")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(
            f"base_url {url!r} uses plain http:// to a non-loopback host; the bearer token "
            "would travel in clear. Use https://"
        )
    if len(parts.path) > 1 and parts.path.endswith("/"):
        # ".../api/v1/a2a/" is a 404 from the service: the endpoint has no trailing slash.
        return parts._replace(path=parts.path.rstrip("/") or "/").geturl()
    return url


def body_snippet(payload: bytes) -> str:
    """The start of a body, as text, for an error to quote."""
    return payload[:SNIPPET].decode("utf-8", "replace")


def _proxy_url(url: object, where: str) -> str:
    """``url`` as aiohttp takes a proxy (``"proxy:3128"`` read as ``http://``, as curl and
    requests read it), or ``ValueError`` naming ``where``."""
    if not isinstance(url, str):
        raise TypeError(f"proxy must be a str URL, not {type(url).__name__}")
    text = url.strip()
    if text and "://" not in text:
        text = f"http://{text}"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - read for its check
    except ValueError:
        raise ValueError(f"{where} {masked_url(text)!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{where} {masked_url(text)!r}: give an http:// or https:// proxy URL with a host "
            "(SOCKS proxies are not supported)"
        )
    return text


class Proxies:
    """The proxy for each URL: ``proxy`` for every one, else (with ``trust_env``) the
    environment's, read once, as requests and httpx read it: ``HTTPS_PROXY`` /
    ``HTTP_PROXY`` for URLs of that scheme unless ``NO_PROXY`` names the host (no host
    bypasses a proxy implicitly, loopback ones included; ``HTTP_PROXY`` is ignored under
    CGI, where it is a request header)."""

    def __init__(self, proxy: str | None = None, *, trust_env: bool = True) -> None:
        environment: dict[str, str] = {}
        if proxy is not None:
            self._by_scheme = dict.fromkeys(("http", "https"), _proxy_url(proxy, "proxy"))
        else:
            environment = urllib.request.getproxies_environment() if trust_env else {}
            self._by_scheme = {
                scheme: _proxy_url(environment[scheme], f"${scheme.upper()}_PROXY")
                for scheme in ("http", "https")
                if environment.get(scheme)
            }
        self._environment = environment

    def for_url(self, url: str) -> str | None:
        """The proxy a request to ``url`` goes through, or ``None``: straight there."""
        parts = urlsplit(url)
        chosen = self._by_scheme.get(parts.scheme)
        if chosen is None or not self._environment:
            return chosen
        # Documented in urllib.request's source, not in its stubs.
        check = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
        return None if check(parts.netloc.rpartition("@")[2], self._environment) else chosen


class HTTPRequest(NamedTuple):
    """One request, as the client hands it to its :class:`HTTPTransport`."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None
    timeout: float
    """Seconds the exchange may take: the real transport bounds its sockets with it; the
    client bounds any other transport on its own clock."""
    limit: int
    """The largest body to read, decompressed (``max_response_bytes``): for :func:`read_body`."""
    what: str
    """What the request is for (the JSON-RPC method, ``GET url``), to name it in errors."""


class HTTPTransport(Protocol):
    """What the client needs of HTTP: send one request, stream its answer, close."""

    async def send(self, request: HTTPRequest) -> tuple[int, Mapping[str, str], bytes]:
        """Send ``request``; its status, headers and body, read by :func:`read_body`.

        Network failures raise ``OSError``, ``TimeoutError`` or ``aiohttp.ClientError``.
        Redirects are never followed.
        """

    async def aclose(self) -> None:
        """Release connections; no request is made afterwards."""


class AiohttpTransport:
    """The real HTTP: one aiohttp session, opened lazily inside the running loop.

    Each request is bounded by aiohttp's own timeout, exact (``ceil_threshold=math.inf``:
    aiohttp would otherwise round deadlines of 5 s or more up to the next whole second);
    connecting is bounded by ``connect_timeout`` as well. Each request goes through the
    proxy ``proxies`` names for its URL (default: the environment's).
    """

    def __init__(
        self,
        *,
        max_concurrency: int,
        connect_timeout: float,
        trace_configs: Sequence[aiohttp.TraceConfig] = (),
        proxies: Proxies | None = None,
    ) -> None:
        self._max_concurrency = max_concurrency
        self._proxies = proxies if proxies is not None else Proxies()
        self._connect_timeout = connect_timeout
        self._trace_configs = list(trace_configs)
        self._session: aiohttp.ClientSession | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    async def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_concurrency,  # one host: no cap per host to keep as well
                timeout_ceil_threshold=math.inf,
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                trace_configs=self._trace_configs or None,
                auto_decompress=False,  # read_body inflates, within max_response_bytes
            )
            closer = self._closer = self._closed_with_its_loop(session)
            await closer.__anext__()  # reaches its ``yield`` at once
        return self._session

    async def _closed_with_its_loop(
        self, session: aiohttp.ClientSession
    ) -> AsyncGenerator[None, None]:
        """Suspended while ``session`` is open; it closes the session when closed itself:
        by :meth:`aclose`, or by ``asyncio.run()`` as its loop ends (it closes every async
        generator still suspended before it closes the loop). So a client never closed in
        that loop still closes its connections in it, instead of leaking them with it."""
        loop = asyncio.get_running_loop()  # the session's
        try:
            yield
        finally:
            if self._session is session:
                self._session = None
            if loop is asyncio.get_running_loop():
                await session.close()
            else:
                session.detach()  # its loop has ended, and its connections with it

    def timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        """The aiohttp timeout of a request given ``seconds``: the whole exchange, and
        connecting within ``connect_timeout`` too; exact."""
        return aiohttp.ClientTimeout(
            total=None if math.isinf(seconds) else seconds,
            sock_connect=min(seconds, self._connect_timeout),
            ceil_threshold=math.inf,
        )

    async def send(self, request: HTTPRequest) -> tuple[int, Mapping[str, str], bytes]:
        """Send one request through the session, within its timeout."""
        session = await self._ensure_session()
        async with session.request(
            request.method,
            request.url,
            data=request.body,
            headers=request.headers,
            allow_redirects=False,
            timeout=self.timeout(request.timeout),
            proxy=self._proxies.for_url(request.url),
        ) as response:
            status, headers = response.status, response.headers
            chunks = response.content.iter_chunked(_CHUNK)
            body = await read_body(status, headers, chunks, limit=request.limit, what=request.what)
            return status, headers, body

    async def aclose(self) -> None:
        """Close the session."""
        closer, self._closer = self._closer, None
        if closer is not None:
            await closer.aclose()


class _Inflater:
    """Incremental gzip / deflate decoding that never produces more than it is asked for."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._zlib: zlib._Decompress | None = None
        self._pending = b""

    def feed(self, data: bytes, out: bytearray, room: int) -> None:
        """Append to ``out`` up to ``room`` more decoded bytes from ``data`` (and the input
        left over before), a slice at a time, so no copy of the output is ever held."""
        data = self._pending + data
        self._pending = b""
        end = len(out) + room
        while data and len(out) < end:
            if self._zlib is None:
                wbits = zlib.MAX_WBITS + 16 if self._gzip else zlib.MAX_WBITS
                if not self._gzip and data[0] & 0x0F != 8:
                    wbits = -wbits  # "deflate" is zlib-wrapped by the RFC, raw from some servers
                self._zlib = zlib.decompressobj(wbits)
            out += self._zlib.decompress(data, min(end - len(out), _INFLATE_STEP))
            if not self._zlib.eof:
                data = self._zlib.unconsumed_tail
            elif self._gzip:
                data, self._zlib = self._zlib.unused_data, None  # another member may follow
            else:
                return  # trailing bytes after a deflate stream: ignored
        self._pending = data

    @property
    def complete(self) -> bool:
        return self._zlib is None or self._zlib.eof


def _too_large(what: str, limit: int, status: int, got: bytes | bytearray) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"{what}: the response is larger than max_response_bytes ({limit} bytes); reading "
        "stopped there. Pass a larger max_response_bytes= if answers this big are expected",
        limit=limit,
        status_code=status,
        body=body_snippet(bytes(got[:SNIPPET])),
    )


async def read_body(
    status: int,
    headers: Mapping[str, str],
    chunks: AsyncIterator[bytes],
    *,
    limit: int,
    what: str,
) -> bytes:
    """The decoded body of an answer (its ``status`` and ``headers``, the body's raw
    ``chunks`` as they arrive), or :class:`ResponseTooLargeError` once it passes ``limit``.

    Both the bytes on the wire and the decompressed bytes count against ``limit``; at most
    about ``limit`` plus one chunk is ever held. A body in an encoding the client did not
    ask for, or a corrupt compressed body, is a :class:`MalformedResponseError`.
    """
    declared = (headers.get("Content-Length") or "").strip()
    if _DIGITS.fullmatch(declared) and int(declared) > limit:
        raise _too_large(what, limit, status, b"")
    encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
        raise MalformedResponseError(
            f"{what}: the response has Content-Encoding {encoding[:40]!r}; the client asks "
            f"only for {ACCEPT_ENCODING}",
            status_code=status,
        )
    inflater = None if encoding == "identity" else _Inflater(encoding)
    body = bytearray()
    wire = 0
    why = "it ends before the compressed stream"
    try:
        async for chunk in chunks:
            wire += len(chunk)
            if inflater is None:
                body += chunk
            else:
                inflater.feed(chunk, body, limit + 1 - len(body))
            if wire > limit or len(body) > limit:
                raise _too_large(what, limit, status, body)
        # Nothing is left pending: input is held back only once the body passes the limit.
        if inflater is None or inflater.complete:
            return bytes(body)
    except zlib.error as exc:
        why = str(exc)
    raise MalformedResponseError(  # outside the except: no __context__
        f"{what}: the {encoding} body cannot be decoded: {why}", status_code=status
    )
