"""Where a request's bearer token comes from, and keeping a stored sign-in alive.

The order: ``token=`` (a string, or a sync or async callable), ``$MAGISTERIUM_TOKEN``,
then the credentials ``magisterium-async login`` stored. A string is fixed for the
client's life and costs nothing per request; the other two are a :class:`TokenSource`
asked before each request.

:class:`StoredToken` refreshes the access token shortly before it expires, and once more
when the service refuses it (the call is then retried once). One refresh runs at a time
in a process however many calls wait for it, and between processes sharing the file a
file lock is taken and the file read again first: another process may have refreshed
already, and its rotated refresh token is the only one still valid.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

import aiohttp
import anyio
import filelock

from . import _oauth
from ._clock import Clock
from ._credentials import (
    CREDENTIALS_ENV,
    Credentials,
    credentials_path,
    load_credentials,
    lock_path,
    origin_of,
    save_credentials,
)
from ._errors import (
    AuthenticationError,
    LoginRequiredError,
    MagisteriumError,
    OAuthError,
    error_for_status,
)

__all__ = [
    "TOKEN_ENV",
    "CallableToken",
    "StoredToken",
    "TokenCallable",
    "TokenSource",
    "authorized",
    "check_token",
    "resolve_token",
]

logger = logging.getLogger("magisterium_async.auth")

T = TypeVar("T")

TOKEN_ENV = "MAGISTERIUM_TOKEN"
TokenCallable = Callable[[], str | Awaitable[str]]
"""``token=`` as a function: returns (or resolves to) the token to send now."""

LOGIN_AGAIN = "run `magisterium-async login` again"
NO_TOKEN = (
    f"no API token: pass token=, set the {TOKEN_ENV} environment variable, "
    "or sign in with `magisterium-async login`"
)
_MAX_MARGIN = 60.0  # refresh this long before expiry at most ...
_MARGIN_SHARE = 0.1  # ... or this share of the token's lifetime, if less
_LOCK_TIMEOUT = 120.0
# The OAuth errors that mean this refresh token will never work again.
_REFUSED = ("invalid_grant", "invalid_client", "unauthorized_client")


def check_token(token: str) -> str:
    """``token`` stripped, if it can go in an ``Authorization`` header; never echoes it."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, not {type(token).__name__}")
    stripped = token.strip()
    if not stripped or not stripped.isascii() or not stripped.isprintable():
        raise ValueError("token must be a non-blank string of printable ASCII characters")
    return stripped


class TokenSource(Protocol):
    """A bearer token that may change between requests."""

    identity: str
    """A stable name for whose quota the requests spend (shared quotas key on it)."""

    async def token(self) -> str:
        """The token to send with the next request."""
        ...

    async def rejected(self, token: str) -> bool:
        """The service refused ``token``: whether a new one is ready to retry with."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds (an HTTP session)."""
        ...


class CallableToken:
    """``token=`` as a function, sync or async, called before each request."""

    __slots__ = ("_fn", "identity")

    def __init__(self, fn: TokenCallable) -> None:
        self._fn = fn
        self.identity = f"callable:{getattr(fn, '__qualname__', type(fn).__qualname__)}"

    async def token(self) -> str:
        value = self._fn()
        if inspect.isawaitable(value):
            value = await value
        try:
            return check_token(value)
        except (TypeError, ValueError) as exc:
            raise MagisteriumError(f"the token= callable returned no usable token: {exc}") from None

    async def rejected(self, token: str) -> bool:
        return False  # the application manages its tokens; a refused one is its to replace

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return "CallableToken(...)"


