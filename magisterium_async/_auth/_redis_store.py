"""The sign-in kept in Redis, shared by every process on every host that names the URL.

``credentials="redis://host:6379/0"`` (or ``rediss://``, or ``$MAGISTERIUM_CREDENTIALS``):
the sign-in ``magisterium-async login --credentials URL`` stored there is used and
refreshed by all of them, one refresh at a time. Keys (``H`` = the first 16 hex digits of
the SHA-256 of the issuer -- the service's origin, which discovery requires it to be --
and this client's name; never of a token)::

    magisterium:signin:{H}        hash: ``credentials`` (the JSON of a credentials file)
                                  and ``fence`` (a digest of its tokens)
    magisterium:signin:{H}:lock   redis-py's lock, held while one process refreshes

A refresh takes the lock (a lease of :data:`LEASE` seconds, longer than a refresh may
take), reads the sign-in again (another host may have refreshed it), and writes the new
tokens with one Lua script that compares the ``fence`` first: a process whose lease
lapsed cannot overwrite tokens written since. Every Redis step is bounded by
:data:`TIMEOUT`; a failure raises :class:`StoreUnreachableError` naming the store, its
password masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from magisterium_async._auth._credentials import (
    Credentials,
    decode_credentials,
    encode_credentials,
)
from magisterium_async._auth._oauth import CLIENT_NAME
from magisterium_async._auth._store import StoreUnreachableError, fence, waiting_for_another
from magisterium_async._clock import wait_at_most
from magisterium_async._errors import CredentialsError

if TYPE_CHECKING:
    from magisterium_async._redis import Connection

__all__ = ["LEASE", "LOCK_WAIT", "PREFIX", "TIMEOUT", "RedisStore", "signin_key"]

logger = logging.getLogger("magisterium_async.auth")

T = TypeVar("T")

PREFIX = "magisterium:signin"
TIMEOUT = 2.0  # bounds each Redis step: a command, a connection
LEASE = 30.0  # the refresh lock's lease: a token request (15 s at most) and its writes
LOCK_WAIT = LEASE + 2.0  # long enough for a lease whose holder died to lapse
_POLL = 0.05  # how often a waiting process tries the lock
_INSTALL_HINT = "credentials in Redis need redis-py: pip install 'magisterium-async[redis]'"

# KEYS: the sign-in. ARGV: the fence expected, the new credentials, their fence.
_REPLACE = """
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'credentials', ARGV[2], 'fence', ARGV[3])
return 1
"""

# KEYS: the refresh lock. ARGV: the token of a lease this process took and could not give
# back (Redis was away). Frees it if it is still that lease.
_FREE_OWN_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def signin_key(origin: str) -> str:
    """The key of the sign-in for the service at ``origin`` (its issuer)."""
    digest = hashlib.sha256(f"{origin}\n{CLIENT_NAME}".encode()).hexdigest()[:16]
    return f"{PREFIX}:{{{digest}}}"


class RedisStore:
    """The sign-in for ``origin`` in the Redis at ``url``; connects at first use."""

    def __init__(self, url: str | Any, origin: str) -> None:
        from magisterium_async._redis import describe

        self.where = describe(url)
        try:
            import redis  # noqa: F401
        except ImportError:
            raise CredentialsError(_INSTALL_HINT, path=self.where) from None
        self.key = signin_key(origin)
        self.origin = origin
        self._url = url if isinstance(url, str) else ""
        try:
            self._password = urlsplit(self._url).password
        except ValueError:
            self._password = None
        self._target = url
        # A lease this process holds still, its release lost while Redis was away (a
        # Redis that keeps its data would make the next refresh wait for it to lapse).
        self._unreleased: bytes | None = None
        # An invalid URL is refused now, before anything is sent.
        self._connection: Connection | None = self._connect()

    def __repr__(self) -> str:
        return f"RedisStore({self.where!r}, key={self.key!r})"

    def login_command(self) -> str:
        return f"magisterium-async login --credentials {self.where}"

    def _redis(self) -> Any:
        if self._connection is None:  # closed, then used again: connect anew
            self._connection = self._connect()
        return self._connection.client

    def _connect(self) -> Connection:
        from magisterium_async._redis import connect

        try:
            return connect(self._target, TIMEOUT, ValueError, "credentials")
        except ValueError as exc:
            raise ValueError(self._masked(str(exc))) from None

    def _masked(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _unreachable(self, exc: BaseException) -> StoreUnreachableError:
        reason = self._masked(str(exc)) or type(exc).__name__
        return StoreUnreachableError(
            f"cannot reach the credentials store {self.where}: {reason}", path=self.where
        )

    async def _step(self, step: Awaitable[T]) -> T:
        """``step``, bounded by :data:`TIMEOUT`; a Redis failure is unreachability."""
        from magisterium_async._redis import redis_errors

        try:
            return await wait_at_most(TIMEOUT, step)
        except redis_errors() as exc:
            raise self._unreachable(exc) from None

    async def load(self) -> Credentials | None:
        data: Any = await self._step(self._redis().hget(self.key, "credentials"))
        if data is None:
            return None
        return decode_credentials(bytes(data), f"the sign-in at {self.where}", self._url)

    async def save(self, credentials: Credentials) -> None:
        # One HSET: a reader sees the old sign-in or the new one. A refresher of the old
        # one then fails its compare-and-set and adopts this one.
        mapping = {"credentials": encode_credentials(credentials), "fence": fence(credentials)}
        await self._step(self._redis().hset(self.key, mapping=mapping))

    async def delete(self) -> bool:
        removed: Any = await self._step(self._redis().delete(self.key))
        await self._step(self._redis().delete(f"{self.key}:lock"))
        return bool(removed)

    async def set_aside(self) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = f"{self.key}:corrupt-{stamp}"  # the same hash tag: the same cluster slot
        await self._step(self._redis().rename(self.key, aside))
        return f"{self.where} (key {aside})"

    @contextlib.asynccontextmanager
    async def refreshing(self) -> AsyncIterator[None]:
        from magisterium_async._redis import redis_errors

        if self._unreleased is not None:
            # Ours: this process refreshes one at a time, and that refresh is over.
            script = self._redis().register_script(_FREE_OWN_LEASE)
            await self._step(script(keys=[f"{self.key}:lock"], args=[self._unreleased]))
            self._unreleased = None
        lock = self._redis().lock(
            f"{self.key}:lock",
            timeout=LEASE,
            sleep=_POLL,
            blocking_timeout=LOCK_WAIT,
            thread_local=False,
        )
        try:
            # Each attempt is one bounded SET NX PX; the attempts are bounded by LOCK_WAIT.
            acquired = await wait_at_most(TIMEOUT, lock.acquire(blocking=False))
            if not acquired:
                waiting_for_another(self.where, LOCK_WAIT)
                acquired = await wait_at_most(LOCK_WAIT + TIMEOUT, lock.acquire())
        except asyncio.TimeoutError:  # before OSError: on 3.11+ it is TimeoutError
            acquired = False
        except redis_errors() as exc:
            raise self._unreachable(exc) from None
        if not acquired:
            raise StoreUnreachableError(
                f"another process has held the refresh lock at {self.where} for {LOCK_WAIT:g} s",
                path=self.where,
            )
        try:
            yield
        finally:
            from redis.exceptions import LockError

            token = lock.local.token
            try:
                await wait_at_most(TIMEOUT, lock.release())
            except LockError:
                pass  # the lease lapsed (LockNotOwnedError): nothing is left to free
            except redis_errors():  # Redis gone: freed at the next refresh, or it lapses
                self._unreleased = token

    async def replace(self, old: Credentials, new: Credentials) -> bool:
        script = self._redis().register_script(_REPLACE)
        args = [fence(old), encode_credentials(new), fence(new)]
        wrote: Any = await self._step(script(keys=[self.key], args=args))
        if not wrote:
            logger.warning(
                "the sign-in at %s changed while this process refreshed it; using the stored one",
                self.where,
            )
        return bool(wrote)

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.aclose()
