"""The front of the cache (what it does: the package's docstring): a call's key, identical
calls in flight shared, the store consulted.

The key is the service's URL, the skill and the message's parts and context, hashed: never
a token. A store that fails is bypassed for :data:`BYPASS_SECONDS` with one warning, and
calls go to the service as if there were none: it never fails a call.

Identical calls in flight share one future, made when the first joiner comes (a call nobody
joins costs a dictionary entry, no task). A joiner that is cancelled leaves; the leader's
work goes on for the rest. A leader that is cancelled stops, and those who joined begin
again (its claim in Redis, held under the client's own token, found their own). A failure
reaches each joiner as a copy of the leader's exception: no instance is raised twice, no
traceback grows with each caller.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import hashlib
import math
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal

import msgspec

from magisterium_async._cache._stores import (
    UNAVAILABLE,
    DiskAnswers,
    MemoryAnswers,
    RedisAnswers,
)
from magisterium_async._config import CACHE_ENV, CachePolicy, CacheRule, from_env
from magisterium_async._errors import CacheError
from magisterium_async._events import OnEvent, log_event, notice
from magisterium_async._models import TASK_DECODER, DataPart, Part, Task, TextPart
from magisterium_async._redis import is_client, looks_like_redis
from magisterium_async._skills import SKILLS, _date_or_words, kept_as

Outcome = Literal["hit", "miss", "coalesced"]
"""How a call was answered: from the cache, by its own request, or by another call's."""
AnswerStore = MemoryAnswers | DiskAnswers | RedisAnswers
"""Where answers are kept: in memory, in an SQLite file, or in Redis (which also shares
calls in flight between hosts)."""

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


def open_store(
    cache: str | os.PathLike[str] | Any | None, policy: CachePolicy
) -> AnswerStore | None:
    """The store ``cache`` names (its forms: ``docs/caching.md``, "The stores"), else the
    one ``$MAGISTERIUM_CACHE`` names (the same forms but a client); ``None`` for none.
    ``policy`` bounds memory and disk.

    Raises :class:`CacheError` for a file the cache did not make (left untouched), a
    missing directory, a missing redis-py or an invalid URL (for the variable's value, the
    message starts with its name); ``TypeError`` for another type.
    """
    if cache is None:
        named = from_env(CACHE_ENV)
        if named is None:
            return None
        try:
            return _open(named, policy)
        except CacheError as exc:
            raise CacheError(f"${CACHE_ENV}: {exc}") from None
    return _open(cache, policy)


def _open(cache: str | os.PathLike[str] | Any, policy: CachePolicy) -> AnswerStore:
    if isinstance(cache, str):
        if cache.strip() == "memory":
            return MemoryAnswers(policy.max_entries, policy.max_bytes)
        if looks_like_redis(cache):
            return RedisAnswers(cache)
        if not cache.strip():
            raise ValueError("cache must not be empty: 'memory', a path or a redis:// URL")
        if cache.strip().lower() == "memory":  # a typo, not a file to make in the cwd
            raise ValueError(
                f"cache {cache!r}: 'memory' (in lower case) keeps answers in memory; "
                f"a file of that name is given as ./{cache.strip()}"
            )
    elif is_client(cache):
        return RedisAnswers(cache)
    elif not isinstance(cache, os.PathLike):
        raise TypeError(
            f"cache must be a str, a path or a redis-py asyncio client, not {type(cache).__name__}"
        )
    return DiskAnswers(cache, policy.max_entries, policy.max_bytes)


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
_ENCODER = msgspec.json.Encoder()
_CANONICAL = msgspec.json.Encoder(order="sorted")


def names_a_day_absolutely(parts: Sequence[Part]) -> bool:
    """Whether a dated skill's input names its day whatever day it is asked on.

    A ``{"date": ...}`` data part, or a text that is a ``YYYY-MM-DD`` date, does;
    anything else ("today", "next Sunday", "Christmas") may name another day tomorrow.
    """
    part = parts[0] if len(parts) == 1 else None
    if isinstance(part, DataPart):
        return isinstance(part.data.get("date"), str) and len(part.data) == 1
    try:  # as the skills read a day: YYYY-MM-DD, a day that exists
        return isinstance(part, TextPart) and isinstance(_date_or_words(part.text), dt.date)
    except ValueError:  # no such day (2024-02-30)
        return False


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


async def _join(shared: asyncio.Future[bytes | None]) -> Task | None:
    """The answer of the identical call in flight that ``shared`` is the future of, as a
    task of this caller's own; ``None`` when that call left without one (begin again);
    its failure as an exception of this caller's own."""
    try:
        # Shielded: a joiner cancelled leaves; the future stays the others'.
        found = await asyncio.shield(shared)
    except asyncio.CancelledError:
        raise
    except BaseException as failure:
        copy = own_copy(failure)
        context, suppressed = copy.__context__, copy.__suppress_context__
        try:
            raise copy
        except BaseException:
            # Raised inside this handler: the leader's own context goes back.
            copy.__context__, copy.__suppress_context__ = context, suppressed
            raise
    return None if found is None else TASK_DECODER.decode(found)


