"""Where a request's bearer token comes from, and keeping a stored sign-in alive.

The order: ``token=`` (a string, or a sync or async callable), ``$MAGISTERIUM_TOKEN``,
then the credentials ``magisterium-async login`` stored. A string is fixed for the
client's life and costs nothing per request; the other two are a :class:`TokenSource`
asked before each request.

:class:`StoredToken` refreshes the access token shortly before it expires, and once more
when the service refuses it (the call is then retried once). One refresh runs at a time
in a process however many calls wait for it, and between processes sharing the store a
lock is taken and the store read again first: another process may have refreshed already,
and its rotated refresh token is the only one still valid. The store (a file, or Redis for
processes on many hosts) is behind one seam, :mod:`._store`; when it does not answer,
the token in hand is used until it expires.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

import aiohttp

from magisterium_async._auth import _oauth
from magisterium_async._auth._credentials import (
    Credentials,
    credentials_location,
    load_credentials,
    origin_of,
)
from magisterium_async._auth._store import CredentialStore, FileStore, StoreUnreachableError
from magisterium_async._clock import Clock
from magisterium_async._config import (
    CREDENTIALS_ENV,
    TOKEN_ENV,
    non_negative_number,
    token_from_env,
)
from magisterium_async._errors import (
    LoginRequiredError,
    MagisteriumError,
    OAuthError,
    error_for_status,
)
from magisterium_async._events import OnEvent, PoolEvent, unheard

__all__ = [
    "TOKEN_ENV",
    "CallableToken",
    "StoredToken",
    "TokenCallable",
    "TokenSource",
    "check_token",
    "resolve_token",
]

logger = logging.getLogger("magisterium_async.auth")

T = TypeVar("T")

TokenCallable = Callable[[], str | Awaitable[str]]
"""``token=`` as a function: returns (or resolves to) the token to send now."""

NO_TOKEN = (
    f"no API token: pass token=, set the {TOKEN_ENV} environment variable, "
    "or sign in with `magisterium-async login`"
)
_MAX_MARGIN = 60.0  # refresh this long before expiry at most ...
_MARGIN_SHARE = 0.1  # ... or this share of the token's lifetime, if less
REFRESH_TIMEOUT = 15.0  # bounds one token request (a shared store's lock outlasts it)
STORE_WAIT = 5.0  # by default, how long a call with no usable token waits for a store
STORE_RETRY = 0.25  # seconds between tries of a store that did not answer
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

    identity: str | None
    """Whose quota the requests spend, when the source knows it (a stored sign-in);
    ``None``: the token itself names the account (shared quotas key on its hash)."""

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
        # A function's name says nothing of whose token it returns: the token does.
        self.identity: str | None = None

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
    """The access token of a stored sign-in (a file, or Redis), refreshed as it nears expiry.

    ``clock`` decides when a refresh is due (the stored epoch expiry is converted to it),
    so a :class:`VirtualClock` runs token lifetimes in virtual time; waits for a store
    that does not answer are real time: a call with no usable token tries the store for
    ``store_wait`` seconds before :class:`CredentialsError`. ``credentials`` is the sign-in
    already read, or ``None`` to read it at the first call. Each refresh sent to the
    authorization server is logged (INFO, logger ``magisterium_async.auth``) and told to
    ``events`` (``refreshing``: the seconds it may take at most).
    """

    def __init__(
        self,
        store: CredentialStore,
        credentials: Credentials | None,
        *,
        clock: Clock,
        identity: str | None,
        store_wait: float = STORE_WAIT,
        events: OnEvent = unheard,
    ) -> None:
        self.store = store
        self.events = events
        self.identity = identity
        self._store_wait = non_negative_number("store_wait", store_wait)
        self._clock = clock
        self._flight: asyncio.Future[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._credentials = credentials
        self._refresh_at: float | None = None
        self._expires_at: float | None = None
        # Refreshed, but not yet written to the store (it failed): (read, refreshed).
        self._unsaved: tuple[Credentials, Credentials] | None = None
        self._retry_store_at = -math.inf  # after a store failure, when to try it again
        self._outage = False
        if credentials is not None:
            self._adopt(credentials, expires_in=None)

    def __repr__(self) -> str:
        issuer = None if self._credentials is None else self._credentials.issuer
        return f"StoredToken({self.store.where!r}, issuer={issuer!r})"

    @property
    def credentials(self) -> Credentials | None:
        """The credentials in use now (``None`` before the first call read them)."""
        return self._credentials

    def _adopt(self, credentials: Credentials, *, expires_in: float | None) -> None:
        """Use ``credentials`` from now on; ``expires_in`` when just issued to us."""
        self._credentials = credentials
        if credentials.expires_at is None:
            self._refresh_at = self._expires_at = None
            return
        lifetime = credentials.lifetime or expires_in
        margin = _MAX_MARGIN if lifetime is None else min(_MAX_MARGIN, _MARGIN_SHARE * lifetime)
        if expires_in is None:  # from the store: its expiry is wall-clock time
            expires_in = credentials.expires_at - time.time()
        self._expires_at = self._clock.now() + expires_in
        self._refresh_at = self._expires_at - margin

    def _usable(self) -> bool:
        """Whether the token in hand has not expired yet."""
        if self._credentials is None:
            return False
        return self._expires_at is None or self._clock.now() < self._expires_at

    def _due(self) -> bool:
        if self._credentials is None:
            return True
        now = self._clock.now()
        if now < self._retry_store_at and self._usable():
            return False  # the store failed a moment ago: the token in hand serves
        if self._unsaved is not None:
            return True
        return self._refresh_at is not None and now >= self._refresh_at

    async def token(self) -> str:
        if not self._due():
            return self._current()
        return await self._refresh(self._current_or_none(), forced=False)

    async def rejected(self, token: str) -> bool:
        await self._refresh(token, forced=True)
        return True

    def _current(self) -> str:
        assert self._credentials is not None
        return self._credentials.access_token

    def _current_or_none(self) -> str | None:
        return None if self._credentials is None else self._credentials.access_token

    async def _refresh(self, seen: str | None, *, forced: bool) -> str:
        flight = self._flight
        if flight is None or flight.done():
            if self._current_or_none() != seen or not (forced or self._due()):
                return self._current()  # renewed since the caller looked
            flight = self._flight = asyncio.ensure_future(self._renew(seen, forced=forced))
            flight.add_done_callback(_retrieve)
        # Shielded: a caller cancelled mid-refresh must not lose a rotated refresh token
        # the server has already spent; every waiter shares this one outcome.
        await asyncio.shield(flight)
        return self._current()

    async def _renew(self, seen: str | None, *, forced: bool) -> None:
        """Refresh (or first read) through the store, riding out a store that does not
        answer: the token in hand is used while it lasts, then the store is tried again
        for ``store_wait`` seconds before :class:`CredentialsError`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._store_wait
        while True:
            try:
                await self._renew_once(seen, forced=forced)
            except StoreUnreachableError as exc:
                now = self._clock.now()
                self._retry_store_at = now + STORE_RETRY
                if not self._outage:
                    self._outage = True
                    logger.warning("%s; the token in hand is used while it lasts", exc)
                renewed = self._current_or_none() != seen  # refreshed, but not stored
                if self._usable() and (renewed or not forced):
                    return
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(STORE_RETRY)
                continue
            if self._outage:
                self._outage = False
                logger.warning("the credentials store %s answers again", self.store.where)
            self._retry_store_at = -math.inf
            return

    async def _renew_once(self, seen: str | None, *, forced: bool) -> None:
        if self._credentials is None:  # the first call: read without the lock
            stored = await self.store.load()
            if stored is None:
                raise LoginRequiredError(self._no_sign_in())
            self._adopt(stored, expires_in=None)
            if not self._due():
                return
        async with self.store.refreshing():
            if self._unsaved is not None:
                read, refreshed = self._unsaved
                if await self.store.replace(read, refreshed):
                    self._unsaved = None
                    logger.debug("stored the tokens refreshed while the store was away")
                    return
                self._unsaved = None
            stored = await self.store.load()
            if stored is None:
                raise LoginRequiredError(self._no_sign_in())
            if stored.access_token != seen:
                # Another process refreshed: its tokens are the live ones.
                self._adopt(stored, expires_in=None)
                if forced or not self._due():
                    logger.debug("using the tokens another process refreshed")
                    return
            await self._refresh_stored(stored)

    def _no_sign_in(self) -> str:
        if isinstance(self.store, FileStore):
            return (
                f"the credentials file {self.store.where} is gone (signed out?); "
                f"{self._login_again()}"
            )
        return (
            f"no sign-in at {self.store.where} (signed out, or the store lost it); "
            f"sign in with `{self.store.login_command()}`"
        )

    async def _refresh_stored(self, stored: Credentials) -> None:
        if stored.refresh_token is None:
            raise LoginRequiredError(
                f"the sign-in in {self.store.where} has expired and holds no refresh token; "
                f"{self._login_again()}"
            )
        if self._session is None:
            self._session = aiohttp.ClientSession()
        self.events(PoolEvent("refreshing", "", self._clock.now(), REFRESH_TIMEOUT))
        try:
            tokens = await _oauth.refresh(
                self._session,
                stored.token_endpoint,
                client_id=stored.client_id,
                refresh_token=stored.refresh_token,
                timeout=REFRESH_TIMEOUT,
            )
        except OAuthError as exc:
            if exc.error in _REFUSED:
                raise LoginRequiredError(
                    f"the sign-in in {self.store.where} cannot be renewed: {exc}; "
                    f"{self._login_again()}"
                ) from None
            if exc.status_code is not None and (exc.status_code >= 500 or exc.status_code == 429):
                # The server's trouble, not the sign-in's: a 5xx is retried, a 429 waited out.
                raise error_for_status(exc.status_code, str(exc)) from None
            raise
        expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        fresh = stored.with_tokens(
            tokens.access_token,
            tokens.refresh_token,
            expires_at=expires_at,
            lifetime=tokens.expires_in,
            scope=tokens.scope,
        )
        # The server may have rotated the refresh token: the new one is the only one left,
        # so it is used from now on even if storing it fails (it is stored again later).
        self._adopt(fresh, expires_in=tokens.expires_in)
        self._unsaved = (stored, fresh)
        if not await self.store.replace(stored, fresh):
            # Another writer since our read (a lapsed lease, a new login): theirs wins.
            self._unsaved = None
            latest = await self.store.load()
            if latest is None:
                raise LoginRequiredError(self._no_sign_in())
            self._adopt(latest, expires_in=None)
            return
        self._unsaved = None

    def _login_again(self) -> str:
        return f"sign in again with `{self.store.login_command()}`"

    async def aclose(self) -> None:
        flight = self._flight
        if flight is not None and not flight.done():
            # Let a refresh in flight store what it got: the server may have rotated.
            await asyncio.wait([flight])
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        await self.store.aclose()