class StoredToken:
    """The access token from a credentials file, refreshed as it nears expiry.

    ``clock`` decides when a refresh is due (the file's epoch expiry is converted to it),
    so a :class:`VirtualClock` runs token lifetimes in virtual time. ``refreshes`` counts
    the refreshes this process sent to the authorization server.
    """

    def __init__(self, path: Path, credentials: Credentials, *, clock: Clock) -> None:
        self.path = path
        self.identity = f"oauth:{credentials.issuer} {credentials.client_id}"
        self.refreshes = 0
        self._clock = clock
        self._flight: asyncio.Future[None] | None = None
        self._file_lock = filelock.AsyncFileLock(
            str(lock_path(path)), timeout=_LOCK_TIMEOUT, mode=0o600
        )
        self._session: aiohttp.ClientSession | None = None
        self._credentials = credentials
        self._refresh_at: float | None = None
        self._adopt(credentials, expires_in=None)

    def __repr__(self) -> str:
        return f"StoredToken({str(self.path)!r}, issuer={self._credentials.issuer!r})"

    @property
    def credentials(self) -> Credentials:
        """The credentials in use now."""
        return self._credentials

    def _adopt(self, credentials: Credentials, *, expires_in: float | None) -> None:
        """Use ``credentials`` from now on; ``expires_in`` when just issued to us."""
        self._credentials = credentials
        if credentials.expires_at is None:
            self._refresh_at = None
            return
        lifetime = credentials.lifetime or expires_in
        margin = _MAX_MARGIN if lifetime is None else min(_MAX_MARGIN, _MARGIN_SHARE * lifetime)
        if expires_in is None:  # from the file: its expiry is wall-clock time
            expires_in = credentials.expires_at - time.time()
        self._refresh_at = self._clock.now() + expires_in - margin

    def _due(self) -> bool:
        return self._refresh_at is not None and self._clock.now() >= self._refresh_at

    async def token(self) -> str:
        if not self._due():
            return self._credentials.access_token
        return await self._refresh(self._credentials.access_token, forced=False)

    async def rejected(self, token: str) -> bool:
        await self._refresh(token, forced=True)
        return True

    async def _refresh(self, seen: str, *, forced: bool) -> str:
        flight = self._flight
        if flight is None or flight.done():
            if self._credentials.access_token != seen or not (forced or self._due()):
                return self._credentials.access_token  # renewed since the caller looked
            flight = self._flight = asyncio.ensure_future(self._renew(seen, forced=forced))
            flight.add_done_callback(_retrieve)
        # Shielded: a caller cancelled mid-refresh must not lose a rotated refresh token
        # the server has already spent; every waiter shares this one outcome.
        await asyncio.shield(flight)
        return self._credentials.access_token

    async def _renew(self, seen: str, *, forced: bool) -> None:
        async with self._file_lock:
            stored = await anyio.to_thread.run_sync(load_credentials, self.path)
            if stored is None:
                raise LoginRequiredError(
                    f"the credentials file {self.path} is gone (signed out?); {LOGIN_AGAIN}"
                )
            if stored.access_token != seen:
                # Another process refreshed: its tokens are the live ones.
                self._adopt(stored, expires_in=None)
                if forced or not self._due():
                    logger.debug("using the tokens another process refreshed")
                    return
            await self._refresh_stored(stored)

    async def _refresh_stored(self, stored: Credentials) -> None:
        if stored.refresh_token is None:
            raise LoginRequiredError(
                f"the sign-in in {self.path} has expired and holds no refresh token; {LOGIN_AGAIN}"
            )
        if self._session is None:
            self._session = aiohttp.ClientSession()
        self.refreshes += 1
        logger.debug("refreshing the access token at %s", stored.token_endpoint)
        try:
            tokens = await _oauth.refresh(
                self._session,
                stored.token_endpoint,
                client_id=stored.client_id,
                refresh_token=stored.refresh_token,
            )
        except OAuthError as exc:
            if exc.error in _REFUSED:
                raise LoginRequiredError(
                    f"the sign-in in {self.path} cannot be renewed: {exc}; {LOGIN_AGAIN}"
                ) from None
            if exc.status is not None and (exc.status >= 500 or exc.status == 429):
                # The server's trouble, not the sign-in's: a 5xx is retried, a 429 waited out.
                raise error_for_status(exc.status, str(exc)) from None
            raise
        expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        fresh = stored.with_tokens(
            tokens.access_token,
            tokens.refresh_token,
            expires_at=expires_at,
            lifetime=tokens.expires_in,
            scope=tokens.scope,
        )
        # Written before use: a crash now leaves the rotated refresh token on disk, not lost.
        await anyio.to_thread.run_sync(save_credentials, self.path, fresh)
        self._adopt(fresh, expires_in=tokens.expires_in)

    async def aclose(self) -> None:
        flight = self._flight
        if flight is not None and not flight.done():
            # Let a refresh in flight store what it got: the server may have rotated.
            await asyncio.wait([flight])
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _retrieve(flight: asyncio.Future[None]) -> None:
    # Its waiters may all have gone: mark the outcome seen, so asyncio does not log it.
    if not flight.cancelled():
        flight.exception()


async def authorized(source: TokenSource, send: Callable[[str], Awaitable[T]]) -> T:
    """``send(token)``; on :class:`AuthenticationError`, once more with a renewed token.

    The second attempt is not a retry of ``max_retries``: it answers a refused token, not a
    transient failure.
    """
    token = await source.token()
    try:
        return await send(token)
    except AuthenticationError:
        if not await source.rejected(token):
            raise
    return await send(await source.token())


def resolve_token(
    token: str | TokenCallable | None,
    credentials: str | os.PathLike[str] | None,
    *,
    base_url: str,
    clock: Clock,
) -> tuple[str | None, TokenSource | None]:
    """The client's token: a fixed string, or a source to ask before each request.

    In order: ``token`` (a str, or a callable), ``$MAGISTERIUM_TOKEN``, the stored
    credentials (``credentials``, ``$MAGISTERIUM_CREDENTIALS``, the user config dir).
    Raises before anything is sent when there is none, or the file cannot be trusted.
    """
    if token is not None:
        if isinstance(token, str):
            return check_token(token), None
        if callable(token):
            return None, CallableToken(token)
        raise TypeError(f"token must be a str or a callable, not {type(token).__name__}")
    env = os.environ.get(TOKEN_ENV)
    if env:
        return check_token(env), None
    path = credentials_path(credentials)
    stored = load_credentials(path)
    if stored is None:
        if credentials is None and not os.environ.get(CREDENTIALS_ENV):
            raise LoginRequiredError(NO_TOKEN)
        source = "credentials=" if credentials is not None else f"${CREDENTIALS_ENV}"
        raise LoginRequiredError(
            f"no API token: no credentials file at {path} ({source}); sign in with "
            f"`magisterium-async login --credentials {path}`, or set {TOKEN_ENV}"
        )
    if stored.origin != origin_of(base_url):
        raise LoginRequiredError(
            f"the credentials in {path} are for {stored.origin}, not {origin_of(base_url)}: "
            f"sign in there with `magisterium-async login --base-url {base_url}`"
        )
    return None, StoredToken(path, stored, clock=clock)
