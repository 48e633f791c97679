"""Where the credentials live (a path, a Redis URL, nothing else), and what they show."""

from __future__ import annotations

from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async._auth import credentials_location, default_credentials_path
from tests.helpers.credentials import SECRET_ACCESS, SECRET_REFRESH, credentials


def test_the_tokens_stay_out_of_repr() -> None:
    text = repr(credentials())
    assert SECRET_ACCESS not in text and SECRET_REFRESH not in text
    assert "client-1" in text


def test_where_the_file_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "magisterium-async" / "credentials.json"
    assert default_credentials_path() == default == credentials_location()
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", str(tmp_path / "env.json"))
    assert credentials_location() == tmp_path / "env.json"
    assert credentials_location(tmp_path / "arg.json") == tmp_path / "arg.json"


def test_a_redis_url_is_a_location_as_given_and_a_drive_letter_a_path() -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://user:pw@cache.internal:6380/2"):
        assert credentials_location(url) == url
    for url in ("unix:///run/redis.sock", "redis+sentinel://h:26379/main", "REDIS://h/0"):
        assert credentials_location(url) == url
    assert credentials_location("C:/Users/me/credentials.json") == Path(
        "C:/Users/me/credentials.json"
    )


@pytest.mark.parametrize(
    "location",
    ["xyz://127.0.0.1:1/0", "http://example.com/c.json", "redis:/127.0.0.1:6379/0", "file:/x"],
)
def test_another_url_scheme_is_refused_never_taken_for_a_file(
    location: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"unsupported location .*redis\+cluster://"):
        credentials_location(location)
    with pytest.raises(ValueError, match="credentials"):
        m.AsyncMagisterium(credentials=location)
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", location)
    with pytest.raises(ValueError, match=r"\$MAGISTERIUM_CREDENTIALS"):
        m.AsyncMagisterium()
    assert list(tmp_path.iterdir()) == []


def test_an_empty_location_is_refused_and_a_blank_variable_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for empty in ("", "  "):  # --credentials "$UNSET": never the current directory
        with pytest.raises(ValueError, match="the credentials location is empty"):
            m.AsyncMagisterium(credentials=empty)
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", " ")
    assert credentials_location() == default_credentials_path()


def test_a_refused_url_does_not_show_its_password() -> None:
    with pytest.raises(ValueError) as caught:
        credentials_location("memcached://admin:hunter2@cache:11211/0")
    assert "hunter2" not in str(caught.value) and "admin:***@cache" in str(caught.value)
