"""The sign-in kept in Redis: one key, one refresh for every client, a compare-and-set on
the tokens, Redis failing and coming back, a lost sign-in, ACL users and TLS.

Against a real ``redis-server`` (with ``appendonly yes``, so a restart keeps the sign-in)
and the fake authorization server, whose refresh tokens rotate and are refused once spent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._auth import (
    Credentials,
    RedisStore,
    StoredToken,
    auth_status,
    logout,
    signin_key,
)
from magisterium_async._redis import connect
from tests.conftest import JumpClock, _running
from tests.helpers.credentials import PASSWORD, require_password
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, sign_in
from tests.helpers.redis_server import RedisServer
from tests.helpers.refresh_log import RefreshLog

__all__ = ["auth_server"]

# README's user for the sign-in and the shared quota, after its name and password.
README_ACL = ("on", "~magisterium:*", "+@read", "+@write", "+@scripting", "+ping", "+time")


@pytest.fixture
def clock(auth_server: FakeAuthServer) -> JumpClock:
    manual = JumpClock()
    auth_server.now = manual.now
    return manual


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)


@pytest.fixture
async def url(persistent_redis: RedisServer, auth_server: FakeAuthServer, clock: JumpClock) -> str:
    """A password-protected Redis holding a sign-in."""
    with_password = await require_password(persistent_redis)
    await sign_in(auth_server, with_password)
    return with_password


def client_for(auth_server: FakeAuthServer, url: str, clock: JumpClock) -> m.AsyncMagisterium:
    return m.AsyncMagisterium(
        base_url=auth_server.base_url,
        credentials=url,
        rate_limits=m.RateLimits.unlimited(),
        clock=clock,
    )


@pytest.fixture
async def client(
    auth_server: FakeAuthServer, url: str, clock: JumpClock
) -> AsyncIterator[m.AsyncMagisterium]:
    async with client_for(auth_server, url, clock) as opened:
        yield opened


async def stored(url: str, origin: str) -> Credentials | None:
    store = RedisStore(url, origin)
    try:
        return await store.load()
    finally:
        await store.aclose()


def no_files(directory: Path, pattern: str) -> bool:
    return not list(directory.glob(pattern))


def source_of(client: m.AsyncMagisterium) -> StoredToken:
    source = client.token_source
    assert isinstance(source, StoredToken)
    return source


# The key ------------------------------------------------------------------------------


async def test_the_sign_in_is_one_key_named_from_the_issuer_never_a_token(
    url: str, auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    redis = connect(url, 5.0).client
    try:
        keys = await redis.keys("*")
    finally:
        await redis.aclose()
    assert keys == [signin_key(auth_server.origin).encode()]
    signed_in = await stored(url, auth_server.origin)
    assert signed_in is not None and signed_in.access_token in auth_server.access
    for token in (signed_in.access_token, str(signed_in.refresh_token)):
        assert token.encode() not in keys[0]
    assert no_files(Path.cwd(), "redis:*") and no_files(tmp_path, "*")


async def test_clients_sharing_the_store_refresh_once(
    auth_server: FakeAuthServer, url: str, clock: JumpClock, refreshes: RefreshLog
) -> None:
    async with (
        client_for(auth_server, url, clock) as first,
        client_for(auth_server, url, clock) as second,
    ):
        await first.search("grace")
        await second.search("grace")
        clock.time += auth_server.lifetime
        await first.search("grace")
        # ``second`` holds spent tokens: it reads the store again and uses first's.
        await second.search("grace")
        assert refreshes.count == 1
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0
    assert auth_server.rpc_refused == 0


async def test_tokens_written_since_the_read_win_the_compare_and_set(
    auth_server: FakeAuthServer, url: str, clock: JumpClock, client: m.AsyncMagisterium
) -> None:
    # Another writer (a new login, a lease that lapsed) replaces the sign-in while this
    # client's refresh is in flight: its write is refused, and it uses the newer tokens.
    await client.search("grace")
    before = await stored(url, auth_server.origin)
    assert before is not None
    newer = dataclasses.replace(before, access_token="at-newer", refresh_token="rt-newer")
    auth_server.access["at-newer"] = clock.now() + 10 * auth_server.lifetime
    auth_server.token_gate = asyncio.Event()
    auth_server.token_arrived.clear()
    clock.time += auth_server.lifetime
    call = asyncio.ensure_future(client.search("grace"))
    await auth_server.token_arrived.wait()
    store = RedisStore(url, auth_server.origin)
    await store.save(newer)
    await store.aclose()
    auth_server.token_gate.set()
    assert await call == []
    after = await stored(url, auth_server.origin)
    assert after is not None and after.access_token == "at-newer"
    assert source_of(client).credentials == newer


# Redis failing -------------------------------------------------------------------------


async def test_without_redis_the_token_in_hand_serves_until_it_expires(
    auth_server: FakeAuthServer,
    url: str,
    clock: JumpClock,
    client: m.AsyncMagisterium,
    persistent_redis: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="magisterium_async")
    await client.search("grace")
    persistent_redis.stop()
    clock.time += auth_server.lifetime - 5  # a refresh is due: the token has 5 s left
    assert await client.search("grace") == []
    assert auth_server.refreshes == 0
    clock.time += 10  # expired, and the store still away
    with pytest.raises(m.CredentialsError) as caught:
        await client.search("grace")
    message = str(caught.value)
    masked = f"redis://:***@127.0.0.1:{persistent_redis.port}/0"
    assert f"the credentials store: Redis at {masked} did not answer" in message
    assert caught.value.path == masked
    assert "did not answer" in caplog.text and "the token in hand is used" in caplog.text
    # Restarted with its data (appendonly): the client carries on.
    await asyncio.to_thread(persistent_redis.start)
    await require_password(persistent_redis)
    assert await client.search("grace") == []
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0
    assert "answers again" in caplog.text
    assert PASSWORD not in caplog.text + message + repr(source_of(client))


async def test_tokens_refreshed_while_redis_was_away_are_stored_when_it_returns(
    auth_server: FakeAuthServer,
    url: str,
    clock: JumpClock,
    client: m.AsyncMagisterium,
    persistent_redis: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="magisterium_async")
    await client.search("grace")
    auth_server.token_gate = asyncio.Event()
    auth_server.token_arrived.clear()
    clock.time += auth_server.lifetime
    call = asyncio.ensure_future(client.search("grace"))
    await auth_server.token_arrived.wait()  # the refresh token has rotated on the server
    await asyncio.to_thread(persistent_redis.stop)
    auth_server.token_gate.set()
    assert await call == []  # the new token serves, though it could not be stored
    await asyncio.to_thread(persistent_redis.start)
    await require_password(persistent_redis)
    clock.time += 1  # past the pause after the failure: the next call stores them
    await client.search("grace")
    # The lease this process could not give back is its own: it is freed, not waited out.
    assert "waiting for another process" not in caplog.text
    after = await stored(url, auth_server.origin)
    assert after is not None and after.refresh_token in auth_server.refresh_tokens
    async with client_for(auth_server, url, clock) as other:
        clock.time += auth_server.lifetime
        await other.search("grace")  # refreshes with the stored, live, refresh token
    assert auth_server.refreshes == 2 and auth_server.invalid_grants == 0


async def test_a_lost_sign_in_asks_to_log_in_again_naming_the_store(
    auth_server: FakeAuthServer, url: str, clock: JumpClock, client: m.AsyncMagisterium
) -> None:
    await client.search("grace")
    redis = connect(url, 5.0).client
    try:
        await redis.flushall()  # as a restart without persistence would
    finally:
        await redis.aclose()
    clock.time += auth_server.lifetime
    with pytest.raises(m.LoginRequiredError) as caught:
        await client.search("grace")
    masked = url.replace(PASSWORD, "***")
    assert f"magisterium-async login --credentials {masked}" in str(caught.value)
    assert PASSWORD not in str(caught.value)
    assert auth_server.refreshes == 0


async def test_no_sign_in_is_found_at_the_first_call_not_at_construction(
    auth_server: FakeAuthServer, redis_server: RedisServer, clock: JumpClock
) -> None:
    client = client_for(auth_server, redis_server.url, clock)  # reads nothing yet
    async with client:
        with pytest.raises(m.LoginRequiredError, match="no sign-in at redis://"):
            await client.search("grace")
    assert auth_server.rpc_calls == 0


async def test_an_unreachable_store_fails_within_its_bounds(
    auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    nowhere = RedisServer()  # never started: connection refused
    async with client_for(auth_server, nowhere.url, clock) as client:
        with pytest.raises(
            m.CredentialsError, match=r"credentials store: Redis at .* did not answer"
        ):
            await asyncio.wait_for(client.search("grace"), 10)


async def test_a_call_tries_a_store_that_does_not_answer_for_store_wait_seconds(
    auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    nowhere = RedisServer()  # never started: connection refused
    tries = 0

    class Counted(RedisStore):
        async def load(self) -> Credentials | None:
            nonlocal tries
            tries += 1
            return await super().load()

    store = Counted(nowhere.url, auth_server.origin)
    source = StoredToken(store, None, clock=clock, identity="test", store_wait=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(
            m.CredentialsError, match=r"credentials store: Redis at .* did not answer"
        ):
            await asyncio.wait_for(source.token(), 10)
    finally:
        await source.aclose()
    assert loop.time() - started >= 0.5  # it tried for store_wait, not less
    # ... and no longer: a try every STORE_RETRY (0.25 s) within 0.5 s, whatever each
    # took (the default, 5 s, would make 21).
    assert tries <= 3


# Signing in and out --------------------------------------------------------------------


async def test_status_and_logout_on_redis(auth_server: FakeAuthServer, url: str) -> None:
    masked = url.replace(PASSWORD, "***")
    where, signed_in = await auth_status(url, auth_server.base_url)
    assert where == masked and signed_in is not None and signed_in.issuer == auth_server.origin
    said = await logout(url, auth_server.base_url)
    assert said == f"Signed out: the tokens were revoked; deleted {masked}"
    assert auth_server.revoked == ["refresh_token", "access_token"]
    assert await stored(url, auth_server.origin) is None
    assert await auth_status(url, auth_server.base_url) == (masked, None)


async def test_a_refusal_is_said_as_one_at_once_never_as_an_outage(
    auth_server: FakeAuthServer, url: str, clock: JumpClock, persistent_redis: RedisServer
) -> None:
    wrong = url.replace(PASSWORD, "not-the-password")
    unknown = f"redis://nobody:{PASSWORD}@127.0.0.1:{persistent_redis.port}/0"
    for refused in (wrong, unknown):
        async with client_for(auth_server, refused, clock) as client:
            with pytest.raises(m.CredentialsError) as caught:
                await client.search("grace")
        message = str(caught.value)
        assert "refused the sign-in" in message and "check the user and password" in message
        assert "did not answer" not in message and "not-the-password" not in message
        assert PASSWORD not in message
        with pytest.raises(m.CredentialsError, match="refused the sign-in"):
            await auth_status(refused, auth_server.base_url)
    assert auth_server.rpc_calls == 0


async def test_the_readme_acl_user_keeps_the_sign_in_and_the_quota(
    auth_server: FakeAuthServer,
    redis_server: RedisServer,
    clock: JumpClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = connect(redis_server.url, 5.0).client
    try:
        await admin.execute_command("ACL", "SETUSER", "magisterium", f">{PASSWORD}", *README_ACL)
        url = f"redis://magisterium:{PASSWORD}@127.0.0.1:{redis_server.port}/0"
        await sign_in(auth_server, url)
        async with client_for(auth_server, url, clock) as client:
            await client.search("grace")
            clock.time += auth_server.lifetime
            assert await client.search("grace") == []
        assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0
        caplog.set_level(logging.WARNING, logger="magisterium_async")
        shared = m.AsyncMagisterium(
            base_url=auth_server.base_url,
            credentials=url,
            rate_limits=m.RateLimits(10, 2, period=60.0),
            shared_quota=url,  # on Redis's clock (TIME)
        )
        async with shared:
            await asyncio.gather(*(shared.search(f"grace {i}") for i in range(5)))
        # Redis admitted them, as this user: no fallback, and the log holds the starts.
        assert [r.getMessage() for r in caplog.records] == []
        assert await admin.keys("magisterium:{*}:default:state")
    finally:
        await admin.aclose()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[RedisServer, Path]]:
    """A ``redis-server`` speaking TLS alone, with a self-signed certificate for 127.0.0.1."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    server = RedisServer()
    server.options = [
        "--port", "0", "--tls-port", str(server.port), "--tls-cert-file", str(cert),
        "--tls-key-file", str(key), "--tls-auth-clients", "no",
    ]  # fmt: skip
    yield from ((s, cert) for s in _running(server))


