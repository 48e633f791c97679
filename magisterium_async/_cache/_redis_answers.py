"""Answers in Redis: one cache for every process and host that names the same server.

Each answer is one string key under :data:`PREFIX` (its key in braces: a hash tag), set
with the time it stays fresh as its TTL, so Redis drops it when it is stale. A process
about to ask the service for an answer claims it first (a key under :data:`CLAIMS`,
``SET NX`` with a TTL, holding a token of the client's own): the others wait for the
answer rather than send the same request, and go ahead themselves if the claim is given
up or runs out without one; only its owner gives a claim up. The
bound in bytes is the server's: give it a ``maxmemory`` and ``maxmemory-policy
allkeys-lru`` (or ``volatile-lru``) and it evicts the least recently used answers itself. The
same server may hold the shared quota: their keys do not meet.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from magisterium_async._cache._memory import StoreUnavailable
from magisterium_async._errors import CacheError
from magisterium_async._redis import Connection, RedisUnavailable, connect, describe

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["CLAIMS", "PREFIX", "TIMEOUT", "RedisAnswers"]

PREFIX = "magisterium:cache:"
CLAIMS = "magisterium:cache-claim:"
TIMEOUT = 1.0
"""Seconds one Redis command may take: a cache slower than that is worth less than the
request it would save, so the call goes to the service instead."""


# KEYS: the answer, its claim. ARGV: the answer, its time to live (ms).
_PUT = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
return 1
"""

# KEYS: the answer, its claim. ARGV: the claim's time to live (ms), its owner. Returns
# {0, answer} when there is one, else {1} when the claim is the owner's (new, or its own
# renewed: the rest of a call whose first step did not hear the reply), else {0}.
_CLAIM = """
local answer = redis.call('GET', KEYS[1])
if answer then return {0, answer} end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[1]) then return {1} end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
  return {1}
end
return {0}
"""

# KEYS: a claim. ARGV: its owner. Deleted only if it is still the owner's.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _answer(key: str) -> str:
    return f"{PREFIX}{{{key}}}"


def _claim(key: str) -> str:
    return f"{CLAIMS}{{{key}}}"


class RedisAnswers:
    """Answers in Redis, at ``url`` (any form :mod:`magisterium_async._redis` takes: a
    URL, or a redis-py asyncio client the application owns and closes).

    An answer's key and its claim's share a hash tag (the answer's key), so on a Cluster
    both are in one slot and the steps that touch both stay atomic.

    Besides a store's ``get`` and ``put`` it shares calls in flight between hosts: a call
    about to ask the service *claims* the key (:meth:`claim`), and calls elsewhere wait
    for its answer (:meth:`peek`) instead of sending the same request.

    Arguments:
        url: the server; its password (if any) never appears in a message.
        redis: a redis-py asyncio client to use instead of connecting, ours to close
            (tests: fakeredis).
    """

    def __init__(self, url: str | Any, *, redis: Redis | None = None) -> None:
        if redis is not None:
            self._connection = Connection(
                redis,
                owned=True,
                where=describe(url),
                timeout=TIMEOUT,
                error=CacheError,
                what="the cache",
            )
        else:
            self._connection = connect(url, TIMEOUT, CacheError, "the cache")
        self._where = self._connection.where
        self._redis: Any = self._connection.client
        # Scripts, not MULTI: atomic on one Redis and on a Cluster alike (both keys share
        # a hash tag), where redis-py's transactional pipeline is not safe to mix with
        # the application's own commands on a client it shares.
        self._put = self._redis.register_script(_PUT)
        self._claim = self._redis.register_script(_CLAIM)
        self._release = self._redis.register_script(_RELEASE)

    def __repr__(self) -> str:
        return f"RedisAnswers({self._where!r})"

    @property
    def where(self) -> str:
        return self._where

    @property
    def entries(self) -> None:
        return None  # counting keys under a prefix takes a SCAN of the whole server

    async def get(self, key: str, now: float) -> bytes | None:
        value: Any = await self._step(self._redis.get(_answer(key)))
        return None if value is None else bytes(value)

    async def put(self, key: str, value: bytes, expires: float, now: float) -> None:
        """Keep ``value`` under ``key`` until ``expires`` (its TTL), giving up the key's
        claim with it."""
        milliseconds = math.ceil((expires - now) * 1000)
        if milliseconds <= 0:
            await self._step(self._redis.delete(_claim(key)))
            return
        keys = [_answer(key), _claim(key)]
        await self._step(self._put(keys=keys, args=[value, milliseconds]))

    async def claim(self, key: str, seconds: float, owner: str) -> tuple[bytes | None, bool]:
        """The bytes under ``key`` if there are some now; else claim ``key`` for
        ``seconds`` under ``owner`` (a token of the claimant's own): ``True`` if no one
        else held it (a claim of ``owner``'s own is renewed: then send, and :meth:`put` or
        :meth:`release`), ``False`` if someone does (wait for it). In one step, so an
        answer that lands just before the claim is never asked for again."""
        milliseconds = max(1, math.ceil(seconds * 1000))
        keys, args = [_answer(key), _claim(key)], [milliseconds, owner]
        reply = await self._step(self._claim(keys=keys, args=args))
        if len(reply) > 1:
            return bytes(reply[1]), False
        return None, bool(reply[0])

    async def peek(self, key: str, now: float) -> tuple[bytes | None, bool]:
        """The bytes under ``key`` (or ``None``), and whether someone holds its claim."""
        value, claim = await self._step(self._redis.mget(_answer(key), _claim(key)))
        return (None if value is None else bytes(value)), claim is not None

    async def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key`` without an answer to keep; a claim someone
        else holds now is left alone."""
        await self._step(self._release(keys=[_claim(key)], args=[owner]))

    async def aclose(self) -> None:
        await self._connection.aclose()

    async def _step(self, step: Any) -> Any:
        """``step``, within :data:`TIMEOUT`: a Redis that refused is a :class:`CacheError`
        (a misconfiguration, said, not bypassed); one that did not answer is
        :class:`StoreUnavailable` (the cache is bypassed for a while)."""
        try:
            return await self._connection.run(step)
        except RedisUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