class AnswerCache:
    """A client's cache (``store``, or none) and its calls in flight, by ``policy``.

    Arguments:
        store: where answers are kept; ``None``: calls are shared in flight only.
        policy: what is kept and shared, for how long.
        origin: the service's base URL, part of every key.
        emit: where a store that fails, or comes back, is told (the client's stream).
        wall: wall-clock seconds (``time.time``): freshness outlives the process.
        tz: the time zone whose days bound a relative date; ``None``: the local one.
        sleep: how a call waiting for another process's answer waits (the client's
            clock's: virtual time in tests).
    """

    def __init__(
        self,
        store: AnswerStore | None,
        policy: CachePolicy,
        origin: str,
        *,
        emit: OnEvent = log_event,
        wall: Callable[[], float] = time.time,
        tz: dt.tzinfo | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.policy = policy
        self._origin = origin
        self._emit = emit
        self._wall = wall
        self._tz = tz
        self._sleep = sleep
        # Calls in flight by key: ``None`` until an identical call joins, then the future
        # those who joined wait on (the answer's bytes, or ``None``: begin again).
        self._flights: dict[str, asyncio.Future[bytes | None] | None] = {}
        # The token this client's claims in Redis are held under: the rest of a call whose
        # leader left finds the claim its own.
        self._owner = os.urandom(8).hex()
        self._counts: collections.Counter[Outcome] = collections.Counter()
        self._healthy = True
        self._retry_at = -math.inf  # the store is left alone until then
        self._warned_corrupt = False

    @property
    def stats(self) -> CacheStats:
        """The counts so far, and the store's entries."""
        entries = None if self.store is None else self.store.entries
        counts = self._counts
        return CacheStats(counts["hit"], counts["miss"], counts["coalesced"], entries)

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
        send: Coroutine[Any, Any, Task],
        policy: CachePolicy | None = None,
    ) -> tuple[Task, Outcome]:
        """The task answering this call, and how it was answered.

        Arguments:
            skill_id: the skill called (its rule says what is done; what its answers are
                worth keeping as, the skill table says).
            parts: the message's parts.
            context_id: the message's conversation, if any.
            send: the call's own request, awaited only on a miss (else closed unsent).
            policy: a client view's policy (``None``: the cache's own).

        A call that joins another gets a task of its own (decoded from the same bytes).
        """
        policy = policy or self.policy
        rule = policy.rule(skill_id)
        day, day_end = None, math.inf
        if rule.dated and not names_a_day_absolutely(parts):
            day = dt.datetime.fromtimestamp(self._wall(), self._tz).date()
            midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), self._tz)
            day_end = midnight.timestamp()
        key = request_key(self._origin, skill_id, parts, context_id, day)
        store = self.store if rule.fresh is not None else None
        claimed = False  # the claim in Redis may be this client's: asked for, not let go
        try:
            while rule.coalesce and key in self._flights:
                shared = self._flights[key]
                if shared is None:  # the first to join an identical call makes its future
                    shared = self._flights[key] = asyncio.get_running_loop().create_future()
                task = await _join(shared)
                if task is not None:
                    self._counts["coalesced"] += 1
                    return task, "coalesced"
                # Its leader left without an answer: begin again (lead, or join the next).
            if rule.coalesce:
                self._flights[key] = None  # in flight, led by this call
            landed: Task | BaseException  # how the call ends, for those who join it
            try:
                if store is not None and self._wall() >= self._retry_at:
                    # Claimed from the moment it is asked in Redis: a reply never heard.
                    claimed = isinstance(store, RedisAnswers)
                    found, claimed, outcome = await self._look(store, key)
                    if found is not None:
                        self._counts[outcome] += 1
                        landed = found
                        return found, outcome
                self._counts["miss"] += 1
                landed = task = await send
                if store is not None:
                    kept = await self._keep(store, key, rule, policy, day_end, skill_id, task)
                    claimed = claimed and not kept  # an answer put in Redis replaces it
            except BaseException as error:
                landed = error
                raise
            finally:
                try:
                    # A claim held under this client's token is found its own by whoever
                    # takes the call over, given up here or not (the release cancelled).
                    if claimed:
                        await self._release(key)
                finally:
                    self._land(rule, key, landed)
            return task, "miss"
        finally:
            send.close()  # a call answered without its request: closed, never sent

    def _land(self, rule: CacheRule, key: str, outcome: Task | BaseException) -> None:
        """The call that led ``key`` is done: those who joined it hear how (a cancellation
        lets them begin again)."""
        shared = self._flights.pop(key, None) if rule.coalesce else None
        if shared is None or shared.done():
            return
        if isinstance(outcome, Task):
            shared.set_result(_ENCODER.encode(outcome))
        elif isinstance(outcome, asyncio.CancelledError):
            shared.set_result(None)
        else:
            shared.set_exception(outcome)
            shared.exception()  # read by the joiners: never "exception never retrieved"

    async def _keep(
        self,
        store: AnswerStore,
        key: str,
        rule: CacheRule,
        policy: CachePolicy,
        day_end: float,
        skill_id: str,
        task: Task,
    ) -> bool:
        """Keep ``task`` if it is worth keeping (the skill's answer, or its "nothing
        found" for a while; a task not completed, never); whether it was kept."""
        worth = kept_as(SKILLS.get(skill_id), task)
        if worth is None or rule.fresh is None:
            return False
        fresh = rule.fresh if worth == "answer" else min(rule.fresh, policy.not_found)
        now = self._wall()
        expires = min(now + fresh, day_end)
        if now < self._retry_at or expires <= now:
            return False
        entry = _Entry(expires, msgspec.Raw(_ENCODER.encode(task)))
        try:
            await store.put(key, _ENCODER.encode(entry), expires, now)
        except UNAVAILABLE as exc:
            self._trouble(store, exc)
            return False
        self._well(store)
        return True

    async def _look(self, store: AnswerStore, key: str) -> tuple[Task | None, bool, Outcome]:
        """The fresh answer ``store`` keeps under ``key`` (a ``"hit"``), or ``None``. Over
        Redis the look claims ``key`` too (the claim reads the answer first): another
        process's answer is waited for while it holds the claim (:data:`CLAIM_SECONDS` at
        most; then ``"coalesced"``); the second value says whether the claim is this
        client's."""
        outcome: Outcome = "hit"
        try:
            if not isinstance(store, RedisAnswers):
                raw, held = await store.get(key, self._wall()), False
            else:
                raw, held = await store.claim(key, CLAIM_SECONDS, self._owner)
                deadline, delay = self._wall() + CLAIM_SECONDS, _POLL_FIRST
                # Asked again until the answer lands, or the claim is let go (then it is
                # this call's, which sends; later ones wait for it), or time runs out.
                while raw is None and not held and self._wall() < deadline:
                    outcome = "coalesced"
                    await self._sleep(delay)
                    raw, held = await store.claim(key, CLAIM_SECONDS, self._owner)
                    delay = min(delay * 2, _POLL_MOST)
        except UNAVAILABLE as exc:
            self._trouble(store, exc)
            return None, False, outcome
        self._well(store)
        return (None if raw is None else self._read(store, raw)), held, outcome

    async def _release(self, key: str) -> None:
        """Give this client's claim on ``key`` up (a release cut short leaves it to run
        out, :data:`CLAIM_SECONDS`)."""
        store = self.store
        if not isinstance(store, RedisAnswers) or self._wall() < self._retry_at:
            return
        try:
            await store.release(key, self._owner)
        except UNAVAILABLE as exc:
            self._trouble(store, exc)

    def _read(self, store: AnswerStore, raw: bytes) -> Task | None:
        """The answer in an entry's bytes, if it is still fresh and can be read."""
        try:
            entry = _ENTRY.decode(raw)
            if entry.expires <= self._wall():
                return None
            return TASK_DECODER.decode(entry.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if not self._warned_corrupt:
                self._warned_corrupt = True
                said = f"holds an answer it cannot read ({exc}): it is asked for again and replaced"
                self._emit(notice("warning", "cache", f"cache {store.where} {said}"))
            return None

    def _trouble(self, store: AnswerStore, exc: Exception) -> None:
        if self._retry_at == math.inf:
            return  # closed: nothing to say
        self._retry_at = self._wall() + BYPASS_SECONDS
        if self._healthy:
            self._healthy = False
            said = f"calls go to the service without it, trying it again every {BYPASS_SECONDS:g} s"
            self._emit(
                notice("warning", "cache", f"cache {store.where} cannot be used ({exc}): {said}")
            )
        else:
            self._emit(
                notice("debug", "cache", f"cache {store.where} still cannot be used ({exc})")
            )

    def _well(self, store: AnswerStore) -> None:
        if not self._healthy:
            self._healthy = True
            self._emit(notice("info", "cache", f"cache {store.where} can be used again"))

    async def aclose(self) -> None:
        """Close the store; a call still finishing afterwards goes without it, quietly.
        Idempotent."""
        self._retry_at = math.inf
        if self.store is not None:
            await self.store.aclose()


def own_copy(error: BaseException) -> BaseException:
    """A new exception equal to ``error`` (class, args, attributes, cause, traceback), to
    raise in one waiter; ``error`` itself when it cannot be copied."""
    cls = type(error)
    try:
        clone: Any = cls.__new__(cls, *error.args)
        clone.args = error.args
        state = getattr(error, "__dict__", None)
        if state:
            clone.__dict__.update(state)
            notes = state.get("__notes__")
            if isinstance(notes, list):
                clone.__notes__ = list(notes)
    except Exception:
        return error
    clone.__cause__ = error.__cause__
    clone.__context__ = error.__context__
    clone.__suppress_context__ = error.__suppress_context__
    copied: BaseException = clone.with_traceback(error.__traceback__)
    return copied
