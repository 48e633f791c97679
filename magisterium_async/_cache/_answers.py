"""The front of the cache: a call's key, the store consulted, calls in flight shared.

For a skill the policy covers, :meth:`AnswerCache.answer` looks for an identical call in
flight (and waits for its answer), else for a fresh answer in the store, else sends, and
keeps what came back when it is an answer worth keeping. Over a shared store (Redis) the
call claims its key before it sends, and an identical call in another process waits for
that answer in the store rather than send its own. The key is the service's URL,
the skill and the message's parts and context, hashed: never a token. A store that fails
is bypassed for :data:`BYPASS_SECONDS` with one warning, and calls go to the service as
if there were none; it never fails a call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar, cast

import msgspec

from magisterium_async._cache._disk import DiskStore
from magisterium_async._cache._flights import Flights
from magisterium_async._cache._policy import CachePolicy, CacheRule, names_a_day_absolutely
from magisterium_async._cache._redis_store import RedisStore
from magisterium_async._cache._store import MemoryStore, SharedStore, Store, StoreUnavailable
from magisterium_async._config import CACHE_ENV, cache_from_env
from magisterium_async._errors import CacheError
from magisterium_async._models import Part, Task
from magisterium_async._redis import is_client, looks_like_redis

__all__ = [
    "BYPASS_SECONDS",
    "CLAIM_SECONDS",
    "AnswerCache",
    "CacheStats",
    "Kept",
    "Outcome",
    "Request",
    "open_store",
    "request_key",
]

logger = logging.getLogger("magisterium_async.cache")

Outcome = Literal["hit", "miss", "coalesced"]
"""How a call was answered: from the cache, by its own request, or by another call's."""
Kept = Literal["answer", "not_found"]
"""What an answer is worth keeping as (``None`` from ``keep``: not kept)."""

BYPASS_SECONDS = 30.0
"""How long a store that failed is left alone before it is tried again: a Redis that
does not answer costs one timeout per period, not one per call."""
CLAIM_SECONDS = 10.0
"""How long a claim on a call being sent holds, and so how long another process waits
for its answer at most before sending its own (a process that dies while it sends holds
nobody up for longer)."""
# How often a process waiting for another's answer looks for it: soon (an answer takes a
# few milliseconds on loopback, a second from the service), then less and less often.
_POLL_FIRST, _POLL_MOST = 0.005, 0.25
_KEY_VERSION = b"1"  # changes with the key or the entry format: old entries are not read


def open_store(cache: str | os.PathLike[str] | Any | None, policy: CachePolicy) -> Store | None:
    """The store ``cache`` names, else the one ``$MAGISTERIUM_CACHE`` names; ``None`` for
    none.

    Arguments:
        cache: ``"memory"``, a Redis URL (``redis://``, ``rediss://``, ``unix://``,
            ``redis+cluster://``, ``redis+sentinel://``; any ``scheme://`` is taken for a
            URL, never a path), a redis-py asyncio client (the application's: never
            closed here), or the path of an SQLite file (made on first use). ``None``:
            ``$MAGISTERIUM_CACHE`` (the same forms but a client), else no cache.
        policy: its bounds (memory and disk).

    Raises :class:`CacheError` for a file the cache did not make (left untouched), a
    missing directory, a missing redis-py or an invalid URL; ``TypeError`` for another type.
    A bad value of the variable raises the same, the message starting with its name.
    """
    if cache is None:
        named = cache_from_env()
        if named is None:
            return None
        try:
            return _open(named, policy)
        except CacheError as exc:
            raise CacheError(f"${CACHE_ENV}: {exc}") from None
    return _open(cache, policy)


