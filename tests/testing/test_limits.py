"""Server-side rate limits, in virtual time."""

from __future__ import annotations

import math
import random

import pytest

from magisterium_async.testing import EmulatorConfig, RateLimitConfig, max_in_window
from magisterium_async.testing.emulator._limits import RateLimiter, pool_of

from ..conftest import JumpClock
from .conftest import StartWire
from .helpers import text


def _limiter(clock: JumpClock, **fields: object) -> RateLimiter:
    return RateLimiter(RateLimitConfig(**fields), clock)  # type: ignore[arg-type]


def test_pools() -> None:
    assert pool_of("catholic_qa") == "expensive"
    for skill in ("document_search", "document_fetch", "liturgical_readings", "saints_of_the_day"):
        assert pool_of(skill) == "default"


def test_defaults_are_the_pro_plan() -> None:
    config = RateLimitConfig()
    assert (config.limit_for("default"), config.limit_for("expensive")) == (15, 2)
    assert config.period == 60.0
    assert config == RateLimitConfig.pro()
    assert EmulatorConfig().rate_limits == config


@pytest.mark.parametrize("algorithm", ["sliding", "fixed", "token_bucket"])
def test_burst_up_to_the_limit_then_refused(clock: JumpClock, algorithm: str) -> None:
    limiter = _limiter(clock, default=15, expensive=2, algorithm=algorithm)
    assert all(limiter.acquire("t", "default") is None for _ in range(15))
    assert limiter.acquire("t", "default") is not None
    assert all(limiter.acquire("t", "expensive") is None for _ in range(2))
    assert limiter.acquire("t", "expensive") is not None
    assert limiter.acquire("other", "default") is None


def test_sliding_retry_after_is_exact(clock: JumpClock) -> None:
    limiter = _limiter(clock, default=3, period=60.0)
    starts = clock.now()
    for offset in (0.0, 10.0, 20.0):
        clock.time = starts + offset
        assert limiter.acquire("t", "default") is None
    clock.time = starts + 30.0
    assert limiter.acquire("t", "default") == pytest.approx(30.0)
    clock.time = starts + 59.5
    assert limiter.acquire("t", "default") == pytest.approx(0.5)
    clock.time = starts + 60.0
    assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") == pytest.approx(10.0)


def test_fixed_window_resets_on_the_boundary(clock: JumpClock) -> None:
    clock.time = 1000.0  # the window is [960, 1020)
    limiter = _limiter(clock, default=2, algorithm="fixed")
    assert limiter.acquire("t", "default") is None
    clock.time = 1019.0
    assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") == pytest.approx(1.0)
    clock.time = 1020.0
    assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") == pytest.approx(60.0)


def test_token_bucket_refills_steadily(clock: JumpClock) -> None:
    limiter = _limiter(clock, default=15, algorithm="token_bucket")
    for _ in range(15):
        assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") == pytest.approx(4.0)
    clock.time += 3.0
    assert limiter.acquire("t", "default") == pytest.approx(1.0)
    clock.time += 1.0
    assert limiter.acquire("t", "default") is None
    assert limiter.acquire("t", "default") == pytest.approx(4.0)


@pytest.mark.parametrize("algorithm", ["sliding", "fixed", "token_bucket"])
def test_retry_after_is_when_a_request_is_admitted(clock: JumpClock, algorithm: str) -> None:
    limiter = _limiter(clock, default=5, period=60.0, algorithm=algorithm)
    rng = random.Random(algorithm)
    for _ in range(300):
        clock.time += rng.choice((0.0, 0.5, 1.0, 3.0, 7.0))
        wait = limiter.acquire("t", "default")
        if wait is None:
            continue
        assert wait > 0
        clock.time += wait * 0.999
        assert limiter.acquire("t", "default") is not None
        clock.time += wait * 0.002
        assert limiter.acquire("t", "default") is None


def test_sliding_never_admits_more_than_the_limit_in_any_window(clock: JumpClock) -> None:
    limiter = _limiter(clock, default=15, period=60.0)
    rng = random.Random(5)
    admitted = []
    for _ in range(3000):
        clock.time += rng.expovariate(1.0)
        if limiter.acquire("t", "default") is None:
            admitted.append(clock.now())
    assert len(admitted) > 15 * 30
    assert max_in_window(admitted, 60.0) == 15


def test_fixed_and_bucket_allow_up_to_twice_the_limit_across_a_boundary(
    clock: JumpClock,
) -> None:
    for algorithm in ("fixed", "token_bucket"):
        limiter = _limiter(clock, default=15, algorithm=algorithm)
        clock.time = 1019.0
        admitted = []
        for _ in range(600):
            if limiter.acquire("t", "default") is None:
                admitted.append(clock.now())
            clock.time += 0.1
        assert 15 < max_in_window(admitted, 60.0) <= 30


def test_lifted_limits(clock: JumpClock) -> None:
    for config in (
        None,
        RateLimitConfig.unlimited(),
        RateLimitConfig(default=math.inf, expensive=None),
    ):
        limiter = RateLimiter(config, clock)
        assert all(limiter.acquire("t", "default") is None for _ in range(1000))
        assert all(limiter.acquire("t", "expensive") is None for _ in range(1000))
    only_qa = RateLimiter(RateLimitConfig(default=None, expensive=1), clock)
    assert all(only_qa.acquire("t", "default") is None for _ in range(100))
    assert only_qa.acquire("t", "expensive") is None
    assert only_qa.acquire("t", "expensive") is not None


