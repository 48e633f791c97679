"""One metered pool of a shared quota: what the client keeps of it (:class:`PoolState`),
and how its :class:`SharedPool` hands the pool's work to the shared limiter."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from magisterium_async._config import RateLimits
from magisterium_async._ratelimit import SharedLimiter, SharedPool, Start, Verdict
from magisterium_async._ratelimit._scripts import POOL_KEYS
from magisterium_async._ratelimit._shared_pool import PoolState

LIMITS = RateLimits(15, 2, period=60.0)  # the margin: min(0.02 * 60, 1) = 1 s


class Shared:
    """The parts of a :class:`SharedLimiter` a pool uses, recording what it was told."""

    def __init__(self, limits: RateLimits = LIMITS) -> None:
        self._pools = {name: PoolState(limits, name, "p:{h}") for name in ("default", "expensive")}
        self.told: list[tuple[Any, ...]] = []

    def outcome(self, pool: str, kind: str, ticket: str, wait: float = 0.0) -> None:
        self.told.append(("outcome", pool, kind, ticket, wait))

    def learn(self, pool: str, verdict: Verdict) -> None:
        self.told.append(("learn", pool, verdict.kind))

    async def admit(self, pool: str, line: Any) -> str:
        self.told.append(("admit", pool, line()))
        return "client:1"

    async def aclose(self) -> None:
        self.told.append(("aclose",))


def pool(name: str = "default", shared: Shared | None = None) -> tuple[SharedPool, Shared]:
    shared = shared or Shared()
    return SharedPool(cast(SharedLimiter, shared), name, LIMITS), shared


def test_a_pool_state_keeps_the_local_pools_arithmetic_and_its_keys() -> None:
    state = PoolState(LIMITS, "expensive", "app:{abc}")
    assert (state.limit, state.window, state.period, state.margin) == (2, 60.0, 60.0, 1.0)
    assert state.span == 61.0 and state.rate == state.allowed == 2
    assert state.keys == [f"app:{{abc}}:expensive:{name}" for name in POOL_KEYS]
    assert not state.starts and not state.outcomes and state.next_at == -math.inf


def test_an_unlimited_pool_has_no_limit_to_share() -> None:
    state = PoolState(RateLimits(math.inf, 2), "default", "app:{abc}")
    assert math.isinf(state.limit)


def test_a_limit_below_one_a_period_is_one_per_a_longer_window() -> None:
    state = PoolState(RateLimits(15, 0.5, period=60.0), "expensive", "b")
    assert (state.limit, state.window) == (1, 120.0)


def test_the_rate_is_reported_per_period_from_what_redis_said() -> None:
    shared_pool, shared = pool()
    assert shared_pool.rate == 15.0 and not shared_pool.stepping_up
    state = shared._pools["default"]
    state.rate, state.allowed = 6, 5  # read from the shared rule: a step up under way
    assert shared_pool.rate == 6.0 and shared_pool.stepping_up


def test_redis_takes_the_turns_not_the_pool() -> None:
    shared_pool, shared = pool()
    assert shared_pool.paced_start(0.0, waiting=100) == -math.inf  # never paced locally
    shared._pools["default"].next_at = 42.0  # when Redis said to ask again
    assert shared_pool.next_start(0.0) == 42.0


async def test_what_becomes_of_a_start_goes_to_the_shared_limiter() -> None:
    shared_pool, shared = pool("expensive")
    ok, limited, forgotten = Start(1.0, "c:1"), Start(2.0, "c:2"), Start(3.0, "c:3")
    limited.limited, limited.wait = True, 30.5
    shared_pool.start(ok)  # the admission already wrote it: nothing to tell
    shared_pool.answered(ok)
    shared_pool.answered(limited)
    shared_pool.forget(forgotten)
    shared_pool.give_back("c:4")
    shared_pool.learn(Verdict("proven", limited, 2.5, 32.5, 30.0))
    assert await shared_pool.admit(lambda: ("bulk", 3)) == "client:1"
    await shared_pool.aclose()
    assert shared.told == [
        ("outcome", "expensive", "ok", "c:1", 0.0),
        ("outcome", "expensive", "429", "c:2", 30.5),
        ("outcome", "expensive", "forget", "c:3", 0.0),
        ("outcome", "expensive", "forget", "c:4", 0.0),
        ("learn", "expensive", "proven"),
        ("admit", "expensive", ("bulk", 3)),
        ("aclose",),
    ]


@pytest.mark.parametrize("method", ["answered", "forget"])
def test_a_start_without_a_ticket_is_not_reported(method: str) -> None:
    # Without a ticket a start has no entry in the shared log: there is nothing to update.
    shared_pool, shared = pool()
    getattr(shared_pool, method)(Start(1.0))
    assert shared.told == []
