"""The credentials file: private from its first byte, replaced atomically, refused if not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async._auth._credentials import (
    credentials_location,
    default_credentials_path,
    delete_credentials,
    load_credentials,
    mask_url,
    save_credentials,
)
from tests.helpers.credentials import SECRET_ACCESS, SECRET_REFRESH, credentials


def test_saved_private_in_a_private_new_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "credentials.json"
    save_credentials(path, credentials())
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert load_credentials(path) == credentials()


def test_the_mode_is_private_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        save_credentials(tmp_path / "c.json", credentials())
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "c.json").st_mode & 0o777 == 0o600


def test_replaced_atomically_leaving_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, credentials())
    inode = os.stat(path).st_ino
    save_credentials(path, credentials(access_token="at-2"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["credentials.json"]
    assert os.stat(path).st_ino != inode  # a new file renamed over, not rewritten in place
    loaded = load_credentials(path)
    assert loaded is not None and loaded.access_token == "at-2"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
def test_a_file_group_or_others_can_use_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, credentials())
    path.chmod(mode)
    with pytest.raises(m.CredentialsError) as caught:
        load_credentials(path)
    assert "group or others can read or write it" in str(caught.value)
    assert f"chmod 600 {path}" in str(caught.value)
    assert caught.value.path == str(path)


def test_a_missing_file_is_none(tmp_path: Path) -> None:
    assert load_credentials(tmp_path / "absent.json") is None


def test_a_file_that_is_not_credentials_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text('{"access_token": "at-leaky"}')
    path.chmod(0o600)
    with pytest.raises(m.CredentialsError, match="not a magisterium-async credentials file") as c:
        load_credentials(path)
    assert "at-leaky" not in str(c.value)


def test_the_tokens_stay_out_of_repr() -> None:
    text = repr(credentials())
    assert SECRET_ACCESS not in text and SECRET_REFRESH not in text
    assert "client-1" in text


def test_where_the_file_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_credentials_path() == tmp_path / "xdg" / "magisterium-async" / (
        "credentials.json"
    )
    assert credentials_location() == default_credentials_path()
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", str(tmp_path / "env.json"))
    assert credentials_location() == tmp_path / "env.json"
    assert credentials_location(tmp_path / "arg.json") == tmp_path / "arg.json"


def test_a_refresh_keeps_what_it_was_not_told_anew() -> None:
    renewed = credentials().with_tokens("at-new", None, expires_at=1.0, lifetime=60.0, scope=None)
    assert renewed.access_token == "at-new"
    assert renewed.refresh_token == SECRET_REFRESH
    assert renewed.scopes == ["a2a", "offline_access"]


def test_delete(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, credentials())
    assert delete_credentials(path) is True
    assert not path.exists()
    assert delete_credentials(path) is False


def test_a_redis_url_is_a_location_as_given() -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://user:pw@cache.internal:6380/2"):
        assert credentials_location(url) == url
    assert credentials_location("C:/Users/me/credentials.json") == Path(
        "C:/Users/me/credentials.json"
    )


@pytest.mark.parametrize(
    "location", ["xyz://127.0.0.1:1/0", "http://example.com/c.json", "redis:/127.0.0.1:6379/0"]
)
def test_another_url_scheme_is_refused_never_taken_for_a_file(
    location: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)
    with pytest.raises(
        ValueError,
        match=r"unsupported location .*redis://, rediss:// .*redis\+cluster://.*redis\+sentinel://",
    ):
        credentials_location(location)
    with pytest.raises(ValueError, match="credentials"):
        m.AsyncMagisterium(credentials=location)
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", location)
    with pytest.raises(ValueError, match=r"\$MAGISTERIUM_CREDENTIALS"):
        m.AsyncMagisterium()
    assert list(tmp_path.iterdir()) == []


def test_a_refused_url_does_not_show_its_password() -> None:
    with pytest.raises(ValueError) as caught:
        credentials_location("memcached://admin:hunter2@cache:11211/0")
    assert "hunter2" not in str(caught.value) and "admin:***@cache" in str(caught.value)


def test_masked_urls_keep_everything_but_the_password() -> None:
    assert mask_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert mask_url("rediss://user:pw@h/1") == "rediss://user:***@h/1"
    assert mask_url("redis://user@h/1") == "redis://user@h/1"
    assert mask_url("redis://h/0?password=pw&db=1") == "redis://h/0?password=***&db=1"
    assert mask_url("redis://h:6379/0") == "redis://h:6379/0"
