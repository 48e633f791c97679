"""login, logout and auth status as library calls: the OAuth steps (discovery, registration
once, PKCE S256, the redirect or the pasted URL) against the fake authorization server, and
what each refuses before anything is sent."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import web

import magisterium_async as m
from magisterium_async._auth import auth_status, default_credentials_path, login, logout
from tests.conftest import ScriptedServer
from tests.helpers.credentials import load_credentials
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, redirect_location, sign_in
from tests.helpers.raw_server import RawServer, chain

__all__ = ["auth_server"]


class Shown:
    """The authorization URL the login showed, awaitable."""

    def __init__(self) -> None:
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def __call__(self, url: str) -> None:
        self.future.set_result(url)


class Paste:
    """Lines typed into the login's stdin, as the test decides."""

    def __init__(self) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()

    async def __aiter__(self) -> AsyncIterator[str]:
        while (line := await self.lines.get()) is not None:
            yield line


def quiet(line: str) -> None:
    """What the login says to the person, unheard."""


async def test_login_by_the_browser_redirect_with_pkce_s256_and_state(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    shown: list[str] = []
    await sign_in(auth_server, path, show=shown.append)
    query = parse_qs(urlsplit(shown[0]).query)
    assert query["response_type"] == ["code"] and query["code_challenge_method"] == ["S256"]
    assert (
        len(query["state"][0]) >= 32 and urlsplit(query["redirect_uri"][0]).hostname == "127.0.0.1"
    )
    assert len(query["code_challenge"][0]) == 43  # base64url of a SHA-256, unpadded
    stored = load_credentials(path)
    assert stored is not None and stored.access_token in auth_server.access
    assert auth_server.requests == ["metadata", "register", "authorize", "token:authorization_code"]
    async with m.AsyncMagisterium(base_url=auth_server.base_url, credentials=path) as client:
        assert await client.search("grace") == []


async def test_login_by_the_pasted_url(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    paste = Paste()
    said: list[str] = []
    shown = Shown()

    async def person() -> None:
        paste.lines.put_nowait("\n")
        location = await redirect_location(await shown.future)
        paste.lines.put_nowait(location.replace("state=", "state=forged") + "\n")
        paste.lines.put_nowait("  " + location + "\r\n")  # as a terminal may hand it over

    task = asyncio.ensure_future(person())
    await login(auth_server.base_url, path, pasted=paste, say=said.append, show_url=shown)
    await task
    assert said == [
        "that is not the URL this sign-in was redirected to (no code, or its state does not "
        "match); paste the whole URL from the browser's address bar"
    ]
    stored = load_credentials(path)
    assert stored is not None and stored.access_token in auth_server.access


async def test_a_redirect_with_another_state_is_turned_away(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    shown = Shown()
    statuses: list[int] = []

    async def browser() -> None:
        location = await redirect_location(await shown.future)
        async with aiohttp.ClientSession() as session:
            for query in (location.replace("state=", "state=x"), location):
                async with session.get(query) as response:
                    statuses.append(response.status)

    task = asyncio.ensure_future(browser())
    await login(auth_server.base_url, tmp_path / "c.json", say=quiet, show_url=shown)
    await task
    assert statuses == [400, 200]


async def test_a_second_login_keeps_the_registered_client(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    first = load_credentials(path)
    await sign_in(auth_server, path)
    second = load_credentials(path)
    assert first is not None and second is not None
    assert auth_server.registrations == 1
    assert second.client_id == first.client_id
    assert second.access_token != first.access_token


async def test_a_refused_consent_is_an_oauth_error_and_writes_nothing(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    shown = Shown()

    async def deny() -> None:
        location = await redirect_location(await shown.future)
        state = location.split("state=")[1]
        denied = location.split("?")[0] + f"?error=access_denied&state={state}"
        async with aiohttp.ClientSession() as session, session.get(denied) as response:
            assert response.status == 200

    task = asyncio.ensure_future(deny())
    with pytest.raises(m.OAuthError, match="refused the sign-in \\(access_denied\\)"):
        await login(auth_server.base_url, tmp_path / "c.json", say=quiet, show_url=shown)
    await task
    assert not (tmp_path / "c.json").exists()


async def test_login_refuses_an_unsafe_existing_file_before_sending(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    path.chmod(0o644)
    requests = list(auth_server.requests)
    with pytest.raises(m.CredentialsError, match="chmod 600"):
        await login(auth_server.base_url, path, say=quiet, show_url=quiet)
    assert auth_server.requests == requests


# Discovery: tokens go to no endpoint the service did not name ----------------------------


def _metadata(server: ScriptedServer, **changes: object) -> dict[str, object]:
    origin = server.url.rsplit("/api/", 1)[0]
    body: dict[str, object] = {
        "issuer": origin,
        "authorization_endpoint": origin + "/authorize",
        "token_endpoint": origin + "/token",
        "registration_endpoint": origin + "/register",
    }
    return {**body, **changes}


def serve_metadata(server: ScriptedServer, body: object, status: int = 200) -> None:
    async def metadata(request: web.Request) -> web.Response:
        return web.json_response(body, status=status)

    server.extra_routes["/.well-known/oauth-authorization-server"] = metadata


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"issuer": "https://evil.example"}, "names the issuer"),
        ({"token_endpoint": "http://evil.example/token"}, "token_endpoint"),
        ({"revocation_endpoint": "http://evil.example/revoke"}, "revocation_endpoint"),
        ({"code_challenge_methods_supported": ["plain"]}, "PKCE S256"),
        ({"registration_endpoint": None}, "offers no dynamic client registration"),
    ],
)
async def test_metadata_that_would_leak_tokens_is_refused(
    server: ScriptedServer, tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    serve_metadata(server, _metadata(server, **changes))
    with pytest.raises(m.OAuthError, match=message):
        await login(server.url, tmp_path / "c.json", say=quiet, show_url=quiet)
    assert server.requests == [] and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"error": "nope"}, 404, r"no OAuth authorization server.*HTTP 404"),
        ({"issuer": "x", "extra": [[[]]]}, 200, "is not authorization-server metadata"),
    ],
)
async def test_no_authorization_server_is_a_clear_error(
    server: ScriptedServer, tmp_path: Path, body: Any, status: int, error: str
) -> None:
    serve_metadata(server, body, status)
    with pytest.raises(m.OAuthError, match=error):
        await login(server.url, tmp_path / "c.json", say=quiet, show_url=quiet)