def _open(cache: str | os.PathLike[str] | Any, policy: CachePolicy) -> Store:
    if isinstance(cache, str):
        if cache.strip() == "memory":
            return MemoryStore(policy.max_entries, policy.max_bytes)
        if looks_like_redis(cache):
            return RedisStore(cache)
        if not cache.strip():
            raise ValueError("cache must not be empty: 'memory', a path or a redis:// URL")
        if cache.strip().lower() == "memory":  # a typo, not a file to make in the cwd
            raise ValueError(
                f"cache {cache!r}: 'memory' (in lower case) keeps answers in memory; "
                f"a file of that name is given as ./{cache.strip()}"
            )
    elif is_client(cache):
        return RedisStore(cache)
    elif not isinstance(cache, os.PathLike):
        raise TypeError(
            f"cache must be a str, a path or a redis-py asyncio client, not {type(cache).__name__}"
        )
    return DiskStore(cache, policy.max_entries, policy.max_bytes)


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """What the client's cache and its shared calls did (``client.cache_stats``).

    Arguments:
        hits: calls answered from the cache, sending nothing.
        misses: calls the policy covers that sent their own request.
        coalesced: calls that waited for an identical call in flight, sending nothing.
        entries: answers the cache holds (as last seen); ``None`` without a cache, or
            for Redis (which cannot count one prefix's keys cheaply).
    """

    hits: int = 0
    misses: int = 0
    coalesced: int = 0
    entries: int | None = None


class _Entry(msgspec.Struct, array_like=True):
    """What a store holds for one answer: until when it is fresh, and the task as JSON.

    JSON, not msgpack: an answer may hold any integer the service's JSON can (msgpack
    stops at 64 bits), and it reads back to the same task."""

    expires: float
    body: msgspec.Raw


_ENTRY = msgspec.json.Decoder(_Entry)
_TASK = msgspec.json.Decoder(Task)
_ENCODER = msgspec.json.Encoder()
_CANONICAL = msgspec.json.Encoder(order="sorted")
_Shared = tuple[Task, Outcome]
T = TypeVar("T")


class _Claim:
    """A call's claim on its key in a shared store, under a token of its own: only the
    call's own claim is ever given up, and the rest of a call whose first caller left
    finds it its own rather than wait for it. ``held``: it may be held (from when it is
    asked for until it is given up, or an answer took its place)."""

    __slots__ = ("held", "key", "owner", "store")

    def __init__(self, store: SharedStore, key: str) -> None:
        self.store = store
        self.key = key
        self.owner = os.urandom(8).hex()
        self.held = False

    async def take(self) -> bytes | None:
        """Claim the key now: the answer already there, if any (``held`` says whether the
        claim is the call's)."""
        self.held = True  # from the moment it is asked for: a reply never heard may take it
        raw, self.held = await self.store.claim(self.key, CLAIM_SECONDS, self.owner)
        return raw


class Request(Protocol):
    """The request of a call the cache may answer without sending it (the call path's
    :class:`._call.Call` is one)."""

    def turn(self) -> Awaitable[None]:
        """Wait for the request's first turn in its pool's line, and keep it."""
        ...

    def send(self) -> Awaitable[Task]:
        """Send the request (in the turn kept, if any) and return its task."""
        ...

    def give_back(self) -> None:
        """A turn kept and never used goes back to the pool (nothing if it was used)."""
        ...

    def within_deadline(self, waiting: Awaitable[T]) -> Awaitable[T]:
        """``waiting`` (another call's answer), bounded by the request's own deadline."""
        ...


def request_key(
    origin: str,
    skill_id: str,
    parts: Sequence[Part],
    context_id: str | None,
    day: dt.date | None = None,
) -> str:
    """The key of a call: what makes two calls the same, hashed (never a token).

    Arguments:
        origin: the service's base URL.
        skill_id: the skill called.
        parts: the message's parts (their text and data, keys in sorted order).
        context_id: the conversation, an option that may change the answer.
        day: the local day a relative date ("today") was asked on, for a dated skill.
    """
    canonical = _CANONICAL.encode([context_id, list(parts)])
    material = b"\0".join(
        (
            _KEY_VERSION,
            origin.encode(),
            skill_id.encode(),
            canonical,
            b"" if day is None else day.isoformat().encode(),
        )
    )
    return hashlib.sha256(material).hexdigest()


