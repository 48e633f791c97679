"""The agent card: where it lives, reading it, and keeping it as long as it may be kept.

Owns agent-card discovery (``/.well-known/agent.json``, then A2A 0.3's
``/.well-known/agent-card.json`` after a 404; the URL that answered is used from then on),
its decoding, and its cache (``Cache-Control: max-age``, else the client's life). How one
GET is retried and bounded in time is the client's (its retry policy and deadline).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec

from magisterium_async._errors import (
    MalformedResponseError,
    UnexpectedStatusError,
    error_for_status,
)
from magisterium_async._http._base import body_snippet
from magisterium_async._http._jsonrpc import Transport
from magisterium_async._models import MAX_ANSWER_DEPTH, AgentCard, json_deeper_than

__all__ = ["AgentCardCache", "get_card"]

_DECODER = msgspec.json.Decoder(AgentCard)
_MAX_AGE = re.compile(r"max-age=\s*\"?([0-9]+)")
# RFC 9111 5.2.1: a delta-seconds too large to represent is taken as 2**31.
_MAX_AGE_CAP = 2**31
_PATHS = ("/.well-known/agent.json", "/.well-known/agent-card.json")

Answer = tuple[int, Any, bytes]
"""An HTTP answer: status, headers, body."""


async def get_card(transport: Transport, url: str, *, timeout: float) -> Answer:
    """One GET of the card at ``url``; any status but 200 is raised as its error."""
    status, headers, body = await transport.get(url, timeout=timeout)
    if status != 200:
        what = f"HTTP {status}" if status == 429 else f"unexpected HTTP {status}"
        raise error_for_status(
            status, f"GET {url}: {what}", headers=headers, body=body_snippet(body)
        )
    return status, headers, body


class AgentCardCache:
    """The card of one endpoint, the URL that served it, and until when it may be kept."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self._candidates = [f"{parts.scheme}://{parts.netloc}{path}" for path in _PATHS]
        self._url: str | None = None
        self._card: AgentCard | None = None
        self._expires = 0.0

    @property
    def url(self) -> str:
        """The URL that answered, else the first one to try."""
        return self._url or self._candidates[0]

    def cached(self, now: float) -> AgentCard | None:
        """The card, if one is kept and still fresh at ``now``."""
        return self._card if self._card is not None and now < self._expires else None

    async def discover(self, get: Callable[[str], Awaitable[Answer]], now: float) -> AgentCard:
        """Read the card with ``get`` (a GET, retried as the client retries), trying the
        next path after a 404; decode it and keep it from ``now`` for its ``max-age``."""
        urls = [self._url] if self._url is not None else self._candidates
        for i, url in enumerate(urls):
            try:
                status, headers, body = await get(url)
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