def test_retry_after_rounding(clock: JumpClock) -> None:
    ceil = _limiter(clock)
    assert ceil.retry_after(0.2) == 1
    assert ceil.retry_after(3.0) == 3
    assert ceil.retry_after(3.01) == 4
    assert isinstance(ceil.retry_after(3.01), int)
    exact = _limiter(clock, retry_after_rounding="exact")
    assert exact.retry_after(3.0101) == pytest.approx(3.011)
    assert exact.retry_after(0.0) == pytest.approx(0.001)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        RateLimitConfig(default=0)
    with pytest.raises(ValueError):
        RateLimitConfig(default=0.5)
    assert RateLimitConfig(default=0.5, algorithm="token_bucket").limit_for("default") == 0.5
    with pytest.raises(ValueError):
        RateLimitConfig(period=0)
    with pytest.raises(ValueError):
        RateLimitConfig(algorithm="leaky")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RateLimitConfig(retry_after_rounding="floor")  # type: ignore[arg-type]


async def test_http_429_with_retry_after(start_wire: StartWire, clock: JumpClock) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig())
    for n in range(15):
        clock.time = 1000.0 + n
        assert (await wire.send("document_search", text("x"))).status == 200
    clock.time = 1020.5
    limited = await wire.send("document_fetch", text("10234"))
    assert limited.status == 429
    assert limited.body["id"] == 1
    assert limited.error == {
        "code": -32003,
        "message": "Rate limit exceeded",
        "data": {"retryAfter": 40},
    }
    assert "Retry-After" not in limited.headers
    clock.time = 1060.0
    assert (await wire.send("saints_of_the_day", text("today"))).status == 200
    assert wire.emu.stats.count(outcome="rate_limited") == 1
    [refused] = [a for a in wire.emu.arrivals if a.outcome == "rate_limited"]
    assert (refused.skill, refused.admitted) == ("document_fetch", False)


async def test_catholic_qa_has_its_own_pool(start_wire: StartWire, clock: JumpClock) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig())
    assert (await wire.send("catholic_qa", text("grace"))).status == 200
    assert (await wire.send(None, text("grace"))).status == 200
    limited = await wire.send("catholic_qa", text("grace"))
    assert limited.status == 429
    assert limited.error["data"]["retryAfter"] == 60
    assert (await wire.send("document_search", text("grace"))).status == 200


async def test_tasks_methods_and_refused_requests_are_not_metered(
    start_wire: StartWire, clock: JumpClock
) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig(default=1, expensive=1))
    task = (await wire.send("document_search", text("x"))).result
    for _ in range(5):
        assert (await wire.call("tasks/get", {"id": task["id"]})).status == 200
        assert (await wire.call("tasks/cancel", {"id": task["id"]})).error["code"] == -32602
        assert (await wire.send("bogus", text("x"))).error["code"] == -32002
        assert (await wire.send("catholic_qa", text("x"), token="bad")).status == 401
    assert (await wire.send("catholic_qa", text("x"))).status == 200


async def test_quota_is_per_token(start_wire: StartWire, clock: JumpClock) -> None:
    wire = await start_wire(
        clock=clock,
        tokens={"alice": "pro", "bob": "pro"},
        rate_limits=RateLimitConfig(default=1, expensive=1),
    )
    assert (await wire.send("document_search", text("x"), token="alice")).status == 200
    assert (await wire.send("document_search", text("x"), token="alice")).status == 429
    assert (await wire.send("document_search", text("x"), token="bob")).status == 200


async def test_shared_quota_spent_elsewhere(start_wire: StartWire, clock: JumpClock) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig())
    assert wire.emu.spend_quota("default", 20) == 15
    assert (await wire.send("document_search", text("x"))).status == 429
    wire.emu.reset_limits()
    assert (await wire.send("document_search", text("x"))).status == 200
    with pytest.raises(ValueError):
        wire.emu.spend_quota("cheap")


async def test_exact_retry_after_and_header(start_wire: StartWire, clock: JumpClock) -> None:
    limits = RateLimitConfig(
        default=1, retry_after_rounding="exact", retry_after_header=True, period=10.0
    )
    wire = await start_wire(clock=clock, rate_limits=limits)
    await wire.send("document_search", text("x"))
    clock.time += 2.25
    limited = await wire.send("document_search", text("x"))
    assert limited.error["data"]["retryAfter"] == pytest.approx(7.75)
    assert limited.headers["Retry-After"] == "7.75"


async def test_admitted_arrivals_respect_the_window(
    start_wire: StartWire, clock: JumpClock
) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig())
    for _ in range(100):
        await wire.send("document_search", text("x"))
        clock.time += 1.5
    admitted = [a.time for a in wire.emu.arrivals if a.admitted]
    assert max_in_window(admitted, 60.0) == 15
    assert wire.emu.stats.count(outcome="ok") == len(admitted)
    assert wire.emu.stats.count(outcome="rate_limited") == 100 - len(admitted)


def test_max_in_window() -> None:
    assert max_in_window([], 60.0) == 0
    assert max_in_window([0.0, 59.9, 60.0, 119.9], 60.0) == 2
    assert max_in_window([5.0, 1.0, 3.0], 10.0) == 3
