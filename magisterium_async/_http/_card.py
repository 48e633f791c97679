"""The agent card: where it lives, reading it, keeping it, and the dialect it makes us speak.

:class:`CardReader` owns agent-card discovery (the well-known path a server of the client's
protocol serves, then the other after a 404: see :func:`card_paths`; the URL that answered
is used from then on), its decoding, and its cache (``Cache-Control: max-age``, else the
client's life); how one GET is retried and bounded in time is handed to it (the call path's
retry loop).

:class:`Negotiation` holds the dialect a client speaks: fixed for ``protocol="0.3"`` /
``"1.0"``; for ``"auto"`` today's dialect until a card says otherwise. The card is read
only when it is asked for, or when a call is refused as "method not found" or "version
not supported" (then the call is sent once more if the card offers the other dialect), so
a server that speaks today's dialect costs no request more than before.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

import msgspec

from magisterium_async._clock import Clock
from magisterium_async._errors import (
    MagisteriumError,
    MalformedResponseError,
    MethodNotFoundError,
    UnexpectedStatusError,
    VersionNotSupportedError,
    error_for_status,
)
from magisterium_async._events import OnEvent, log_event, notice
from magisterium_async._http._base import body_snippet
from magisterium_async._http._dialect import PROTOCOLS, V03, V10, Dialect, ProtocolVersion, offered
from magisterium_async._http._jsonrpc import JSONRPCClient
from magisterium_async._models import MAX_ANSWER_DEPTH, AgentCard, json_deeper_than

__all__ = ["CardReader", "Negotiation", "card_paths", "get_card"]

_DECODER = msgspec.json.Decoder(AgentCard)
_MAX_AGE = re.compile(r"max-age=\s*\"?([0-9]+)")
# RFC 9111 5.2.1: a delta-seconds too large to represent is taken as 2**31.
_MAX_AGE_CAP = 2**31
AGENT_JSON = "/.well-known/agent.json"
"""A2A 0.2.x's well-known card path: the service's (0.2.6)."""
AGENT_CARD_JSON = "/.well-known/agent-card.json"
"""A2A 0.3.0's and 1.0's well-known card path (0.3.0 renamed it)."""


def card_paths(protocol: ProtocolVersion) -> tuple[str, str]:
    """The well-known paths a client of ``protocol`` tries for the card, in order: for
    ``"1.0"`` A2A 1.0's ``agent-card.json`` first (every 1.0 server serves it there; none
    need serve ``agent.json``); for ``"auto"`` and ``"0.3"`` the service's ``agent.json``
    first (the service speaks 0.2.6, the dialect ``"0.3"`` names; a2a-sdk 0.3's servers
    serve it there too, and an A2A 0.3 server that does not costs one 404, once)."""
    if protocol == "1.0":
        return (AGENT_CARD_JSON, AGENT_JSON)
    return (AGENT_JSON, AGENT_CARD_JSON)


async def get_card(
    rpc: JSONRPCClient, url: str, *, timeout: float
) -> tuple[int, Mapping[str, str], bytes]:
    """One GET of the card at ``url`` (no token: the card is public); any status but
    200 is raised as its error."""
    status, headers, body = await rpc.get(url, timeout=timeout)
    if status != 200:
        what = f"HTTP {status}" if status == 429 else f"unexpected HTTP {status}"
        raise error_for_status(
            status, f"GET {url}: {what}", headers=headers, body=body_snippet(body)
        )
    return status, headers, body


class CardReader:
    """The card of one endpoint, read when asked, kept as long as it may be kept.

    Arguments:
        base_url: the endpoint whose origin serves the card.
        get: one GET of a URL, retried and bounded as its owner retries (an error for
            any status but 200: :func:`get_card`, in the call path's retry loop).
        clock: where freshness is read.
        on_card: told of each card read (the telemetry's agent name and version).
        protocol: the client's: the well-known paths are tried in its order
            (:func:`card_paths`).
    """

    def __init__(
        self,
        base_url: str,
        get: Callable[[str], Awaitable[tuple[int, Mapping[str, str], bytes]]],
        clock: Clock,
        on_card: Callable[[AgentCard], None] = lambda card: None,
        protocol: ProtocolVersion = "auto",
    ) -> None:
        parts = urlsplit(base_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        self._candidates = [origin + path for path in card_paths(protocol)]
        self._get = get
        self._clock = clock
        self._on_card = on_card
        self._url: str | None = None
        self._card: AgentCard | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()  # one GET at a time: every caller waits for that one

    @property
    def url(self) -> str:
        """The URL that answered, else the first one to try."""
        return self._url or self._candidates[0]

    def _fresh(self) -> AgentCard | None:
        card = self._card
        return card if card is not None and self._clock.now() < self._expires else None

    async def read(self) -> AgentCard:
        """The card: the kept one while it is fresh, else read (trying the next path after
        a 404), decoded and kept for its ``max-age``."""
        card = self._fresh()
        if card is not None:
            return card
        async with self._lock:
            card = self._fresh()
            if card is None:
                card = await self._discover(self._clock.now())
                self._on_card(card)
        return card

    async def _discover(self, now: float) -> AgentCard:
        urls = [self._url] if self._url is not None else self._candidates
        for i, url in enumerate(urls):
            try:
                status, headers, body = await self._get(url)
            except UnexpectedStatusError as exc:
                if exc.status_code == 404 and i + 1 < len(urls):
                    continue
                if exc.status_code == 404 and len(urls) > 1:
                    exc.args = (f"{exc.args[0]} (also at {urls[0]})",)
                raise
            break
        card = _decode(status, body)
        self._url = url
        self._card, self._expires = card, now + max_age(headers.get("Cache-Control"))
        return card


def _decode(status: int, body: bytes) -> AgentCard:
    why = f"it is nested too deeply (more than {MAX_ANSWER_DEPTH} levels)"
    try:
        if not json_deeper_than(body, MAX_ANSWER_DEPTH):
            return _DECODER.decode(body)
    except RecursionError:
        pass  # a recursion limit set lower than the bound: the same answer
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        why = str(exc)
    raise MalformedResponseError(
        f"agent card: not an A2A agent card: {why}", status_code=status, body=body_snippet(body)
    )


def max_age(cache_control: str | None) -> float:
    """Seconds the card may be kept: ``Cache-Control: max-age``, else for ever."""
    match = _MAX_AGE.search(cache_control or "")
    if match is None:
        return float("inf")
    digits = match.group(1)
    return float(_MAX_AGE_CAP if len(digits) > 10 else min(int(digits), _MAX_AGE_CAP))


class Negotiation:
    """The dialect calls of one ``protocol`` speak, and when it changes (one per protocol
    a client or its views speak, all sharing the client's card).

    Arguments:
        protocol: ``"auto"``, ``"0.3"`` or ``"1.0"`` (what ``AsyncMagisterium`` takes).
        base_url: the client's endpoint (a card's interface elsewhere is not used).
        reader: the client's agent card.
        extensions: URIs of A2A extensions every request asks for.
        emit: where what it decides is told (the client's stream).
    """

    def __init__(
        self,
        protocol: ProtocolVersion,
        base_url: str,
        reader: CardReader,
        *,
        extensions: Sequence[str] = (),
        emit: OnEvent = log_event,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
        self.protocol: ProtocolVersion = protocol
        self.reader = reader
        self._base_url = base_url
        self._extensions = tuple(extensions)
        self._emit = emit
        self.dialect = (V10 if protocol == "1.0" else V03).with_extensions(extensions)

    async def card(self) -> AgentCard:
        """The agent card (the kept one while it is fresh); with ``"auto"``, the dialect
        it offers is spoken from now on."""
        card = await self.reader.read()
        if self.protocol == "auto":
            dialect = offered(card, self._base_url, self._emit).with_extensions(self._extensions)
            if dialect != self.dialect:
                said = f"agent card offers A2A {dialect.version}: speaking it"
                self._emit(notice("info", "transport", said))
            self.dialect = dialect
        return card

    async def switch_after(self, error: MagisteriumError, used: Dialect) -> Dialect | None:
        """The dialect a call sent in ``used`` and refused with ``error`` goes again in,
        or ``None``: with ``"auto"``, after "method not found" or "version not
        supported", when the card (the kept one while it is fresh) offers another. A card
        that cannot be read changes nothing: the error stands."""
        if self.protocol != "auto":
            return None
        if not isinstance(error, (MethodNotFoundError, VersionNotSupportedError)):
            return None
        if self.dialect == used:
            try:
                await self.card()
            except MagisteriumError as exc:
                said = f"agent card not read after {type(error).__name__}: {exc}"
                self._emit(notice("info", "transport", said))
                return None
        return self.dialect if self.dialect != used else None

    async def for_list(self) -> Dialect:
        """The dialect a ``tasks/list`` goes in; with ``"auto"``, when the one spoken has
        none, after reading the card (the kept one while it is fresh; its errors raised).
        Which may be one without it."""
        if self.protocol == "auto" and not self.dialect.offers_list:
            await self.card()
        return self.dialect
