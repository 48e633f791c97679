"""A shared quota is the account's: keyed by whose token it is, never by a function's name.

Through a real ``redis-server`` and the emulator: one start a minute, so a second start on
the same account's quota must wait for the next minute, and one on another account's
quota goes at once.
"""

from __future__ import annotations

import asyncio

import pytest

import magisterium_async as m
from magisterium_async import AsyncMagisterium, RateLimits, SharedQuota
from magisterium_async.testing import Emulator, EmulatorConfig
from tests.helpers.redis_server import RedisServer

ONE_A_MINUTE = RateLimits(1, 1, period=60.0)
TOKENS = {"token-of-alice": "pro", "token-of-bob": "pro", "alice-rotated": "pro"}


def alice_token() -> str:
    return "token-of-alice"


async def alice_from_the_vault() -> str:
    return "token-of-alice"


TOLD_TO_WAIT: dict[int, asyncio.Event] = {}  # per client: the shared quota said "wait"


def client(emu: Emulator, redis: RedisServer, token: object, **quota: object) -> AsyncMagisterium:
    told = asyncio.Event()

    def heard(event: m.PoolEvent) -> None:
        if event.kind == "waiting" and event.pool == "default":
            told.set()

    made = AsyncMagisterium(
        token=token,  # type: ignore[arg-type]
        base_url=emu.base_url,
        rate_limits=ONE_A_MINUTE,
        shared_quota=SharedQuota(redis.url, **quota),  # type: ignore[arg-type]
        on_event=heard,
    )
    TOLD_TO_WAIT[id(made)] = told
    return made


async def must_wait_for_the_next_minute(c: AsyncMagisterium) -> None:
    """``c``'s next search is held by the shared quota for most of a minute (then given up)."""
    told = TOLD_TO_WAIT[id(c)]
    told.clear()
    call = asyncio.ensure_future(c.search("nature"))
    heard = asyncio.ensure_future(told.wait())
    await asyncio.wait([call, heard], return_when=asyncio.FIRST_COMPLETED)
    heard.cancel()
    assert not call.done(), "the same account's quota let a second start go in one minute"
    assert c.stats.default.next_start_in > 50.0
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_two_accounts_through_two_lambdas_do_not_share_a_quota(
    redis_server: RedisServer,
) -> None:
    async with (
        Emulator(EmulatorConfig(tokens=TOKENS)) as emu,
        client(emu, redis_server, lambda: "token-of-alice") as alice,
        client(emu, redis_server, lambda: "token-of-bob") as bob,
    ):
        await alice.search("grace")
        await bob.search("grace")  # Bob's minute is his own: it goes at once
        assert bob.stats.default.rate_limited == 0
        await must_wait_for_the_next_minute(alice)


async def test_one_account_through_two_differently_named_functions_shares_one(
    redis_server: RedisServer,
) -> None:
    async with (
        Emulator(EmulatorConfig(tokens=TOKENS)) as emu,
        client(emu, redis_server, alice_token) as first,
        client(emu, redis_server, alice_from_the_vault) as second,
    ):
        await first.search("grace")
        await must_wait_for_the_next_minute(second)


async def test_a_str_token_and_a_callable_returning_it_share_one(
    redis_server: RedisServer,
) -> None:
    async with (
        Emulator(EmulatorConfig(tokens=TOKENS)) as emu,
        client(emu, redis_server, "token-of-alice") as first,
        client(emu, redis_server, alice_token) as second,
    ):
        await first.search("grace")
        await must_wait_for_the_next_minute(second)


async def test_a_named_account_is_shared_whatever_token_it_holds_now(
    redis_server: RedisServer,
) -> None:
    # Tokens that rotate: the application names the account, and the hash of no token counts.
    async with (
        Emulator(EmulatorConfig(tokens=TOKENS)) as emu,
        client(emu, redis_server, lambda: "token-of-alice", account="alice") as first,
        client(emu, redis_server, lambda: "alice-rotated", account="alice") as second,
        client(emu, redis_server, lambda: "token-of-bob", account="bob") as bob,
    ):
        await first.search("grace")
        await bob.search("grace")
        await must_wait_for_the_next_minute(second)


async def test_a_token_callable_that_raises_fails_the_call_instead_of_holding_it(
    redis_server: RedisServer,
) -> None:
    # Asked whose quota it is before the first start, the callable's error is the call's:
    # each waiting call raises it, and none waits forever.
    def vault_down() -> str:
        raise RuntimeError("the vault is down")

    async with (
        Emulator(EmulatorConfig(tokens=TOKENS)) as emu,
        client(emu, redis_server, vault_down) as c,
    ):
        calls = [c.search(f"grace {i}") for i in range(3)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert [str(r) for r in results] == ["the vault is down"] * 3, results
        assert all(isinstance(r, RuntimeError) for r in results)
        assert emu.stats.count(skill="document_search") == 0
