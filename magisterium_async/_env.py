"""The environment variables the library and its command line read, and in what order.

One home for their names and for how each setting falls back, so the client, ``login``
and every command agree:

- the token: ``token=`` (or ``--token-file``), then ``$MAGISTERIUM_TOKEN``, then the
  stored sign-in of ``magisterium-async login``;
- where that sign-in lives: ``credentials=`` (or ``--credentials``), then
  ``$MAGISTERIUM_CREDENTIALS``, then the user's configuration directory;
- the endpoint: ``base_url=`` (or ``--base-url``), then ``$MAGISTERIUM_BASE_URL``, then
  the service's own (:data:`DEFAULT_BASE_URL`);
- the Redis that shares a quota: ``url=`` (or ``--redis``), then
  ``$MAGISTERIUM_REDIS_URL``, else none.

An empty variable counts as unset; a token is read without its surrounding whitespace
(a blank one is no token).
"""

from __future__ import annotations

import os

from magisterium_async._config import DEFAULT_BASE_URL

__all__ = [
    "BASE_URL_ENV",
    "CREDENTIALS_ENV",
    "REDIS_URL_ENV",
    "TOKEN_ENV",
    "base_url",
    "redis_url",
    "token_from_env",
]

TOKEN_ENV = "MAGISTERIUM_TOKEN"
CREDENTIALS_ENV = "MAGISTERIUM_CREDENTIALS"
BASE_URL_ENV = "MAGISTERIUM_BASE_URL"
REDIS_URL_ENV = "MAGISTERIUM_REDIS_URL"


def _read(name: str) -> str | None:
    return os.environ.get(name) or None


def token_from_env() -> str | None:
    """``$MAGISTERIUM_TOKEN`` (stripped), or ``None`` when it is unset or blank."""
    return (_read(TOKEN_ENV) or "").strip() or None


def base_url(given: str | None) -> str:
    """The endpoint: ``given``, else ``$MAGISTERIUM_BASE_URL``, else the service's."""
    return given or _read(BASE_URL_ENV) or DEFAULT_BASE_URL


def redis_url(given: str | None) -> str | None:
    """The Redis URL: ``given``, else ``$MAGISTERIUM_REDIS_URL``, else ``None``."""
    return given or _read(REDIS_URL_ENV)
