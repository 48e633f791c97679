"""Signing in and out: the flows behind ``login``, ``logout`` and ``auth status``.

``login`` follows RFC 8252 (OAuth for native apps): the authorization-code grant with
PKCE S256 and ``state``, the browser sent back to a listener on 127.0.0.1 at an ephemeral
port. Where the browser runs on another machine, the person pastes the URL it was sent
to; both ways are awaited at once, the first valid one wins. Nothing here prints a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

from magisterium_async._auth import _oauth
from magisterium_async._auth._credentials import (
    Credentials,
    Location,
    UnreadableCredentialsError,
    credentials_location,
    origin_of,
)
from magisterium_async._auth._store import CredentialStore, FileStore
from magisterium_async._clock import wait_at_most
from magisterium_async._errors import MagisteriumError, OAuthError
from magisterium_async._http._jsonrpc import endpoint

__all__ = [
    "DEFAULT_LOGIN_TIMEOUT",
    "AuthStatus",
    "LogoutResult",
    "auth_status",
    "login",
    "logout",
    "stdin_lines",
]

DEFAULT_LOGIN_TIMEOUT = 600.0
CALLBACK_PATH = "/callback"
_DONE_PAGE = (
    "<!doctype html><meta charset=utf-8><title>magisterium-async</title>"
    "<p>{}</p><p>You can close this tab.</p>"
)


@dataclass(frozen=True)
class _Redirect:
    """What came back to the redirect URI: a code, or the server's error."""

    code: str | None
    error: str | None


def _read_redirect(query: dict[str, list[str]], state: str) -> _Redirect | None:
    """The redirect's outcome, or ``None`` when it is not for this login (wrong state)."""
    if query.get("state", [None])[0] != state:
        return None
    error = query.get("error", [None])[0]
    if error is not None:
        description = query.get("error_description", [""])[0]
        text = f"{error}: {description}" if description else error
        return _Redirect(None, " ".join(text.split())[:200])
    code = query.get("code", [None])[0]
    return _Redirect(code, None) if code else None


class _Listener:
    """An HTTP listener on 127.0.0.1 (an ephemeral port) for the browser's redirect."""

    def __init__(self, state: str, arrived: asyncio.Queue[_Redirect]) -> None:
        self._state = state
        self._arrived = arrived
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        app = web.Application()
        app.router.add_get(CALLBACK_PATH, self._callback)
        # No access log: the request line carries the authorization code.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def _callback(self, request: web.Request) -> web.Response:
        redirect = _read_redirect(
            {key: request.query.getall(key) for key in request.query}, self._state
        )
        if redirect is None:
            return web.Response(status=400, text="This is not the redirect of this sign-in.")
        self._arrived.put_nowait(redirect)
        message = "Signed in to magisterium-async." if redirect.code else "Sign-in refused."
        return web.Response(text=_DONE_PAGE.format(message), content_type="text/html")

    async def __aenter__(self) -> _Listener:
        try:
            await self._runner.setup()
            await web.SockSite(self._runner, self._socket).start()
        except BaseException:
            self._socket.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runner.cleanup()
        self._socket.close()


