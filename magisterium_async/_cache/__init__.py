"""Paying for each answer once: identical calls in flight shared, answers kept.

The client hands every call to a skill the policy covers to :class:`AnswerCache`: an
identical call already in flight is waited for, else a fresh answer is read from the
store, else the call sends and its answer is kept; over Redis, a call being sent by
another process is waited for too (a claim in the store). What is kept, for how long and
what is shared is one table (``_config.CachePolicy``). The stores keep bytes by key: in memory,
in an SQLite file, in Redis (:mod:`._stores`).

Nothing here knows the client, the transport or the quota: a call is a key and a
``send`` to make on a miss.
"""

from magisterium_async._cache._answers import (
    BYPASS_SECONDS,
    CLAIM_SECONDS,
    AnswerCache,
    CacheStats,
    names_a_day_absolutely,
    open_store,
    request_key,
)
from magisterium_async._cache._stores import (
    APPLICATION_ID,
    CLAIMS,
    PREFIX,
    DiskAnswers,
    MemoryAnswers,
    RedisAnswers,
    StoreUnavailable,
)

__all__ = [
    "APPLICATION_ID",
    "BYPASS_SECONDS",
    "CLAIMS",
    "CLAIM_SECONDS",
    "PREFIX",
    "AnswerCache",
    "CacheStats",
    "DiskAnswers",
    "MemoryAnswers",
    "RedisAnswers",
    "StoreUnavailable",
    "names_a_day_absolutely",
    "open_store",
    "request_key",
]
