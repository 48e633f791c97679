"""Sign-ins the tests share: a credentials record with known secrets, a Redis password."""

from __future__ import annotations

from magisterium_async._auth._credentials import Credentials
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