def _retrieve(flight: asyncio.Future[None]) -> None:
    # Its waiters may all have gone: mark the outcome seen, so asyncio does not log it.
    if not flight.cancelled():
        flight.exception()


def resolve_token(
    token: str | TokenCallable | None,
    credentials: str | os.PathLike[str] | None,
    *,
    base_url: str,
    clock: Clock,
    events: OnEvent = unheard,
) -> tuple[str | None, TokenSource | None]:
    """The client's token: a fixed string, or a source to ask before each request.

    In order: ``token`` (a str, or a callable), ``$MAGISTERIUM_TOKEN``, the stored
    credentials (``credentials``, ``$MAGISTERIUM_CREDENTIALS``, the user config dir). A
    file is read now: there is none, or it cannot be trusted, raises before anything is
    sent. A Redis store is read at the first call (:class:`LoginRequiredError` if it
    holds no sign-in for this service).
    """
    if token is not None:
        if isinstance(token, str):
            return check_token(token), None
        if callable(token):
            return None, CallableToken(token)
        raise TypeError(f"token must be a str or a callable, not {type(token).__name__}")
    env = token_from_env()
    if env is not None:
        try:
            return check_token(env), None
        except ValueError as exc:
            raise ValueError(f"${TOKEN_ENV}: {exc}") from None
    location = credentials_location(credentials)
    origin = origin_of(base_url)
    if not isinstance(location, Path):
        from magisterium_async._auth._redis_store import RedisStore

        store = RedisStore(location, origin)
        identity = f"oauth:{origin} {store.key}"
        return None, StoredToken(store, None, clock=clock, identity=identity, events=events)
    stored = load_credentials(location)
    if stored is None:
        if credentials is None and not os.environ.get(CREDENTIALS_ENV):
            raise LoginRequiredError(NO_TOKEN)
        source = "credentials=" if credentials is not None else f"${CREDENTIALS_ENV}"
        raise LoginRequiredError(
            f"no API token: no credentials file at {location} ({source}); sign in with "
            f"`magisterium-async login --credentials {location}`, or set {TOKEN_ENV}"
        )
    if stored.origin != origin:
        raise LoginRequiredError(
            f"the credentials in {location} are for {stored.origin}, not {origin}: "
            f"sign in there with `magisterium-async login --base-url {base_url}`"
        )
    identity = f"oauth:{stored.issuer} {stored.client_id}"
    kept = StoredToken(FileStore(location), stored, clock=clock, identity=identity, events=events)
    return None, kept
