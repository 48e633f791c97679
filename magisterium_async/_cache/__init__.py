"""Paying for each answer once: identical calls in flight shared, answers kept.

The client hands every call to a skill the policy covers to :class:`AnswerCache`: an
identical call already in flight is waited for (:mod:`._flights`), else a fresh answer
is read from the store, else the call sends and its answer is kept; over Redis, a call
being sent by another process is waited for too (a claim in the store). What is kept, for
how long and what is shared is one table (:mod:`._policy`). The stores keep bytes by key:
in memory (:mod:`._store`), in an SQLite file (:mod:`._disk`), in Redis
(:mod:`._redis_store`).

Nothing here knows the client, the transport or the quota: a call is a key and a
``send`` to make on a miss.
"""

from magisterium_async._cache._answers import (
    BYPASS_SECONDS,
    CLAIM_SECONDS,
    AnswerCache,
    CacheStats,
    Kept,
    Outcome,
    open_store,
    request_key,
)
from magisterium_async._cache._disk import DiskStore
from magisterium_async._cache._flights import Flights
from magisterium_async._cache._policy import (
    DEFAULT_CACHE_POLICY,
    DEFAULT_RULES,
    CachePolicy,
    CacheRule,
    names_a_day_absolutely,
)
from magisterium_async._cache._redis_store import RedisStore
from magisterium_async._cache._store import MemoryStore, SharedStore, Store, StoreUnavailable

__all__ = [
    "BYPASS_SECONDS",
    "CLAIM_SECONDS",
    "DEFAULT_CACHE_POLICY",
    "DEFAULT_RULES",
    "AnswerCache",
    "CachePolicy",
    "CacheRule",
    "CacheStats",
    "DiskStore",
    "Flights",
    "Kept",
    "MemoryStore",
    "Outcome",
    "RedisStore",
    "SharedStore",
    "Store",
    "StoreUnavailable",
    "names_a_day_absolutely",
    "open_store",
    "request_key",
]