class AnswerCache:
    """A client's cache (``store``, or none) and its calls in flight, by ``policy``.

    Arguments:
        store: where answers are kept; ``None``: calls are shared in flight only.
        policy: what is kept and shared, for how long.
        origin: the service's base URL, part of every key.
        wall: wall-clock seconds (``time.time``): freshness outlives the process.
        tz: the time zone whose days bound a relative date; ``None``: the local one.
        sleep: how a call waiting for another process's answer waits (the client's
            clock's: virtual time in tests).
    """

    def __init__(
        self,
        store: Store | None,
        policy: CachePolicy,
        origin: str,
        *,
        wall: Callable[[], float] = time.time,
        tz: dt.tzinfo | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self._sleep = sleep
        self.policy = policy
        self._origin = origin
        self._wall = wall
        self._tz = tz
        self._flights: Flights[_Shared] = Flights()
        self._releasing: set[asyncio.Future[None]] = set()  # claims given up after a flight
        self._hits = self._misses = self._coalesced = 0
        self._healthy = True
        self._retry_at = -math.inf  # the store is left alone until then
        self._warned_corrupt = False

    def __repr__(self) -> str:
        where = "none" if self.store is None else self.store.where
        return f"<AnswerCache store={where!r}>"

    @property
    def stats(self) -> CacheStats:
        """The counts so far, and the store's entries."""
        entries = None if self.store is None else self.store.entries
        return CacheStats(self._hits, self._misses, self._coalesced, entries)

    def covers(self, skill_id: str, policy: CachePolicy | None = None) -> bool:
        """Whether calls to ``skill_id`` go through here (shared, or kept, or both), by
        ``policy`` (a client view's; ``None``: the cache's own)."""
        rule = (policy or self.policy).rule(skill_id)
        return rule.coalesce or (rule.fresh is not None and self.store is not None)

    async def answer(
        self,
        skill_id: str,
        parts: Sequence[Part],
        context_id: str | None,
        request: Request,
        keep: Callable[[Task], Kept | None],
        *,
        policy: CachePolicy | None = None,
    ) -> tuple[Task, Outcome]:
        """The task answering this call, and how it was answered.

        Arguments:
            skill_id: the skill called (its rule says what is done).
            parts: the message's parts.
            context_id: the message's conversation, if any.
            request: the call's own request, sent only on a miss.
            keep: what the task sent back is worth keeping as, or ``None``.
            policy: a client view's policy (``None``: the cache's own).

        A call that joins another gets a task of its own (decoded from the same bytes).
        """
        policy = policy or self.policy
        rule = policy.rule(skill_id)
        now = self._wall()
        day_end: float | None = None
        day: dt.date | None = None
        if rule.dated and not names_a_day_absolutely(parts):
            local = dt.datetime.fromtimestamp(now, self._tz)
            day = local.date()
            midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), self._tz)
            day_end = midnight.timestamp()
        key = request_key(self._origin, skill_id, parts, context_id, day)
        not_found = policy.not_found
        if not rule.coalesce:
            claim = self._claim_for(key, rule)
            return await self._lookup_or_send(key, rule, not_found, day_end, request, keep, claim)
        flight = self._flights.get(key)
        if flight is not None:
            # An identical call leads: its answer, as a task of its own (decoded from
            # bytes encoded here, per joiner: most calls are never joined, and pay nothing).
            task, _ = await request.within_deadline(flight.wait())
            self._coalesced += 1
            return _TASK.decode(_ENCODER.encode(task)), "coalesced"
        flight = self._flights.lead(key)
        claim = self._claim_for(key, rule)
        try:
            found = await self._look(key, rule, claim, request)
            if found is None:
                # The request's turn in its pool's line, waited for here in this caller's
                # task, before the flight's task and the request's tries are made.
                await request.turn()
        except BaseException as error:
            # The flight is decided first, without waiting: a wait here could be cancelled
            # too and leave it undecided, with every later identical call joining it.
            cancelled = isinstance(error, asyncio.CancelledError)
            if not cancelled:
                flight.fail(error)  # as the work's own failure would: everyone's
            elif any(not waiter.cancelled() for waiter in flight.waiters):
                # Others still wait: the rest of the work is theirs, in the leader's request
                # (its options, its deadline) and under its claim, which the rest finds its
                # own. Nothing was sent yet.
                rest = self._lookup_or_send(key, rule, not_found, day_end, request, keep, claim)
                flight.start(rest, self._cleanup(request, claim))
                raise
            else:
                flight.land()
            if claim is not None and (cancelled or isinstance(error, Exception)):
                await self._release(claim)  # not while a coroutine is closed
            raise
        if found is not None:
            flight.settle(found)
            return found
        # The turn is the work's from here; given back if the work never uses it.
        work = self._send(key, rule, not_found, day_end, request, keep, claim)
        flight.start(work, self._cleanup(request, claim))
        return await flight.wait()

    def _claim_for(self, key: str, rule: CacheRule) -> _Claim | None:
        """The claim a call on ``key`` makes before it sends, if its answer is kept in a
        shared store."""
        store = self.store
        if rule.fresh is None or store is None or not store.shared:
            return None
        return _Claim(cast(SharedStore, store), key)

    def _cleanup(self, request: Request, claim: _Claim | None) -> Callable[[], None]:
        """What a flight gives back once its work is over, whether or not it ran (a task
        cancelled before its first step runs none of its code): the request's turn if it
        was never used, and the claim if the work did not give it up."""
        if claim is None:
            return request.give_back

        def cleanup() -> None:
            request.give_back()
            if claim.held:
                task = asyncio.ensure_future(self._release(claim))
                self._releasing.add(task)
                task.add_done_callback(self._releasing.discard)

        return cleanup

    async def _lookup_or_send(
        self,
        key: str,
        rule: CacheRule,
        not_found: float,
        day_end: float | None,
        request: Request,
        keep: Callable[[Task], Kept | None],
        claim: _Claim | None,
    ) -> _Shared:
        found = await self._look(key, rule, claim, request)
        if found is not None:
            return found
        return await self._send(key, rule, not_found, day_end, request, keep, claim)

    async def _look(
        self, key: str, rule: CacheRule, claim: _Claim | None, request: Request
    ) -> _Shared | None:
        """What a call finds before it sends: a fresh answer (in the store, or another
        process's it waited for under ``claim``, within ``request``'s deadline), else
        ``None`` (and ``claim`` is the call's, if it could be taken)."""
        if rule.fresh is None or self.store is None:
            return None
        found = await self._get(key)
        if found is not None:
            self._hits += 1
            return found
        if claim is None:
            return None
        found = await self._after_claim(claim, request)
        if found is not None:
            self._coalesced += 1
            return found[0], "coalesced"
        return None

    async def _send(
        self,
        key: str,
        rule: CacheRule,
        not_found: float,
        day_end: float | None,
        request: Request,
        keep: Callable[[Task], Kept | None],
        claim: _Claim | None,
    ) -> _Shared:
        """The request sent, and its answer kept when it is worth keeping (``claim``
        given up when it is not)."""
        self._misses += 1
        try:
            task = await request.send()
        except BaseException:
            if claim is not None:
                await self._release(claim)
            raise
        if rule.fresh is not None and self.store is not None:
            worth = keep(task)
            if worth is not None:
                fresh = rule.fresh if worth == "answer" else min(rule.fresh, not_found)
                expires = self._wall() + fresh
                if day_end is not None:
                    expires = min(expires, day_end)
                entry = _Entry(expires, msgspec.Raw(_ENCODER.encode(task)))
                if await self._put(key, _ENCODER.encode(entry), expires) and claim is not None:
                    claim.held = False  # the answer took the claim's place
        if claim is not None:
            await self._release(claim)
        return task, "miss"

    async def _after_claim(self, claim: _Claim, request: Request) -> _Shared | None:
        """Take ``claim`` (``None``: go and send); if another process holds it, wait for
        its answer within ``request``'s deadline (that answer; ``None`` when none came:
        send after all)."""
        if self._wall() < self._retry_at:
            return None
        store = claim.store
        try:
            raw = await claim.take()
        except StoreUnavailable as exc:
            self._trouble(store, exc)
            return None
        found = None if raw is None else self._read(store, raw)
        if found is not None or claim.held:
            return found
        return await request.within_deadline(self._answer_of_another(claim))

    async def _answer_of_another(self, claim: _Claim) -> _Shared | None:
        """The answer of the process holding the claim, when it comes within
        :data:`CLAIM_SECONDS`; else ``None``, ``claim`` taken (whoever holds it now, this
        call sends) so that later callers wait for this request."""
        store, key = claim.store, claim.key
        deadline = self._wall() + CLAIM_SECONDS
        delay = _POLL_FIRST
        try:
            while True:
                await self._sleep(delay)
                raw, held = await store.peek(key, self._wall())
                found = None if raw is None else self._read(store, raw)
                if found is not None:
                    return found
                if not held or self._wall() >= deadline:
                    raw = await claim.take()
                    return None if raw is None else self._read(store, raw)
                delay = min(delay * 2, _POLL_MOST)
        except StoreUnavailable as exc:
            self._trouble(store, exc)
            return None

    async def _release(self, claim: _Claim) -> None:
        """Give ``claim`` up if it may be held (a release cut short leaves it held: the
        flight's cleanup tries again)."""
        if not claim.held:
            return
        if self._wall() >= self._retry_at:
            try:
                await claim.store.release(claim.key, claim.owner)
            except StoreUnavailable as exc:
                self._trouble(claim.store, exc)
        claim.held = False  # else the store is left alone for now: the claim runs out

    async def _get(self, key: str) -> _Shared | None:
        store, now = self.store, self._wall()
        if store is None or now < self._retry_at:
            return None
        try:
            raw = await store.get(key, now)
        except StoreUnavailable as exc:
            self._trouble(store, exc)
            return None
        self._well(store)
        return None if raw is None else self._read(store, raw)

    def _read(self, store: Store, raw: bytes) -> _Shared | None:
        """The answer in an entry's bytes, if it is still fresh and can be read."""
        try:
            entry = _ENTRY.decode(raw)
            if entry.expires <= self._wall():
                return None
            return _TASK.decode(entry.body), "hit"
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if not self._warned_corrupt:
                self._warned_corrupt = True
                logger.warning(
                    "cache %s holds an answer it cannot read (%s): it is asked for again "
                    "and replaced",
                    store.where,
                    exc,
                )
            return None

    async def _put(self, key: str, value: bytes, expires: float) -> bool:
        """Keep ``value`` under ``key`` until ``expires``; whether it was kept."""
        store, now = self.store, self._wall()
        if store is None or now < self._retry_at or expires <= now:
            return False
        try:
            await store.put(key, value, expires, now)
        except StoreUnavailable as exc:
            self._trouble(store, exc)
            return False
        self._well(store)
        return True

    def _trouble(self, store: Store, exc: StoreUnavailable) -> None:
        if self._retry_at == math.inf:
            return  # closed: nothing to say
        self._retry_at = self._wall() + BYPASS_SECONDS
        if self._healthy:
            self._healthy = False
            logger.warning(
                "cache %s cannot be used (%s): calls go to the service without it, "
                "trying it again every %g s",
                store.where,
                exc,
                BYPASS_SECONDS,
            )
        else:
            logger.debug("cache %s still cannot be used (%s)", store.where, exc)

    def _well(self, store: Store) -> None:
        if not self._healthy:
            self._healthy = True
            logger.info("cache %s can be used again", store.where)

    async def aclose(self) -> None:
        """Close the store; a call still finishing afterwards goes without it, quietly.
        Idempotent."""
        if self._releasing:  # claims still being given up go first, while the store is open
            await asyncio.wait(self._releasing)
        self._retry_at = math.inf
        if self.store is not None:
            await self.store.aclose()
