"""login, logout and auth status as library calls, against the fake authorization server."""

from __future__ import annotations

import asyncio
import os
import urllib.request
import webbrowser
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import magisterium_async as m
from magisterium_async._auth._credentials import default_credentials_path, load_credentials
from magisterium_async._auth._login import auth_status, login, logout
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, redirect_location, sign_in

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


async def test_login_by_the_browser_redirect(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    stored = load_credentials(path)
    assert stored is not None
    assert stored.access_token in auth_server.access
    assert auth_server.requests == ["metadata", "register", "authorize", "token:authorization_code"]
    async with m.AsyncMagisterium(base_url=auth_server.base_url, credentials=path) as client:
        assert await client.search("grace") == []


async def test_login_opens_the_browser_unless_told_not_to(
    auth_server: FakeAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []

    def browser(url: str) -> bool:  # a browser on this machine: it follows the redirect
        opened.append(url)
        with urllib.request.urlopen(url, timeout=30) as landed:
            return bool(landed.status == 200)

    monkeypatch.setattr(webbrowser, "open", browser)
    shown: list[str] = []
    await login(
        auth_server.base_url, tmp_path / "c.json", say=lambda line: None, show_url=shown.append
    )
    assert opened == shown and len(opened) == 1
    stored = load_credentials(tmp_path / "c.json")
    assert stored is not None and stored.access_token in auth_server.access


async def test_login_by_the_pasted_url(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    paste = Paste()
    said: list[str] = []
    shown = Shown()

    async def person() -> None:
        paste.lines.put_nowait("\n")
        location = await redirect_location(await shown.future)
        paste.lines.put_nowait(location.replace("state=", "state=forged") + "\n")
        paste.lines.put_nowait(location + "\n")

    task = asyncio.ensure_future(person())
    await login(
        auth_server.base_url,
        path,
        open_browser=False,
        pasted=paste,
        say=said.append,
        show_url=shown,
    )
    await task
    assert any("not the URL this sign-in was redirected to" in line for line in said)
    assert any("paste" in line for line in said)
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
    await login(
        auth_server.base_url,
        tmp_path / "c.json",
        open_browser=False,
        say=lambda line: None,
        show_url=shown,
    )
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


async def test_a_refused_consent_is_an_oauth_error(
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
    with pytest.raises(m.OAuthError, match="access_denied"):
        await login(
            auth_server.base_url,
            tmp_path / "c.json",
            open_browser=False,
            say=lambda line: None,
            show_url=shown,
        )
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
        await login(auth_server.base_url, path, open_browser=False, say=lambda line: None)
    assert auth_server.requests == requests


async def test_logout_revokes_then_deletes(auth_server: FakeAuthServer, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    result = await logout(path)
    assert result.removed and result.revoked is True
    assert auth_server.revoked == ["refresh_token", "access_token"]
    assert auth_server.refresh_tokens == {} and auth_server.access == {}
    assert not path.exists()
    again = await logout(path)
    assert not again.removed and again.revoked is None


async def test_logout_without_revocation_only_deletes(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    auth_server.revocation = False
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    result = await logout(path)
    assert result.removed and result.revoked is None and auth_server.revoked == []


async def test_status_tells_issuer_expiry_and_scopes_never_a_token(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    assert await auth_status(path) is None
    await sign_in(auth_server, path)
    status = await auth_status(path)
    stored = load_credentials(path)
    assert status is not None and stored is not None
    assert status.issuer == auth_server.origin and status.scopes == ["a2a"]
    assert status.expires_at is not None and status.refreshable
    text = repr(status) + str(status.as_json())
    assert stored.access_token not in text and str(stored.refresh_token) not in text


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
    assert any(f"{path} holds no readable sign-in: moved it to {aside}" in s for s in said)
    assert load_credentials(path) is not None
    path.write_text("[]")  # damaged again: logout removes it, with nothing to revoke
    result = await logout(path)
    assert result.removed and result.unreadable and result.revoked is None
    assert not path.exists() and auth_server.revoked == []


async def test_a_named_file_that_is_no_sign_in_is_never_moved_or_deleted(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    # `logout --credentials ~/notes.txt` (private, as a key file is): the user's own file.
    path = tmp_path / "notes.txt"
    path.write_text("my precious notes\n")
    path.chmod(0o600)
    with pytest.raises(m.CredentialsError) as refused_out:
        await logout(path)
    with pytest.raises(m.CredentialsError) as refused_in:
        await sign_in(auth_server, path, say=lambda _: None)
    for refused in (refused_out, refused_in):
        assert "no command moves or deletes a file you named" in str(refused.value)
        assert "rm " not in str(refused.value)  # no ready-to-paste removal of a user's file
    assert path.read_text() == "my precious notes\n"
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    assert auth_server.requests == []


async def test_a_directory_at_the_path_is_refused_by_each_flow_naming_it(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    path.mkdir()
    for flow in (
        auth_status(path),
        logout(path),
        login(auth_server.base_url, path, open_browser=False, say=lambda line: None),
    ):
        with pytest.raises(m.CredentialsError, match="is a directory, not a credentials file"):
            await flow
    with pytest.raises(m.CredentialsError, match=f"rmdir {path}"):
        m.AsyncMagisterium(base_url=auth_server.base_url, credentials=path)
    assert auth_server.requests == [] and path.is_dir()


async def test_a_named_empty_file_is_no_sign_in_yet_and_one_of_any_version_is_set_aside(
    auth_server: FakeAuthServer, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.json"  # made by mktemp to hold a sign-in
    empty.write_bytes(b"")
    empty.chmod(0o600)
    await sign_in(auth_server, empty, say=lambda _: None)
    assert load_credentials(empty) is not None
    damaged = tmp_path / "mine.json"  # this SDK's file, cut short: a format, no tokens
    damaged.write_text('{"version": 1}')
    damaged.chmod(0o600)
    said: list[str] = []
    await sign_in(auth_server, damaged, say=said.append)
    assert any("moved it to" in line for line in said)
    assert load_credentials(damaged) is not None
