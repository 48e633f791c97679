"""Answers in Redis: one cache for every process and host that names the same server.

Each answer is one string key under :data:`PREFIX`, set with the time it stays fresh as
its TTL, so Redis drops it when it is stale. A process about to ask the service for an
answer claims it first (a key under :data:`CLAIMS`, ``SET NX`` with a TTL): the others
wait for the answer rather than send the same request, and go ahead themselves if the
claim is given up or runs out without one. The bound in bytes is the server's: give it
a ``maxmemory`` and ``maxmemory-policy allkeys-lru`` (or ``volatile-lru``) and it evicts
the least recently used answers itself. The same server may hold the shared quota: their
keys do not meet.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from magisterium_async._cache._store import StoreUnavailable
from magisterium_async._errors import CacheError, SharedQuotaError
from magisterium_async._redis import connect, masked_url, redis_errors

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["CLAIMS", "PREFIX", "TIMEOUT", "RedisStore"]

PREFIX = "magisterium:cache:"
CLAIMS = "magisterium:cache-claim:"
TIMEOUT = 1.0
"""Seconds one Redis command may take: a cache slower than that is worth less than the
request it would save, so the call goes to the service instead."""


class RedisStore:
    """Answers in Redis, at ``url`` (``redis://``, ``rediss://``, ``unix://``).

    Arguments:
        url: the server; its password (if any) never appears in a message.
        redis: a redis-py asyncio client to use instead of connecting (tests: fakeredis).
    """

    shared = True

    def __init__(self, url: str, *, redis: Redis | None = None) -> None:
        self._url = url
        self._password = urlsplit(url).password
        self._where = masked_url(url)
        if redis is None:
            try:
                import redis as _redis_py  # noqa: F401
            except ImportError:
                raise CacheError(
                    "a Redis cache needs redis-py: pip install 'magisterium-async[redis]'"
                ) from None
            try:
                redis = connect(url, TIMEOUT)
            except SharedQuotaError as exc:
                raise CacheError(f"cache: {self._masked(str(exc))}") from None
        self._redis: Redis = redis

    def __repr__(self) -> str:
        return f"RedisStore({self._where!r})"

    @property
    def where(self) -> str:
        return self._where

    @property
    def entries(self) -> None:
        return None  # counting keys under a prefix takes a SCAN of the whole server

    async def get(self, key: str, now: float) -> bytes | None:
        value: Any = await self._step(self._redis.get(PREFIX + key))
        return None if value is None else bytes(value)

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        milliseconds = math.ceil((expires - now) * 1000)
        if milliseconds <= 0:
            await self.release(key)
            return
        steps = self._redis.pipeline(transaction=True)
        steps.set(PREFIX + key, value, px=milliseconds)
        steps.delete(CLAIMS + key)
        await self._step(steps.execute())

    async def claim(self, key: str, seconds: float) -> tuple[bytes | None, bool]:
        milliseconds = max(1, math.ceil(seconds * 1000))
        steps = self._redis.pipeline(transaction=True)
        steps.get(PREFIX + key)
        steps.set(CLAIMS + key, b"1", nx=True, px=milliseconds)
        value, taken = await self._step(steps.execute())
        if value is not None:
            if taken:
                await self.release(key)
            return bytes(value), False
        return None, bool(taken)

    async def peek(self, key: str, now: float) -> tuple[bytes | None, bool]:
        value, claim = await self._step(self._redis.mget(PREFIX + key, CLAIMS + key))
        return (None if value is None else bytes(value)), claim is not None

    async def release(self, key: str) -> None:
        await self._step(self._redis.delete(CLAIMS + key))

    async def aclose(self) -> None:
        try:
            await self._redis.aclose()
        except redis_errors():
            pass  # closing a connection that is already gone

    def _masked(self, text: str) -> str:
        text = text.replace(self._url, self._where)
        return text.replace(self._password, "***") if self._password else text

    async def _step(self, step: Any) -> Any:
        try:
            return await asyncio.wait_for(step, TIMEOUT)
        except redis_errors() as exc:
            reason = self._masked(str(exc)) or type(exc).__name__
            raise StoreUnavailable(f"{type(exc).__name__}: {reason}") from None
