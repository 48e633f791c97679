"""The Redis side of a shared quota: the key layout (a hash of the token, never the token),
the rule's state as Redis keeps it (numbers as text), and the small scripts' guarantees."""

from __future__ import annotations

import math
from typing import Any

from magisterium_async._clock import VirtualClock
from magisterium_async._config import RateLimits
from magisterium_async._ratelimit import RuleState, SharedLimiter, SharedQuota
from magisterium_async._ratelimit._scripts import (
    PAUSE,
    POOL_KEYS,
    WRITE_RULE,
    rule_fields,
    rule_state,
    text,
)
from magisterium_async._redis import token_key
from magisterium_async.testing import Emulator
from tests.helpers.quota import Scheduler, client_for, slot
from tests.helpers.redis_server import RedisServer

SECRET = "tok-very-secret"


def memory_client(memory_redis: object) -> Any:
    from fakeredis import FakeAsyncRedis

    return FakeAsyncRedis(server=memory_redis)


# The key layout ------------------------------------------------------------------------


async def test_keys_name_a_hash_of_the_token(emulator: Emulator, redis_server: RedisServer) -> None:
    from redis.asyncio import Redis

    async with client_for(emulator, redis_server) as client:
        await client.search("grace")
    r = Redis.from_url(redis_server.url)
    try:
        keys = sorted(k.decode() for k in await r.keys("*"))
    finally:
        await r.aclose()
    digest = token_key(emulator.token)
    assert keys and all(f"{{{digest}}}" in k and emulator.token not in k for k in keys)
    assert f"magisterium:{{{digest}}}:default:log" in keys


async def test_every_key_is_under_the_prefix_and_one_slot_per_token(memory_redis: object) -> None:
    clock = VirtualClock()
    limits = RateLimits(10, 2, period=60.0)
    quota = SharedQuota("redis://memory", prefix="app")
    shared = SharedLimiter(quota, SECRET, limits, clock, redis=memory_client(memory_redis))
    sched = Scheduler(
        limits, max_concurrency=4, clock=clock, limiters=shared.limiters, gates=shared.gates
    )
    async with slot(sched.pool("default")):
        pass
    await sched.aclose()
    await shared.aclose()
    reader = memory_client(memory_redis)
    keys = {text(k) for k in await reader.keys("*")}
    await reader.aclose()
    digest = token_key(SECRET)
    assert digest != SECRET and len(digest) == 16
    # The braces put one token's keys in one cluster slot, as the scripts need.
    assert keys and all(k.startswith(f"app:{{{digest}}}:") and SECRET not in k for k in keys)
    assert {f"app:{{{digest}}}:{name}" for name in ("epoch", "clients")} <= keys
    assert f"app:{{{digest}}}:default:log" in keys


def test_the_scripts_take_the_pool_keys_in_one_order() -> None:
    # The scripts address them by position: KEYS[1] the log ... KEYS[9] the line's info.
    assert POOL_KEYS == (
        "log", "ok", "limited", "pause", "rule", "stepper", "line", "line:exp", "line:info",
    )  # fmt: skip


# The rule's state as Redis keeps it ----------------------------------------------------


async def test_a_learned_state_round_trips_through_redis(memory_redis: object) -> None:
    learned = RuleState(
        rate=6,
        allowed=5,
        step_up_at=123.5,
        refused_tries=2,
        phase=0.1 + 0.2,  # a float with no short decimal form keeps every digit
        rtt=0.037,
        before=4,
    )
    redis = memory_client(memory_redis)
    await redis.hset("rule", mapping=rule_fields(learned))
    raw = await redis.hgetall("rule")  # bytes, as Redis answers
    await redis.aclose()
    fields = {text(k): text(v) for k, v in raw.items()}
    assert rule_state(fields, 10) == learned


def test_nothing_stored_is_the_configured_rate() -> None:
    assert rule_state({}, 10) == RuleState(rate=10, allowed=10)


def test_none_and_infinity_are_stored_as_the_scripts_read_them() -> None:
    state = RuleState(rate=10, allowed=10)
    fields = rule_fields(state)
    # The admission script reads step_up_at in µs, -1 for "no step up due".
    assert fields["step_up_at"] == -1
    assert fields["phase"] == ""
    decoded = rule_state({k: str(v) for k, v in fields.items()}, 10)
    assert decoded == state and math.isinf(decoded.step_up_at) and decoded.phase is None


def test_a_step_up_is_never_found_due_before_the_rule_said() -> None:
    fields = rule_fields(RuleState(rate=5, allowed=5, step_up_at=1.0000001))
    assert fields["step_up_at"] == 1_000_001  # rounded up to the µs
    decoded = rule_state({k: str(v) for k, v in fields.items()}, 10)
    assert decoded.step_up_at >= 1.0000001


def test_text_reads_what_redis_answers_either_way() -> None:
    assert text(b"rate") == "rate" == text("rate")


# The small scripts ---------------------------------------------------------------------


async def test_the_rule_is_written_only_if_nobody_wrote_since_it_was_read(
    memory_redis: object,
) -> None:
    redis = memory_client(memory_redis)
    write = redis.register_script(WRITE_RULE)
    await redis.set("stepper", "me")
    assert await write(keys=["rule", "stepper"], args=[0, "me", "rate", 5]) == 1
    assert await redis.get("stepper") is None  # the writer's step-up lease ends
    assert await write(keys=["rule", "stepper"], args=[0, "other", "rate", 7]) == 0  # stale
    assert await redis.hgetall("rule") == {b"rate": b"5", b"version": b"1"}
    await redis.aclose()


async def test_a_pause_is_extended_never_shortened(memory_redis: object) -> None:
    redis = memory_client(memory_redis)
    pause = redis.register_script(PAUSE)
    await pause(keys=["pause"], args=[1_000_000, 30_000_000])  # at 1 s, for 30 s
    await pause(keys=["pause"], args=[2_000_000, 5_000_000])  # at 2 s, for 5 s: shorter
    assert await redis.get("pause") == b"31000000"
    await pause(keys=["pause"], args=[3_000_000, 40_000_000])
    assert await redis.get("pause") == b"43000000"
    await redis.aclose()
