"""The environment variables and their order: what is given wins, then the variable, then
the default; an empty variable counts as unset."""

from __future__ import annotations

import pytest

from magisterium_async import _env
from magisterium_async._config import DEFAULT_BASE_URL


def test_the_names_are_the_documented_ones() -> None:
    assert (_env.TOKEN_ENV, _env.CREDENTIALS_ENV, _env.BASE_URL_ENV, _env.REDIS_URL_ENV) == (
        "MAGISTERIUM_TOKEN",
        "MAGISTERIUM_CREDENTIALS",
        "MAGISTERIUM_BASE_URL",
        "MAGISTERIUM_REDIS_URL",
    )


def test_the_base_url_is_given_then_the_variable_then_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_env.BASE_URL_ENV, raising=False)
    assert _env.base_url(None) == DEFAULT_BASE_URL
    monkeypatch.setenv(_env.BASE_URL_ENV, "")
    assert _env.base_url(None) == DEFAULT_BASE_URL
    monkeypatch.setenv(_env.BASE_URL_ENV, "http://127.0.0.1:8765/api/v1/a2a")
    assert _env.base_url(None) == "http://127.0.0.1:8765/api/v1/a2a"
    assert _env.base_url("https://other.example/a2a") == "https://other.example/a2a"


def test_the_redis_url_is_given_then_the_variable_else_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_env.REDIS_URL_ENV, raising=False)
    assert _env.redis_url(None) is None
    monkeypatch.setenv(_env.REDIS_URL_ENV, "redis://127.0.0.1:6379/0")
    assert _env.redis_url(None) == "redis://127.0.0.1:6379/0"
    assert _env.redis_url("redis://elsewhere/1") == "redis://elsewhere/1"


def test_the_token_is_read_stripped_and_a_blank_one_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_env.TOKEN_ENV, raising=False)
    assert _env.token_from_env() is None
    monkeypatch.setenv(_env.TOKEN_ENV, "  \n")
    assert _env.token_from_env() is None
    monkeypatch.setenv(_env.TOKEN_ENV, " sk-abc\n")
    assert _env.token_from_env() == "sk-abc"