async def test_deeply_nested_metadata_is_refused_as_an_oauth_error(
    server: ScriptedServer, tmp_path: Path
) -> None:
    async def metadata(request: web.Request) -> web.StreamResponse:
        body = '{"issuer": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
        return web.Response(text=body, content_type="application/json")

    server.extra_routes["/.well-known/oauth-authorization-server"] = metadata
    with pytest.raises(m.OAuthError):
        await login(server.url, tmp_path / "c.json", say=quiet, show_url=quiet)


async def test_no_answer_is_a_connection_error_carrying_nothing_of_aiohttp(tmp_path: Path) -> None:
    with pytest.raises(m.APIConnectionError, match="discovery failed"):
        await login("http://127.0.0.1:1/a2a", tmp_path / "c.json", say=quiet, show_url=quiet)
    # aiohttp's exceptions show the request in their repr: none rides along in the chain.
    async with RawServer(b"NOT-HTTP garbage\r\n\r\n") as url:
        with pytest.raises(m.APIConnectionError, match="discovery failed") as caught:
            await login(url, tmp_path / "c.json", say=quiet, show_url=quiet)
    assert chain(caught.value) == [caught.value]


async def test_the_code_is_exchanged_with_the_verifier_of_the_challenge(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    challenges: list[str] = []
    verifiers: list[str] = []
    exchange = auth_server._token

    async def recorded(request: web.Request) -> web.Response:
        verifiers.append(str((await request.post()).get("code_verifier")))
        return await exchange(request)

    auth_server._token = recorded  # type: ignore[method-assign]
    await sign_in(
        auth_server,
        tmp_path / "c.json",
        show=lambda url: challenges.extend(parse_qs(urlsplit(url).query)["code_challenge"]),
    )
    [verifier], [challenge] = verifiers, challenges
    assert 43 <= len(verifier) <= 128 and verifier not in challenge
    digest = hashlib.sha256(verifier.encode()).digest()
    assert challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# logout and auth status --------------------------------------------------------------------


async def test_logout_revokes_then_deletes(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    said = await logout(path)
    assert said == f"Signed out: the tokens were revoked; deleted {path}"
    assert auth_server.revoked == ["refresh_token", "access_token"]
    assert auth_server.refresh_tokens == {} and auth_server.access == {}
    assert not path.exists()
    assert await logout(path) == f"not signed in (no credentials at {path})"


async def test_logout_without_revocation_only_deletes(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    auth_server.revocation = False
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    assert "the server offers no revocation" in await logout(path)
    assert auth_server.revoked == [] and not path.exists()


async def test_status_reads_the_store_and_sends_nothing(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    assert await auth_status(path) == (str(path), None)
    await sign_in(auth_server, path)
    requests = list(auth_server.requests)
    assert await auth_status(path) == (str(path), load_credentials(path))
    assert auth_server.requests == requests


# A store that holds something else ----------------------------------------------------------


async def test_a_damaged_file_is_set_aside_by_login_and_removed_by_logout(
    auth_server: FakeAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = default_credentials_path()  # the SDK's own file: what it holds is the SDK's
    path.parent.mkdir(parents=True)
    path.write_text('{"origin": ')
    path.chmod(0o600)
    with pytest.raises(m.CredentialsError) as caught:
        await auth_status(path)
    assert str(path) in str(caught.value) and "logout" in str(caught.value)
    said: list[str] = []
    await sign_in(auth_server, path, say=said.append)
    [aside] = await asyncio.to_thread(lambda: list(path.parent.glob("credentials.json.corrupt-*")))
    assert aside.read_text() == '{"origin": ' and aside.stat().st_mode & 0o777 == 0o600
    assert said == [f"{path} holds no readable sign-in: moved it to {aside}; signing in anew"]
    assert load_credentials(path) is not None
    path.write_text("[]")  # damaged again: logout removes it, with nothing to revoke
    assert "held no readable sign-in, so nothing was revoked" in await logout(path)
    assert not path.exists() and auth_server.revoked == []


async def test_a_named_file_that_is_no_sign_in_is_never_moved_or_deleted(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    # `logout --credentials ~/notes.txt` (private, as a key file is): the user's own file.
    for content in (b"my precious notes\n", b"\x89PNG\r\n\x1a\n\xff\xfe", b"{}" * 600_000):
        path = tmp_path / "notes.txt"
        path.write_bytes(content)
        path.chmod(0o600)
        with pytest.raises(m.CredentialsError) as refused_out:
            await logout(path)
        with pytest.raises(m.CredentialsError) as refused_in:
            await sign_in(auth_server, path)
        for refused in (refused_out, refused_in):
            assert "no command moves or deletes a file you named" in str(refused.value)
            assert "rm " not in str(refused.value)  # no ready-to-paste removal of a user's file
        assert path.read_bytes() == content
        assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    assert auth_server.requests == []


async def test_a_named_empty_file_is_no_sign_in_yet_and_one_of_any_version_is_set_aside(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.json"  # made by mktemp to hold a sign-in
    empty.write_bytes(b"")
    empty.chmod(0o600)
    await sign_in(auth_server, empty)
    assert load_credentials(empty) is not None
    damaged = tmp_path / "mine.json"  # this SDK's file, cut short: a format, no tokens
    damaged.write_text('{"version": 1}')
    damaged.chmod(0o600)
    said: list[str] = []
    await sign_in(auth_server, damaged, say=said.append)
    assert any("moved it to" in line for line in said)
    assert load_credentials(damaged) is not None
