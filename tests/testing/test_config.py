"""The emulator's configuration: its clock is the client's kind of clock, and bad values
are refused by name."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._clock import LoopClock
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    FaultConfig,
    RateLimitConfig,
    VirtualClock,
)


def test_the_default_clock_is_the_event_loops() -> None:
    assert isinstance(EmulatorConfig().clock, LoopClock)


def test_a_bare_function_is_refused_with_what_to_pass_instead() -> None:
    with pytest.raises(TypeError, match=r"clock must be a Clock .*VirtualClock\(\)"):
        EmulatorConfig(clock=time.monotonic)  # type: ignore[arg-type]


async def test_one_virtual_clock_moves_the_client_and_the_emulator() -> None:
    clock = VirtualClock()
    config = EmulatorConfig(rate_limits=None, token_lifetime=600, clock=clock)
    async with Emulator(config) as emu:
        token = emu.oauth.issue()["access_token"]
        async with m.AsyncMagisterium(
            token=token, base_url=emu.base_url, clock=clock, rate_limits=m.RateLimits.unlimited()
        ) as client:
            assert await client.search("grace")
            await clock.advance(599)
            assert await client.search("grace")
            await clock.advance(1)  # the token's lifetime, in both of their times
            with pytest.raises(m.AuthenticationError):
                await client.search("grace")


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: EmulatorConfig(qa_latency=-1), ValueError, "qa_latency must be a number >= 0"),
        (lambda: EmulatorConfig(token_lifetime=math.inf), ValueError, "token_lifetime must be"),
        (lambda: EmulatorConfig(task_ttl=0), ValueError, "task_ttl must be a positive number"),
        (lambda: EmulatorConfig(max_results=1.5), TypeError, "max_results must be an int"),
        (lambda: EmulatorConfig(max_tasks=0), ValueError, "max_tasks must be >= 1"),
        (lambda: RateLimitConfig(period=math.inf), ValueError, "period must be a positive"),
        (lambda: RateLimitConfig(default="15"), TypeError, "default must be a number, not str"),
        (lambda: FaultConfig(error_rate=1.5), ValueError, "error_rate must be between 0 and 1"),
        (lambda: FaultConfig(latency=(-1, 2)), ValueError, "latency must be a number >= 0"),
    ],
)
def test_bad_values_are_refused_by_name(make: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()
