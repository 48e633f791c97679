"""Connecting to Redis: the redis-py client every shared feature uses (the shared quota,
the shared sign-in), its errors, and how a token is named in keys.

``masked_url`` (from :mod:`._errors`) is what a message may show of a Redis URL.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from magisterium_async._config import REDIS_URL_ENV
from magisterium_async._errors import SharedQuotaError, masked_url

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["REDIS_URL_ENV", "connect", "masked_url", "redis_errors", "token_key"]

_INSTALL_HINT = "the shared quota needs redis-py: pip install 'magisterium-async[redis]'"


def connect(url: str, timeout: float) -> Redis:
    """A redis-py asyncio client for ``url``, every call bounded by ``timeout`` seconds."""
    try:
        from redis.asyncio import Redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise SharedQuotaError(_INSTALL_HINT) from None
    try:
        client: Redis = Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=False,
        )
    except ValueError as exc:
        raise SharedQuotaError(f"invalid Redis URL {masked_url(url)!r}: {exc}") from None
    return client


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis raises: its errors, the socket's, and timeouts."""
    from redis.exceptions import RedisError

    return (RedisError, OSError, asyncio.TimeoutError)


def token_key(token: str) -> str:
    """The part of every key that names the token: a hash, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]