async def stdin_lines(fd: int | None = None) -> AsyncIterator[str]:
    """Lines of input read from ``fd`` (stdin) without blocking the loop, until its end.

    A daemon thread reads the raw descriptor: a login that ends by the browser's redirect
    leaves it blocked on a terminal, which must neither keep the process alive nor hold
    the lock of ``sys.stdin``'s buffer while the interpreter shuts down.
    """
    fd = sys.stdin.fileno() if fd is None else fd
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def post(line: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(lines.put_nowait, line)

    def read() -> None:
        pending = b""
        try:
            while chunk := os.read(fd, 4096):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    post(line.decode("utf-8", "replace"))
        except OSError:
            pass
        if pending:
            post(pending.decode("utf-8", "replace"))
        post(None)

    threading.Thread(target=read, name="magisterium-login-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        yield line


async def _pasted(
    lines: AsyncIterable[str],
    state: str,
    arrived: asyncio.Queue[_Redirect],
    say: Callable[[str], None],
) -> None:
    async for line in lines:
        text = line.strip()
        if not text:
            continue
        redirect = _read_redirect(parse_qs(urlsplit(text).query), state)
        if redirect is None:
            say(
                "that is not the URL this sign-in was redirected to (no code, or its state "
                "does not match); paste the whole URL from the browser's address bar"
            )
            continue
        arrived.put_nowait(redirect)
        return


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _open_browser(url: str) -> None:
    def run() -> None:
        with contextlib.suppress(Exception):  # no browser is not an error: the URL is printed
            webbrowser.open(url)

    # Not awaited: a console browser (lynx) runs until the person quits it, and the
    # redirect may well arrive first.
    threading.Thread(target=run, name="magisterium-login-browser", daemon=True).start()


async def _wait_for_code(
    arrived: asyncio.Queue[_Redirect],
    pasted: AsyncIterable[str] | None,
    state: str,
    timeout: float,
    say: Callable[[str], None],
) -> str:
    paste_task = None
    if pasted is not None:
        paste_task = asyncio.ensure_future(_pasted(pasted, state, arrived, say))
    try:
        redirect = await wait_at_most(timeout, arrived.get())
    except asyncio.TimeoutError:
        raise OAuthError(f"no sign-in arrived within {timeout:g} s; try again") from None
    finally:
        if paste_task is not None:
            paste_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await paste_task
    if redirect.code is None:
        raise OAuthError(f"the authorization server refused the sign-in ({redirect.error})")
    return redirect.code


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _base_url(base_url: str | None) -> str:
    return endpoint(base_url)


@contextlib.asynccontextmanager
async def _opened(
    credentials: str | os.PathLike[str] | None, base_url: str | None
) -> AsyncIterator[tuple[Location, CredentialStore]]:
    """The store at ``credentials`` (or the default places) for ``base_url``'s service."""
    location = credentials_location(credentials)
    store: CredentialStore
    if isinstance(location, Path):
        store = FileStore(location)  # one sign-in, whatever its service
    else:  # a sign-in per service: the URL and the issuer name the key
        from magisterium_async._auth._redis_store import RedisStore

        store = RedisStore(location, origin_of(_base_url(base_url)))
    try:
        yield location, store
    finally:
        await store.aclose()


async def login(
    base_url: str | None = None,
    credentials: str | os.PathLike[str] | None = None,
    *,
    open_browser: bool = True,
    pasted: AsyncIterable[str] | None = None,
    say: Callable[[str], None] = _say,
    show_url: Callable[[str], None] | None = None,
    scope: str | None = None,
    timeout: float = DEFAULT_LOGIN_TIMEOUT,
) -> tuple[Location, Credentials]:
    """Sign in to the service at ``base_url`` and store the credentials; where, and what.

    Discovers the authorization server (RFC 8414) at ``base_url``'s origin, registers a
    client there (RFC 7591) unless the credentials hold one for it, and runs the
    authorization-code flow with PKCE. The authorization URL goes to ``show_url`` (by
    default: alone on one line of stderr), then to a browser unless ``open_browser`` is
    false. The redirect is awaited on a listener on 127.0.0.1 and, at the same time, among
    the ``pasted`` lines (the URL the browser was sent to, for headless hosts).

    ``credentials`` is a path or a ``redis://`` / ``rediss://`` URL (see
    :func:`credentials_location`); the store is read first, so an unsafe file or an
    unreachable Redis is refused before anything is sent.
    """
    async with _opened(credentials, base_url) as (location, store):
        return location, await _login(
            base_url,
            store,
            open_browser=open_browser,
            pasted=pasted,
            say=say,
            show_url=show_url,
            scope=scope,
            timeout=timeout,
        )


async def _login(
    base_url: str | None,
    store: CredentialStore,
    *,
    open_browser: bool,
    pasted: AsyncIterable[str] | None,
    say: Callable[[str], None],
    show_url: Callable[[str], None] | None,
    scope: str | None,
    timeout: float,
) -> Credentials:
    url = _base_url(base_url)
    origin = origin_of(url)
    try:
        existing = await store.load()
    except UnreadableCredentialsError as exc:
        # Never a trap: what cannot be read is kept aside, and the sign-in starts anew;
        # a file the user named that holds something else is theirs, left as it is.
        if exc.foreign:
            raise
        aside = await store.set_aside()
        say(f"{store.where} holds no readable sign-in: moved it to {aside}; signing in anew")
        existing = None
    arrived: asyncio.Queue[_Redirect] = asyncio.Queue()
    state = _oauth.new_state()
    pkce = _oauth.new_pkce()
    async with aiohttp.ClientSession() as session, _Listener(state, arrived) as listener:
        metadata = await _oauth.discover(session, url)
        if (
            existing is not None
            and existing.origin == origin
            and existing.issuer == metadata.issuer
        ):
            client_id, registered_uri = existing.client_id, existing.redirect_uri
        else:
            client_id = await _oauth.register_client(session, metadata, listener.redirect_uri)
            registered_uri = listener.redirect_uri
        authorize = _oauth.authorization_url(
            metadata,
            client_id=client_id,
            redirect_uri=listener.redirect_uri,
            pkce=pkce,
            state=state,
            scope=scope,
        )
        say("Open this URL in a browser to sign in:")
        (show_url or _say)(authorize)
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + timeout))
        waiting = f"Waiting for the browser until {until} ({_minutes(timeout)})."
        if pasted is not None:
            waiting += (
                " If it runs on another machine, paste here the URL it was redirected to, "
                "then press Enter."
            )
        say(waiting)
        if open_browser:
            _open_browser(authorize)
        code = await _wait_for_code(arrived, pasted, state, timeout, say)
        tokens = await _oauth.exchange_code(
            session,
            metadata,
            client_id=client_id,
            code=code,
            redirect_uri=listener.redirect_uri,
            pkce=pkce,
        )
    stored = Credentials(
        origin=origin,
        issuer=metadata.issuer,
        authorization_endpoint=metadata.authorization_endpoint,
        token_endpoint=metadata.token_endpoint,
        registration_endpoint=metadata.registration_endpoint,
        revocation_endpoint=metadata.revocation_endpoint,
        client_id=client_id,
        redirect_uri=registered_uri,
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        token_type="Bearer",
        expires_at=None if tokens.expires_in is None else time.time() + tokens.expires_in,
        lifetime=tokens.expires_in,
        scope=tokens.scope,
    )
    await store.save(stored)
    return stored


