"""Where a request's bearer token comes from, and keeping a stored sign-in alive.

The order: ``token=`` (a string, or a sync or async callable), ``$MAGISTERIUM_TOKEN``,
then the credentials ``magisterium-async login`` stored. A string is fixed for the
client's life and costs nothing per request; the other two are a :class:`TokenSource`
asked before each request.

:class:`StoredToken` refreshes the access token shortly before it expires, and once more
when the service refuses it (the call is then retried once). One refresh runs at a time
in a process however many calls wait for it, and between processes sharing the store a
lock is taken and the store read again first: another process may have refreshed already,
and its rotated refresh token is the only one still valid. When the store cannot be used
(Redis away, the disk full), the token in hand serves until it expires.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp

from magisterium_async._auth import _oauth
from magisterium_async._auth._store import (
    Credentials,
    FileStore,
    Store,
    StoreUnavailableError,
    open_store,
)
from magisterium_async._clock import Clock
from magisterium_async._config import CREDENTIALS_ENV, TOKEN_ENV, from_env
from magisterium_async._errors import (
    LoginRequiredError,
    MagisteriumError,
    OAuthError,
    error_for_status,
)
from magisterium_async._events import Level, OnEvent, PoolEvent, log_event, notice

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
STORE_RETRY = 0.25  # seconds between tries of a store that could not be used
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


class StoredToken:
    """The access token of a stored sign-in (a file, or Redis), refreshed as it nears expiry.

    ``clock`` decides when a refresh is due (the stored epoch expiry is converted to it),
    so a :class:`VirtualClock` runs token lifetimes in virtual time; waits for a store
    that cannot be used are real time: a call with no usable token tries the store for
    ``store_wait`` seconds before :class:`CredentialsError`. ``credentials`` is the sign-in
    already read, or ``None`` to read it at the first call. What happens is told to
    ``events`` (``refreshing``: the seconds a refresh may take at most).
    """

    def __init__(
        self,
        store: Store,
        credentials: Credentials | None,
        *,
        clock: Clock,
        identity: str | None,
        store_wait: float = STORE_WAIT,
        events: OnEvent = log_event,
    ) -> None:
        self.store = store
        self.identity = identity
        self.credentials = credentials
        """The sign-in in use now (``None`` before the first call read it)."""
        self._events = events
        self._store_wait = store_wait
        self._clock = clock
        self._flight: asyncio.Future[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._expires_at = self._refresh_at = -math.inf
        # The stored sign-in a refresh replaced in hand, but not yet in the store.
        self._unsaved: Credentials | None = None
        self._outage = False  # the store could not be used at the last try
        if credentials is not None:
            self._adopt(credentials)

    def __repr__(self) -> str:
        issuer = None if self.credentials is None else self.credentials.issuer
        return f"StoredToken({self.store.where!r}, issuer={issuer!r})"

    def _adopt(self, credentials: Credentials) -> None:
        """Use ``credentials`` from now on: their expiry (epoch seconds) put on the clock."""
        self.credentials = credentials
        self._expires_at = self._refresh_at = math.inf
        if credentials.expires_at is not None:
            lifetime = credentials.lifetime
            margin = _MAX_MARGIN if lifetime is None else min(_MAX_MARGIN, _MARGIN_SHARE * lifetime)
            self._expires_at = self._clock.now() + credentials.expires_at - time.time()
            self._refresh_at = self._expires_at - margin

    def _in_hand(self) -> str | None:
        return None if self.credentials is None else self.credentials.access_token

    def _tell(self, level: Level, message: str) -> None:
        self._events(notice(level, "auth", message, time=self._clock.now()))

    async def token(self) -> str:
        if self._clock.now() >= self._refresh_at:
            await self._renew(self._in_hand(), forced=False)
        assert self.credentials is not None
        return self.credentials.access_token

    async def rejected(self, token: str) -> bool:
        await self._renew(token, forced=True)
        return True

    async def _renew(self, seen: str | None, *, forced: bool) -> None:
        """Renew the token ``seen`` by the caller (refused, when ``forced``), once for
        every caller waiting, unless it changed since the caller looked; a store that
        cannot be used is ridden out: the token in hand serves while it lasts, then the
        store is tried for ``store_wait`` seconds before :class:`StoreUnavailableError`."""
        flight = self._flight
        if flight is None or flight.done():
            if self._in_hand() != seen or not (forced or self._clock.now() >= self._refresh_at):
                return
            flight = self._flight = asyncio.ensure_future(self._through_store(seen, forced))
            flight.add_done_callback(_retrieve)
        # Shielded: a caller cancelled mid-refresh must not lose a rotated refresh token
        # the server has already spent; every waiter shares this one outcome.
        await asyncio.shield(flight)

    async def _through_store(self, seen: str | None, forced: bool) -> None:
        give_up = asyncio.get_running_loop().time() + self._store_wait
        while True:
            try:
                await self._renewal(seen, forced)
            except StoreUnavailableError as exc:
                if not self._outage:
                    self._tell("warning", f"{exc}; the token in hand is used while it lasts")
                self._outage = True
                usable = self._clock.now() < self._expires_at
                if usable and (self._in_hand() != seen or not forced):
                    self._refresh_at = self._clock.now() + STORE_RETRY  # then the store again
                    return
                if asyncio.get_running_loop().time() >= give_up:
                    raise
                await asyncio.sleep(STORE_RETRY)
                continue
            if self._outage:
                self._tell("warning", f"the credentials store {self.store.where} answers again")
            self._outage = False
            return

    async def _renewal(self, seen: str | None, forced: bool) -> None:
        if self.credentials is None:  # the first call: read without the lock
            self._adopt(await self._load())
            if self._clock.now() < self._refresh_at:
                return
        async with self.store.refreshing(self._waiting):
            if self._unsaved is not None and self.credentials is not None:
                wrote = await self.store.replace(self._unsaved, self.credentials)
                self._unsaved = None
                if wrote:
                    self._adopt(self.credentials)
                    return
            stored = await self._load()
            if stored.access_token != seen:
                # Another process refreshed: its tokens are the live ones.
                self._adopt(stored)
                if forced or self._clock.now() < self._refresh_at:
                    return
            await self._refresh(stored)

    def _waiting(self, at_most: float) -> None:
        self._tell(
            "info",
            f"waiting for another process's refresh of the sign-in at {self.store.where} "
            f"(at most {at_most:g} s)",
        )

    async def _load(self) -> Credentials:
        stored = await self.store.load()
        if stored is None:
            raise LoginRequiredError(
                f"no sign-in at {self.store.where} (signed out, or the store lost it); "
                f"sign in again with `magisterium-async login{self.store.flag}`"
            )
        return stored

    async def _refresh(self, stored: Credentials) -> None:
        again = f"sign in again with `magisterium-async login{self.store.flag}`"
        if stored.refresh_token is None:
            raise LoginRequiredError(
                f"the sign-in in {self.store.where} has expired and holds no refresh token; "
                + again
            )
        if self._session is None:
            self._session = aiohttp.ClientSession()
        self._events(PoolEvent("refreshing", "", self._clock.now(), REFRESH_TIMEOUT))
        form = {
            "grant_type": "refresh_token",
            "refresh_token": stored.refresh_token,
            "client_id": stored.client_id,
        }
        try:
            tokens = await _oauth.request_tokens(
                self._session,
                stored.token_endpoint,
                form,
                what="token refresh",
                timeout=REFRESH_TIMEOUT,
            )
        except OAuthError as exc:
            if exc.error in _REFUSED:
                raise LoginRequiredError(
                    f"the sign-in in {self.store.where} cannot be renewed: {exc}; {again}"
                ) from None
            if exc.status_code is not None and (exc.status_code >= 500 or exc.status_code == 429):
                # The server's trouble, not the sign-in's: a 5xx is retried, a 429 waited out.
                raise error_for_status(exc.status_code, str(exc)) from None
            raise
        # The server may have rotated the refresh token: the new one is the only one left,
        # so it is used from now on even if storing it fails (it is stored again later).
        fresh = stored.renewed(tokens)
        self._adopt(fresh)
        self._unsaved = stored
        wrote = await self.store.replace(stored, fresh)
        self._unsaved = None
        if not wrote:  # another writer since the read (a lapsed lease, a new login): theirs
            self._tell("warning", f"the sign-in at {self.store.where} changed meanwhile: using it")
            self._adopt(await self._load())

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
    credentials: str | os.PathLike[str] | Any,
    *,
    base_url: str,
    clock: Clock,
    events: OnEvent = log_event,
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
    env = from_env(TOKEN_ENV)
    if env is not None:
        try:
            return check_token(env), None
        except ValueError as exc:
            raise ValueError(f"${TOKEN_ENV}: {exc}") from None
    origin = _oauth.origin_of(base_url)
    store = open_store(credentials, origin)
    if not isinstance(store, FileStore):
        identity = f"oauth:{origin} {store.key}"
        return None, StoredToken(store, None, clock=clock, identity=identity, events=events)
    stored = store.read()
    if stored is None and not store.named:
        raise LoginRequiredError(NO_TOKEN)
    if stored is None:
        source = "credentials=" if credentials is not None else f"${CREDENTIALS_ENV}"
        raise LoginRequiredError(
            f"no API token: no credentials file at {store.where} ({source}); sign in with "
            f"`magisterium-async login{store.flag}`, or set {TOKEN_ENV}"
        )
    if stored.origin != origin:
        raise LoginRequiredError(
            f"the credentials in {store.where} are for {stored.origin}, not {origin}: "
            f"sign in there with `magisterium-async login --base-url {base_url}`"
        )
    identity = f"oauth:{stored.issuer} {stored.client_id}"
    return None, StoredToken(store, stored, clock=clock, identity=identity, events=events)
