"""Where the token comes from, and staying signed in: refresh, single flight, file lock."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import magisterium_async as m
from magisterium_async._auth import StoredToken
from tests.conftest import JumpClock
from tests.helpers.credentials import load_credentials, save_credentials
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, sign_in

__all__ = ["auth_server"]


@pytest.fixture
def clock(auth_server: FakeAuthServer) -> JumpClock:
    manual = JumpClock()
    auth_server.now = manual.now
    return manual


@pytest.fixture
async def signed_in(auth_server: FakeAuthServer, clock: JumpClock, tmp_path: Path) -> Path:
    path = tmp_path / "cfg" / "credentials.json"
    await sign_in(auth_server, path)
    return path


@pytest.fixture
async def stored_client(
    auth_server: FakeAuthServer, clock: JumpClock, signed_in: Path
) -> AsyncIterator[m.AsyncMagisterium]:
    async with m.AsyncMagisterium(
        base_url=auth_server.base_url,
        credentials=signed_in,
        rate_limits=m.RateLimits.unlimited(),
        clock=clock,
    ) as client:
        yield client


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)
    monkeypatch.delenv("MAGISTERIUM_CREDENTIALS", raising=False)


# The token order --------------------------------------------------------------------


def test_token_argument_beats_environment_and_credentials(
    monkeypatch: pytest.MonkeyPatch, signed_in: Path, auth_server: FakeAuthServer
) -> None:
    monkeypatch.setenv("MAGISTERIUM_TOKEN", "from-env")
    client = m.AsyncMagisterium("explicit", base_url=auth_server.base_url, credentials=signed_in)
    assert client._token == "explicit" and client.token_source is None


def test_environment_beats_credentials(
    monkeypatch: pytest.MonkeyPatch, signed_in: Path, auth_server: FakeAuthServer
) -> None:
    monkeypatch.setenv("MAGISTERIUM_TOKEN", "from-env")
    client = m.AsyncMagisterium(base_url=auth_server.base_url, credentials=signed_in)
    assert client._token == "from-env" and client.token_source is None


def test_credentials_from_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, signed_in: Path, auth_server: FakeAuthServer
) -> None:
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", str(signed_in))
    client = m.AsyncMagisterium(base_url=auth_server.base_url)
    assert isinstance(client.token_source, StoredToken)
    assert client.token_source.store.where == str(signed_in)


def test_credentials_from_the_config_dir(
    monkeypatch: pytest.MonkeyPatch, signed_in: Path, auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    target = tmp_path / "xdg" / "magisterium-async" / "credentials.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(signed_in.read_bytes())
    target.chmod(0o600)
    client = m.AsyncMagisterium(base_url=auth_server.base_url)
    assert isinstance(client.token_source, StoredToken)
    assert client.token_source.store.where == str(target)


def test_no_token_anywhere_names_the_variable_and_login(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    with pytest.raises(m.MagisteriumError) as caught:
        m.AsyncMagisterium()
    assert "MAGISTERIUM_TOKEN" in str(caught.value)
    assert "magisterium-async login" in str(caught.value)


def test_a_missing_credentials_path_says_where(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(m.MagisteriumError, match="no credentials file") as caught:
        m.AsyncMagisterium(credentials=missing)
    assert str(missing) in str(caught.value) and "MAGISTERIUM_TOKEN" in str(caught.value)


def test_credentials_for_another_service_are_not_sent_there(signed_in: Path) -> None:
    with pytest.raises(m.MagisteriumError, match=r"are for http://127\.0\.0\.1"):
        m.AsyncMagisterium(base_url="https://elsewhere.example/a2a", credentials=signed_in)


def test_a_readable_file_is_refused_before_any_request(
    signed_in: Path, auth_server: FakeAuthServer
) -> None:
    signed_in.chmod(0o644)
    before = list(auth_server.requests), auth_server.rpc_calls
    with pytest.raises(m.CredentialsError) as caught:
        m.AsyncMagisterium(base_url=auth_server.base_url, credentials=signed_in)
    message = str(caught.value)
    assert "group or others can read" in message and f"chmod 600 {signed_in}" in message
    assert (auth_server.requests, auth_server.rpc_calls) == before


# A callable token --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_callable_token_is_asked_before_each_request(
    auth_server: FakeAuthServer, clock: JumpClock, kind: str
) -> None:
    auth_server.access["t-1"] = auth_server.access["t-2"] = float("inf")
    tokens = iter(["t-1", "t-2", "t-2"])
    calls = 0

    def sync_token() -> str:
        nonlocal calls
        calls += 1
        return next(tokens)

    async def async_token() -> str:
        return sync_token()

    headers: list[str] = []

    async def on_request_start(session: Any, ctx: Any, params: Any) -> None:
        headers.append(params.headers["Authorization"])

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with m.AsyncMagisterium(
        sync_token if kind == "sync" else async_token,
        base_url=auth_server.base_url,
        rate_limits=m.RateLimits.unlimited(),
        trace_configs=[trace],
    ) as client:
        for _ in range(3):
            await client.search("grace")
    assert calls == 3
    assert headers == ["Bearer t-1", "Bearer t-2", "Bearer t-2"]


async def test_a_callable_returning_garbage_is_a_clear_error(auth_server: FakeAuthServer) -> None:
    async with m.AsyncMagisterium(lambda: "", base_url=auth_server.base_url) as client:
        with pytest.raises(m.MagisteriumError, match="token= callable returned no usable token"):
            await client.search("grace")
    assert auth_server.rpc_calls == 0


# Refresh -----------------------------------------------------------------------------


async def test_the_token_is_refreshed_before_it_expires(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    await stored_client.search("grace")
    assert auth_server.refreshes == 0
    clock.time += auth_server.lifetime - 5  # inside the margin (10% of 60 s)
    await stored_client.search("grace")
    assert auth_server.refreshes == 1
    assert auth_server.rpc_refused == 0  # refreshed before, not after, a refusal
    clock.time += 30
    await stored_client.search("grace")
    assert auth_server.refreshes == 1


async def test_the_refreshed_tokens_are_stored(
    stored_client: m.AsyncMagisterium,
    auth_server: FakeAuthServer,
    clock: JumpClock,
    signed_in: Path,
) -> None:
    before = load_credentials(signed_in)
    clock.time += auth_server.lifetime
    await stored_client.search("grace")
    after = load_credentials(signed_in)
    assert before is not None and after is not None
    assert after.access_token != before.access_token
    assert after.refresh_token != before.refresh_token
    assert after.refresh_token in auth_server.refresh_tokens
    assert os.stat(signed_in).st_mode & 0o777 == 0o600


async def test_fifty_calls_on_an_expired_token_refresh_once(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    clock.time += 10 * auth_server.lifetime
    await asyncio.gather(*(stored_client.search(f"q{i}") for i in range(50)))
    assert auth_server.refreshes == 1
    assert auth_server.rpc_refused == 0
    assert auth_server.rpc_calls == 50


async def test_a_refused_token_is_refreshed_and_the_call_retried_once(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    auth_server.access.clear()  # the server forgot the access token early
    once = stored_client.with_options(max_retries=0)
    assert (await once.search("grace")) == []
    assert auth_server.refreshes == 1
    assert auth_server.rpc_refused == 1 and auth_server.rpc_calls == 2


async def test_concurrent_refusals_refresh_once(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer
) -> None:
    auth_server.access.clear()
    await asyncio.gather(*(stored_client.search(f"q{i}") for i in range(20)))
    assert auth_server.refreshes == 1
    assert auth_server.invalid_grants == 0


async def test_a_token_refused_twice_is_an_authentication_error(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer
) -> None:
    original = auth_server._issue

    def issue_unusable(grant: Any) -> dict[str, Any]:
        body = original(grant)
        auth_server.access.pop(body["access_token"])
        return body

    auth_server._issue = issue_unusable  # type: ignore[method-assign]
    auth_server.access.clear()
    with pytest.raises(m.AuthenticationError):
        await stored_client.search("grace")
    assert auth_server.rpc_calls == 2 and auth_server.refreshes == 1


async def test_an_outage_of_the_token_endpoint_is_retried_like_a_5xx(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    auth_server.token_outages = 1
    clock.time += auth_server.lifetime
    assert await stored_client.search("grace") == []
    assert auth_server.requests[-2:] == ["token:refresh_token", "token:refresh_token"]
    assert auth_server.rpc_refused == 0


async def test_a_revoked_refresh_token_says_to_log_in_again(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    auth_server.revoke_all()
    clock.time += auth_server.lifetime
    with pytest.raises(m.AuthenticationError) as caught:
        await stored_client.search("grace")
    assert isinstance(caught.value, m.LoginRequiredError)
    assert "magisterium-async login" in str(caught.value)
    assert "invalid_grant" in str(caught.value)
    assert auth_server.rpc_calls == 0


async def test_a_failed_refresh_is_shared_by_every_waiting_call(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    auth_server.revoke_all()
    clock.time += auth_server.lifetime
    results = await asyncio.gather(
        *(stored_client.search(f"q{i}") for i in range(20)), return_exceptions=True
    )
    assert all(isinstance(r, m.LoginRequiredError) for r in results)
    assert auth_server.refreshes == 1 and auth_server.rpc_calls == 0


async def test_a_call_cancelled_mid_refresh_keeps_the_rotated_token(
    stored_client: m.AsyncMagisterium,
    auth_server: FakeAuthServer,
    clock: JumpClock,
    signed_in: Path,
) -> None:
    auth_server.token_gate = asyncio.Event()
    auth_server.token_arrived.clear()  # set by the login's code exchange
    clock.time += auth_server.lifetime
    call = asyncio.ensure_future(stored_client.search("grace"))
    await auth_server.token_arrived.wait()  # the server is rotating the refresh token now
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    auth_server.token_gate.set()
    await stored_client.aclose()  # waits for the refresh to store what it got
    stored = load_credentials(signed_in)
    assert stored is not None and stored.refresh_token in auth_server.refresh_tokens
    async with m.AsyncMagisterium(
        base_url=auth_server.base_url, credentials=signed_in, clock=clock
    ) as again:
        assert await again.search("grace") == []
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0


async def test_no_refresh_token_says_to_log_in_again(
    auth_server: FakeAuthServer, clock: JumpClock, signed_in: Path
) -> None:
    stored = load_credentials(signed_in)
    assert stored is not None
    save_credentials(signed_in, dataclasses.replace(stored, refresh_token=None, expires_at=0.0))
    async with m.AsyncMagisterium(
        base_url=auth_server.base_url, credentials=signed_in, clock=clock
    ) as client:
        with pytest.raises(m.LoginRequiredError, match=r"no refresh token.*login"):
            await client.search("grace")
    assert auth_server.refreshes == 0


async def test_tokens_another_process_refreshed_are_used_not_refreshed_again(
    auth_server: FakeAuthServer, clock: JumpClock, signed_in: Path
) -> None:
    async with (
        m.AsyncMagisterium(
            base_url=auth_server.base_url,
            credentials=signed_in,
            rate_limits=m.RateLimits.unlimited(),
            clock=clock,
        ) as first,
        m.AsyncMagisterium(
            base_url=auth_server.base_url,
            credentials=signed_in,
            rate_limits=m.RateLimits.unlimited(),
            clock=clock,
        ) as second,
    ):
        clock.time += auth_server.lifetime
        await first.search("grace")
        assert auth_server.refreshes == 1
        # ``second`` still holds the old tokens; its rotated refresh token is spent.
        await second.search("grace")
        assert auth_server.refreshes == 1
        assert auth_server.invalid_grants == 0


# The token stays secret -------------------------------------------------------------


async def test_no_token_in_repr_errors_or_logs(
    stored_client: m.AsyncMagisterium,
    auth_server: FakeAuthServer,
    clock: JumpClock,
    signed_in: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG", logger="magisterium_async")
    stored = load_credentials(signed_in)
    assert stored is not None
    secrets = {stored.access_token, stored.refresh_token}
    source = stored_client.token_source
    auth_server.revoke_all()
    clock.time += auth_server.lifetime
    with pytest.raises(m.LoginRequiredError) as caught:
        await stored_client.search("grace")
    seen: list[str] = [repr(stored_client), repr(source), repr(stored), caplog.text]
    error: BaseException | None = caught.value
    while error is not None:
        seen += [str(error), repr(error), repr(getattr(error, "args", ""))]
        error = error.__cause__ or error.__context__
    for text in seen:
        for secret in secrets:
            assert secret not in text


def test_the_stored_file_is_what_the_spec_says(
    signed_in: Path, auth_server: FakeAuthServer
) -> None:
    data = json.loads(signed_in.read_text())
    assert data["issuer"] == auth_server.origin
    assert data["token_endpoint"] == auth_server.origin + "/oauth/token"
    assert data["client_id"] in auth_server.clients
    assert data["access_token"] in auth_server.access
    assert data["refresh_token"] in auth_server.refresh_tokens
    assert data["expires_at"] > 0 and data["scope"] == "a2a"
    assert os.stat(signed_in).st_mode & 0o777 == 0o600
    assert os.stat(signed_in.parent).st_mode & 0o777 == 0o700


async def test_a_token_answer_without_a_token_is_refused_naming_no_token(
    stored_client: m.AsyncMagisterium, auth_server: FakeAuthServer, clock: JumpClock
) -> None:
    original = auth_server._issue

    def no_access_token(grant: Any) -> dict[str, Any]:
        body = original(grant)
        del body["access_token"]
        return body

    auth_server._issue = no_access_token  # type: ignore[method-assign]
    clock.time += auth_server.lifetime
    with pytest.raises(m.OAuthError, match="not a token response") as caught:
        await stored_client.search("grace")
    assert "rt-" not in str(caught.value) and auth_server.rpc_calls == 0
