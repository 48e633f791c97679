"""The credentials file behind the store seam: load, save, delete, the refresh lock, and
the fence a compare-and-set compares."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async._auth import _credentials
from magisterium_async._auth._store import FileStore, StoreUnreachableError, fence
from tests.helpers.credentials import SECRET_ACCESS, SECRET_REFRESH, credentials


async def test_a_sign_in_is_saved_loaded_and_deleted(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "cfg" / "credentials.json")
    assert await store.load() is None  # never signed in
    await store.save(credentials())
    assert await store.load() == credentials()
    assert await store.delete() is True
    assert await store.load() is None
    assert await store.delete() is False  # nothing left to delete
    await store.aclose()


async def test_a_saved_sign_in_is_private_in_a_private_new_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "credentials.json"
    await FileStore(path).save(credentials())
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700


async def test_replace_writes_the_refreshed_tokens(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "credentials.json")
    old = credentials()
    await store.save(old)
    new = credentials(access_token="at-new", refresh_token="rt-new")
    async with store.refreshing():
        assert await store.replace(old, new) is True
    loaded = await store.load()
    assert loaded is not None
    assert (loaded.access_token, loaded.refresh_token) == ("at-new", "rt-new")


def test_the_store_says_where_it_is_and_how_to_sign_in_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "credentials.json"
    store = FileStore(path)
    assert store.where == str(path) and repr(store) == f"FileStore({str(path)!r})"
    # A file of one's own choosing is named, so that the command signs in there.
    assert store.login_command() == f"magisterium-async login --credentials {path}"
    spaced = tmp_path / "my sign in.json"
    assert FileStore(spaced).login_command().endswith(f"--credentials '{spaced}'")
    # The default file needs no flag: every command finds it by itself.
    default = tmp_path / "config" / "credentials.json"
    monkeypatch.setattr(_credentials, "default_credentials_path", lambda: default)
    assert FileStore(default).login_command() == "magisterium-async login"


async def test_a_refresh_lock_held_elsewhere_is_a_store_unreachable_error_naming_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "credentials.json"
    holder = FileStore(path)
    other = FileStore(path, lock_timeout=0)  # one try, no waiting
    async with holder.refreshing():
        with pytest.raises(StoreUnreachableError, match="another process has held") as caught:
            async with other.refreshing():
                pytest.fail("two holders of one refresh lock")
    assert caught.value.path == str(path)
    assert isinstance(caught.value, m.CredentialsError)  # a MagisteriumError, as every failure
    async with other.refreshing():  # released: the next refresh may go
        pass


def test_the_fence_is_a_digest_of_both_tokens_and_shows_neither() -> None:
    signed_in = credentials()
    digest = fence(signed_in)
    assert len(digest) == 32 and int(digest, 16) >= 0
    assert fence(credentials()) == digest  # the same tokens: the same fence
    assert fence(credentials(access_token="at-other")) != digest
    assert fence(credentials(refresh_token="rt-other")) != digest
    assert fence(credentials(refresh_token=None)) != digest
    assert SECRET_ACCESS not in digest and SECRET_REFRESH not in digest


async def test_a_save_while_another_process_refreshes_is_a_store_unreachable_error(
    tmp_path: Path,
) -> None:
    """``login`` writes under the refresh lock: a lock held past the wait is a
    ``MagisteriumError`` naming the file, never filelock's own ``Timeout``; nothing is
    written."""
    path = tmp_path / "credentials.json"
    holder = FileStore(path)
    other = FileStore(path, lock_timeout=0)
    async with holder.refreshing():
        with pytest.raises(StoreUnreachableError, match="another process has held") as caught:
            await other.save(credentials())
    assert caught.value.path == str(path)
    assert await other.load() is None
    await other.save(credentials())  # released: the save goes through
    assert await other.load() == credentials()


def test_a_bad_lock_timeout_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lock_timeout"):
        FileStore(tmp_path / "credentials.json", lock_timeout=-1)


async def test_waiting_for_another_processs_refresh_is_said_with_its_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="magisterium_async.auth")
    path = tmp_path / "credentials.json"
    holder = FileStore(path)
    other = FileStore(path, lock_timeout=0.3)
    async with holder.refreshing():
        with pytest.raises(StoreUnreachableError):
            async with other.refreshing():
                pytest.fail("two holders of one refresh lock")
    [record] = caplog.records
    assert record.getMessage() == (
        f"waiting for another process's refresh of the sign-in at {path} (at most 0.3 s)"
    )
    assert record.__dict__["wait_for"] == 0.3  # for a status line
    caplog.clear()
    async with other.refreshing():  # free: taken at once, nothing said
        pass
    assert caplog.records == []
