"""The agent card: where it lives (the well-known paths), reading it and keeping it
(:class:`CardReader`). How one GET is retried and bounded, and which dialect a card makes
the client speak, are the call's (``_call``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import msgspec

from magisterium_async._clock import Clock
from magisterium_async._config import ProtocolVersion
from magisterium_async._errors import MalformedResponseError, UnexpectedStatusError
from magisterium_async._http._base import body_snippet
from magisterium_async._models import MAX_ANSWER_DEPTH, AgentCard, json_deeper_than

_DECODER = msgspec.json.Decoder(AgentCard)
_MAX_AGE = re.compile(r"max-age=\s*\"?([0-9]+)")
# RFC 9111 5.2.1: a delta-seconds too large to represent is taken as 2**31.
_MAX_AGE_CAP = 2**31
# The well-known card paths: A2A 0.2's (the service's, 0.2.6), then 0.3's and 1.0's;
# a client of 1.0 tries its own first (why: ``docs/protocol-versions.md``).
_PATHS = ("/.well-known/agent.json", "/.well-known/agent-card.json")


def max_age(cache_control: str | None) -> float:
    """Seconds the card may be kept: ``Cache-Control: max-age``, else for ever."""
    match = _MAX_AGE.search(cache_control or "")
    if match is None:
        return float("inf")
    digits = match.group(1)
    return float(_MAX_AGE_CAP if len(digits) > 10 else min(int(digits), _MAX_AGE_CAP))


class CardReader:
    """The card of one endpoint, read when asked (the well-known paths in turn, the next
    after a 404, then the URL that answered), kept for its ``Cache-Control: max-age``, else
    for the client's life.

    Arguments:
        base_url: the endpoint whose origin serves the card.
        get: one GET of a URL, retried and bounded as its owner retries (an error for
            any status but 200).
        clock: where freshness is read.
        on_card: told of each card read (the telemetry's agent name and version).
        protocol: the client's: the well-known paths are tried in its order.
    """

    def __init__(
        self,
        base_url: str,
        get: Callable[[str], Awaitable[tuple[int, Mapping[str, str], bytes]]],
        clock: Clock,
        on_card: Callable[[AgentCard], None],
        protocol: ProtocolVersion,
    ) -> None:
        parts = urlsplit(base_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        paths = _PATHS[::-1] if protocol == "1.0" else _PATHS
        self._candidates = [origin + path for path in paths]
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

    async def read(self) -> AgentCard:
        """The card: the kept one while it is fresh, else read (trying the next path after
        a 404), decoded and kept for its ``max-age``."""
        async with self._lock:
            card, now = self._card, self._clock.now()
            if card is None or now >= self._expires:
                card = await self._discover(now)
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
        why = f"it is nested too deeply (more than {MAX_ANSWER_DEPTH} levels)"
        try:
            if not json_deeper_than(body, MAX_ANSWER_DEPTH):
                self._card = _DECODER.decode(body)
                self._url, self._expires = url, now + max_age(headers.get("Cache-Control"))
                return self._card
        except RecursionError:
            pass  # a recursion limit set lower than the bound: the same answer
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            why = str(exc)
        raise MalformedResponseError(
            f"agent card: not an A2A agent card: {why}", status_code=status, body=body_snippet(body)
        )
