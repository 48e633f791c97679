"""Sign-ins the tests share: a credentials record with known secrets, a Redis password, and
the credentials file read and written as the library does."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from magisterium_async._auth import Credentials, FileStore
from magisterium_async._redis import connect
from tests.helpers.redis_server import RedisServer

SECRET_ACCESS = "at-very-secret-access"
SECRET_REFRESH = "rt-very-secret-refresh"
PASSWORD = "s3cret-redis-pw"


def credentials(**changes: object) -> Credentials:
    """A sign-in to the service whose tokens are :data:`SECRET_ACCESS`, :data:`SECRET_REFRESH`.

    Arguments:
        changes: fields to set otherwise.
    """
    values: dict[str, object] = {
        "origin": "https://www.magisterium.com",
        "issuer": "https://www.magisterium.com",
        "authorization_endpoint": "https://www.magisterium.com/oauth/authorize",
        "token_endpoint": "https://www.magisterium.com/oauth/token",
        "client_id": "client-1",
        "redirect_uri": "http://127.0.0.1:5000/callback",
        "access_token": SECRET_ACCESS,
        "refresh_token": SECRET_REFRESH,
        "expires_at": 2_000_000_000.0,
        "lifetime": 3600.0,
        "scope": "a2a offline_access",
        **changes,
    }
    return Credentials(**values)  # type: ignore[arg-type]


async def require_password(redis: RedisServer) -> str:
    """Make ``redis`` ask for :data:`PASSWORD`; the URL that gives it.

    Arguments:
        redis: the running server.
    """
    client = connect(redis.url, 5.0).client
    try:
        await client.config_set("requirepass", PASSWORD)
    finally:
        await client.aclose()
    return f"redis://:{PASSWORD}@127.0.0.1:{redis.port}/0"


def load_credentials(path: Path) -> Credentials | None:
    """The sign-in in the credentials file at ``path`` (``None``: none), as a client reads it.

    Arguments:
        path: the file.
    """
    return FileStore(path).read()


def save_credentials(path: Path, signed_in: Credentials) -> None:
    """Write ``signed_in`` to ``path`` as ``login`` would: private, in a private directory.

    Arguments:
        path: the file.
        signed_in: what it holds.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(msgspec.json.encode(signed_in))