async def test_a_rediss_url_keeps_the_sign_in_over_tls(
    auth_server: FakeAuthServer, tls_redis: tuple[RedisServer, Path], clock: JumpClock
) -> None:
    server, cert = tls_redis
    url = f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={cert}"
    await sign_in(auth_server, url)
    async with client_for(auth_server, url, clock) as client:
        clock.time += auth_server.lifetime
        assert await client.search("grace") == []
    assert auth_server.refreshes == 1
    plain: Any = f"redis://127.0.0.1:{server.port}/0"  # the TLS port refuses plain text
    async with client_for(auth_server, plain, clock) as client:
        with pytest.raises(m.CredentialsError):
            await client.search("grace")


async def test_no_token_or_password_in_reprs_errors_or_logs(
    auth_server: FakeAuthServer,
    url: str,
    clock: JumpClock,
    client: m.AsyncMagisterium,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="magisterium_async")
    await client.search("grace")
    clock.time += auth_server.lifetime
    await client.search("grace")  # a refresh, logged at DEBUG
    signed_in = await stored(url, auth_server.origin)
    assert signed_in is not None and auth_server.refreshes == 1
    auth_server.revoke_all()
    clock.time += auth_server.lifetime
    with pytest.raises(m.LoginRequiredError) as caught:
        await client.search("grace")
    source = source_of(client)
    seen = [repr(client), repr(source), repr(source.store), repr(signed_in), caplog.text]
    seen += [str(caught.value), repr(caught.value)]
    for secret in (PASSWORD, signed_in.access_token, str(signed_in.refresh_token)):
        for text in seen:
            assert secret not in text


async def test_a_damaged_sign_in_in_redis_is_set_aside_by_login_and_removed_by_logout(
    auth_server: FakeAuthServer, url: str
) -> None:
    key = signin_key(auth_server.origin)
    redis = connect(url, 5.0).client
    try:
        await redis.hset(key, "credentials", b"{")
        masked = url.replace(PASSWORD, "***")
        with pytest.raises(m.CredentialsError) as caught:
            await auth_status(url, auth_server.base_url)
        text = str(caught.value)
        assert f"the sign-in at {masked}" in text and PASSWORD not in text
        assert f"`magisterium-async login --credentials {masked}` replaces it" in text
        said: list[str] = []
        await sign_in(auth_server, url, say=said.append)
        [aside] = await redis.keys(f"{key}:corrupt-*")
        assert await redis.hget(aside.decode(), "credentials") == b"{"  # kept as it was
        assert any(f"moved it to {masked} (key {aside.decode()})" in line for line in said)
        assert await stored(url, auth_server.origin) is not None
        await redis.hset(key, "credentials", b"not json")
        assert "held no readable sign-in" in await logout(url, auth_server.base_url)
        assert await redis.hget(key, "credentials") is None
    finally:
        await redis.aclose()