@dataclass(frozen=True)
class LogoutResult:
    """What ``logout`` did: the sign-in removed, and whether the server revoked the tokens
    (``None``: it offers no revocation, or there were no tokens to read; ``revoke_error``
    says why revoking failed).
    ``where`` names the store (a Redis URL with its password masked)."""

    where: str
    removed: bool
    revoked: bool | None
    revoke_error: str | None = None
    unreadable: bool = False
    """The store held no readable sign-in (a damaged file): removed, nothing to revoke."""


async def logout(
    credentials: str | os.PathLike[str] | None = None, base_url: str | None = None
) -> LogoutResult:
    """Revoke the stored tokens where the server offers revocation (RFC 7009), then delete
    the sign-in (the file, or the Redis key), whether or not revoking worked
    (:attr:`LogoutResult.revoke_error`)."""
    async with _opened(credentials, base_url) as (_, store):
        return await _logout(store)


async def _logout(store: CredentialStore) -> LogoutResult:
    try:
        stored = await store.load()
    except UnreadableCredentialsError as exc:
        if exc.foreign:  # a file the user named, holding something else: never deleted
            raise
        removed = await store.delete()
        return LogoutResult(store.where, removed=removed, revoked=None, unreadable=True)
    if stored is None:
        return LogoutResult(store.where, removed=False, revoked=None)
    revoked: bool | None = None
    error: str | None = None
    if stored.revocation_endpoint is not None:
        tokens = [(stored.access_token, "access_token")]
        if stored.refresh_token is not None:  # first: revoking it ends the whole grant
            tokens.insert(0, (stored.refresh_token, "refresh_token"))
        try:
            async with aiohttp.ClientSession() as session:
                for token, hint in tokens:
                    await _oauth.revoke(
                        session,
                        stored.revocation_endpoint,
                        client_id=stored.client_id,
                        token=token,
                        hint=hint,
                    )
            revoked = True
        except MagisteriumError as exc:
            revoked, error = False, str(exc)
    removed = await store.delete()
    return LogoutResult(store.where, removed=removed, revoked=revoked, revoke_error=error)


@dataclass(frozen=True)
class AuthStatus:
    """What the stored sign-in is (never a token): ``expires_at`` is an aware UTC time;
    ``where`` names the store (a Redis URL with its password masked)."""

    where: str
    origin: str
    issuer: str
    client_id: str
    expires_at: dt.datetime | None
    scopes: list[str]
    refreshable: bool

    @property
    def expired(self) -> bool:
        """Whether the access token's expiry has passed (a refresh may still renew it)."""
        return self.expires_at is not None and self.expires_at <= dt.datetime.now(dt.timezone.utc)

    def as_json(self) -> dict[str, object]:
        """The status as JSON-ready values."""
        return {
            "path": self.where,
            "origin": self.origin,
            "issuer": self.issuer,
            "client_id": self.client_id,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
            "expired": self.expired,
            "scopes": self.scopes,
            "refreshable": self.refreshable,
        }


async def auth_status(
    credentials: str | os.PathLike[str] | None = None, base_url: str | None = None
) -> AuthStatus | None:
    """The stored sign-in, or ``None`` when there is none; sends nothing to the service
    (a Redis store is read)."""
    async with _opened(credentials, base_url) as (_, store):
        stored = await store.load()
        where = store.where
    if stored is None:
        return None
    expires = None
    if stored.expires_at is not None:
        expires = dt.datetime.fromtimestamp(stored.expires_at, dt.timezone.utc)
    return AuthStatus(
        where=where,
        origin=stored.origin,
        issuer=stored.issuer,
        client_id=stored.client_id,
        expires_at=expires.replace(microsecond=0) if expires is not None else None,
        scopes=stored.scopes,
        refreshable=stored.refresh_token is not None,
    )
