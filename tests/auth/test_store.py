"""The credentials file: private from its first byte, replaced atomically, refused if not;
what a path is decided before it is opened; a full disk never costs the sign-in."""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async._auth import FileStore
from tests.conftest import JumpClock
from tests.helpers.credentials import (
    credentials,
    load_credentials,
    save_credentials,
)
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, sign_in

__all__ = ["auth_server"]


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)


@pytest.fixture
def clock(auth_server: FakeAuthServer) -> JumpClock:
    manual = JumpClock()
    auth_server.now = manual.now
    return manual


def client_of(auth_server: FakeAuthServer, path: Path, clock: JumpClock) -> m.AsyncMagisterium:
    return m.AsyncMagisterium(
        base_url=auth_server.base_url,
        credentials=path,
        rate_limits=m.RateLimits.unlimited(),
        clock=clock,
    )


# Private, atomic, refused when it is not ----------------------------------------------


async def test_saved_private_in_a_private_new_directory_under_any_umask(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "credentials.json"
    old = os.umask(0)
    try:
        await FileStore(path).save(credentials())
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert load_credentials(path) == credentials()


async def test_replaced_atomically_leaving_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    await FileStore(path).save(credentials())
    inode = os.stat(path).st_ino
    await FileStore(path).save(credentials(access_token="at-2"))
    assert os.stat(path).st_ino != inode  # a new file renamed over, not rewritten in place
    assert sorted(os.listdir(tmp_path)) == [
        "credentials.json",
        "credentials.json.lock",
    ]
    loaded = load_credentials(path)
    assert loaded is not None and loaded.access_token == "at-2"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
def test_a_file_group_or_others_can_use_is_refused_before_anything_is_sent(
    tmp_path: Path, mode: int
) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, credentials())
    path.chmod(mode)
    with pytest.raises(m.CredentialsError) as caught:
        m.AsyncMagisterium(credentials=path)
    assert "group or others can read or write it" in str(caught.value)
    assert f"chmod 600 {path}" in str(caught.value)
    assert caught.value.path == str(path)


def test_a_file_that_is_no_sign_in_is_said_without_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text('{"access_token": "at-leaky"}')
    path.chmod(0o600)
    with pytest.raises(m.CredentialsError, match="not a magisterium-async credentials file") as c:
        m.AsyncMagisterium(credentials=path)
    assert "at-leaky" not in str(c.value)


# What a path is, decided before it is opened --------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "credentials.fifo"
    os.mkfifo(path, 0o600)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "credentials.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(path))
        yield path


@pytest.mark.parametrize(
    ("what", "kind"),
    [
        ("directory", "a directory"),
        ("fifo", "a FIFO"),
        ("socket", "a socket"),
        ("null", "a character device"),
    ],
)
def test_what_is_not_a_file_is_refused_naming_it_and_never_opened(
    what: str, kind: str, tmp_path: Path, fifo: Path, unix_socket: Path
) -> None:
    # A FIFO with no writer would block an open for good: it is never opened.
    path = {"directory": tmp_path, "fifo": fifo, "socket": unix_socket, "null": Path(os.devnull)}[
        what
    ]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(m.CredentialsError) as caught:
        m.AsyncMagisterium(credentials=path)
    message = str(caught.value)
    assert f"the credentials path {path} is {kind}" in message
    assert "rm " not in message and "rmdir" not in message  # not a path the SDK made
    assert "--credentials PATH" in message
    assert sorted(os.listdir(tmp_path)) == before  # nothing made beside it
    assert not Path(f"{path}.lock").exists()


# A file saved by a Windows editor --------------------------------------------------------


async def test_a_file_saved_with_a_bom_and_crlf_is_read_alike_and_rewritten_plain(
    auth_server: FakeAuthServer, clock: JumpClock, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(auth_server, path)
    text = path.read_text()
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())  # Notepad
    async with client_of(auth_server, path, clock) as client:
        assert await client.search("grace") == []
        clock.time += auth_server.lifetime  # the refresh writes the file anew
        assert await client.search("grace") == []
    assert auth_server.refreshes == 1
    assert not path.read_bytes().startswith(b"\xef\xbb\xbf") and b"\r" not in path.read_bytes()


# A full disk -----------------------------------------------------------------------------


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """While ``full_disk[0]`` is true, syncing a file fails as a full disk does (ext4, XFS
    and NFS report it there, after the write was buffered)."""
    full = [True]
    real = os.fsync

    def fsync(fd: int) -> None:
        if full[0] and stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield full


async def test_a_login_on_a_full_disk_says_so_and_leaves_the_sign_in_as_it_was(
    auth_server: FakeAuthServer, tmp_path: Path, full_disk: list[bool]
) -> None:
    path = tmp_path / "credentials.json"
    full_disk[0] = False
    await sign_in(auth_server, path)
    before = path.read_bytes()
    full_disk[0] = True
    with pytest.raises(m.CredentialsError) as caught:
        await sign_in(auth_server, path)
    assert f"cannot write the credentials file {path}: the disk is full" in str(caught.value)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [
        "credentials.json",
        "credentials.json.lock",
    ]


async def test_a_full_disk_refuses_the_refresh_never_the_refreshed_refresh_token(
    auth_server: FakeAuthServer, clock: JumpClock, tmp_path: Path, full_disk: list[bool]
) -> None:
    path = tmp_path / "credentials.json"
    full_disk[0] = False
    await sign_in(auth_server, path)
    full_disk[0] = True
    async with client_of(auth_server, path, clock) as client:
        clock.time += auth_server.lifetime - 5  # a refresh is due: the token has 5 s left
        assert await client.search("grace") == []  # the token in hand serves
        clock.time += 10  # expired, and the disk still full
        with pytest.raises(m.CredentialsError, match="the disk is full"):
            await client.search("grace")
    assert auth_server.refreshes == 0  # nothing spent that the file could not keep
    full_disk[0] = False  # room again: a later run carries on with the stored sign-in
    async with client_of(auth_server, path, clock) as client:
        assert await client.search("grace") == []
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0
    assert sorted(os.listdir(tmp_path)) == [
        "credentials.json",
        "credentials.json.lock",
    ]


# Processes sharing the file ----------------------------------------------------------------


async def test_a_refresh_waits_for_another_processs_and_says_so_with_its_bound(
    tmp_path: Path,
) -> None:
    path = tmp_path / "credentials.json"
    await FileStore(path).save(credentials())
    told: list[float] = []
    async with FileStore(path).refreshing():
        waiting = FileStore(path, lock_timeout=0.1)
        with pytest.raises(m.CredentialsError, match="another process has held the lock") as c:
            async with waiting.refreshing(told.append):
                pytest.fail("two holders of one refresh lock")
    assert told == [0.1] and c.value.path == str(path)
    async with FileStore(path, lock_timeout=0).refreshing(told.append):  # free: at once
        pass
    assert told == [0.1]
