"""Signing in: where a request's bearer token comes from, and keeping a sign-in alive.

- :mod:`._tokens`: the token of each request (given, from the environment, or stored and
  refreshed before it expires; one refresh at a time).
- :mod:`._store`: where a sign-in is kept, behind one seam: a file on this host, or a
  key in Redis shared by every host that names it.
- :mod:`._oauth`: the OAuth 2.0 steps a public client needs (discovery, registration,
  PKCE, token requests, revocation).
- :mod:`._login`: the flows behind ``login``, ``logout`` and ``auth status``.

The rest of the package (and the tests) import from here. The names load on first use,
so ``magisterium-async --help`` does not pay for the network stack.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from magisterium_async._auth._login import (
        DEFAULT_LOGIN_TIMEOUT,
        auth_status,
        login,
        logout,
    )
    from magisterium_async._auth._store import (
        Credentials,
        FileStore,
        RedisStore,
        credentials_location,
        default_credentials_path,
        signin_key,
    )
    from magisterium_async._auth._tokens import (
        StoredToken,
        TokenCallable,
        TokenSource,
        resolve_token,
    )

__all__ = [
    "DEFAULT_LOGIN_TIMEOUT",
    "Credentials",
    "FileStore",
    "RedisStore",
    "StoredToken",
    "TokenCallable",
    "TokenSource",
    "auth_status",
    "credentials_location",
    "default_credentials_path",
    "login",
    "logout",
    "resolve_token",
    "signin_key",
]


def __getattr__(name: str) -> object:
    if name in __all__:  # the modules in the order they import each other
        for module in ("_store", "_tokens", "_login"):
            loaded = importlib.import_module(f"{__name__}.{module}")
            if hasattr(loaded, name):
                return getattr(loaded, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
