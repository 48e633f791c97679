"""Signing in and out: the flows behind ``login``, ``logout`` and ``auth status``.

``login`` follows RFC 8252 (OAuth for native apps): the authorization-code grant with
PKCE S256 and ``state``, the browser sent back to a listener on 127.0.0.1 at an ephemeral
port. Where the browser runs on another machine, the person pastes the URL it was sent
to; both ways are awaited at once, the first valid one wins. Nothing here prints a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

from magisterium_async._auth import _oauth
from magisterium_async._auth._store import Credentials, UnreadableCredentialsError, open_store
from magisterium_async._clock import LoopClock, within
from magisterium_async._errors import MagisteriumError, OAuthError
from magisterium_async._http._jsonrpc import endpoint

DEFAULT_LOGIN_TIMEOUT = 600.0
_DONE_PAGE = (
    "<!doctype html><meta charset=utf-8><title>magisterium-async</title>"
    "<p>{}</p><p>You can close this tab.</p>"
)
_NOT_THE_REDIRECT = (
    "that is not the URL this sign-in was redirected to (no code, or its state does not "
    "match); paste the whole URL from the browser's address bar"
)


def _redirected(url: str, state: str) -> str | OAuthError | None:
    """The code the redirect to ``url`` brought, or the server's refusal; ``None`` when it
    is not the redirect of this login (another ``state``, or no code)."""
    query = parse_qs(urlsplit(url.strip()).query)
    if query.get("state", [None])[0] != state:
        return None
    if "error" in query:
        said = " ".join(f"{query['error'][0]}: {query.get('error_description', [''])[0]}".split())
        return OAuthError(
            f"the authorization server refused the sign-in ({said.rstrip(':')[:200]})",
            error=query["error"][0],
        )
    return query.get("code", [None])[0] or None


@contextlib.asynccontextmanager
async def _listening(state: str, arrived: asyncio.Queue[str | OAuthError]) -> AsyncIterator[str]:
    """An HTTP listener on 127.0.0.1 (an ephemeral port) for the browser's redirect,
    putting what it brings in ``arrived``; its redirect URI."""

    async def callback(request: web.Request) -> web.Response:
        redirect = _redirected(str(request.rel_url), state)
        if redirect is None:
            return web.Response(status=400, text="This is not the redirect of this sign-in.")
        arrived.put_nowait(redirect)
        done = "Sign-in refused." if isinstance(redirect, OAuthError) else "Signed in."
        return web.Response(text=_DONE_PAGE.format(done), content_type="text/html")

    app = web.Application()
    app.router.add_get("/callback", callback)
    # No access log: the request line carries the authorization code.
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        await runner.setup()
        try:
            await web.SockSite(runner, listener).start()
            yield f"http://127.0.0.1:{listener.getsockname()[1]}/callback"
        finally:
            await runner.cleanup()


async def login(
    base_url: str | None = None,
    credentials: str | os.PathLike[str] | Any = None,
    *,
    show_url: Callable[[str], None],
    say: Callable[[str], None],
    pasted: AsyncIterable[str] | None = None,
    scope: str | None = None,
    timeout: float = DEFAULT_LOGIN_TIMEOUT,
) -> tuple[str, Credentials]:
    """Sign in to the service at ``base_url`` and store the credentials; where, and what.

    Discovers the authorization server (RFC 8414) at ``base_url``'s origin, registers a
    client there (RFC 7591) unless the credentials hold one for it, and runs the
    authorization-code flow with PKCE. The store is read first, so an unsafe file or an
    unreachable Redis is refused before anything is sent.

    Arguments:
        credentials: a path or a Redis URL (see :func:`credentials_location`).
        show_url: shows the person the authorization URL (and may open a browser).
        say: tells the person what happened (a damaged sign-in set aside, a pasted line
            that is not the redirect).
        pasted: lines the person types: the URL the browser was sent to, for hosts whose
            browser cannot reach the listener on 127.0.0.1 (awaited with the redirect).
        timeout: seconds to wait for the redirect.
    """
    url = endpoint(base_url)
    origin = _oauth.origin_of(url)
    store = open_store(credentials, origin)
    try:
        try:
            existing = await store.load()
        except UnreadableCredentialsError:
            # Never a trap: what cannot be read is kept aside, and the sign-in starts anew.
            aside = await store.set_aside()
            say(f"{store.where} holds no readable sign-in: moved it to {aside}; signing in anew")
            existing = None
        arrived: asyncio.Queue[str | OAuthError] = asyncio.Queue()
        state, pkce = secrets.token_urlsafe(32), _oauth.new_pkce()

        async def paste(lines: AsyncIterable[str]) -> None:
            async for line in lines:
                if (redirect := _redirected(line, state)) is not None:
                    arrived.put_nowait(redirect)
                    return
                if line.strip():
                    say(_NOT_THE_REDIRECT)

        async with (
            aiohttp.ClientSession() as session,
            _listening(state, arrived) as redirect_uri,
        ):
            metadata = await _oauth.discover(session, url)
            if existing is not None and existing.issuer == metadata.issuer:  # = the origin
                client_id, registered = existing.client_id, existing.redirect_uri
            else:
                client_id = await _oauth.register_client(session, metadata, redirect_uri)
                registered = redirect_uri
            show_url(
                _oauth.authorization_url(
                    metadata,
                    client_id=client_id,
                    redirect_uri=redirect_uri,
                    pkce=pkce,
                    state=state,
                    scope=scope,
                )
            )
            reading = None if pasted is None else asyncio.ensure_future(paste(pasted))
            try:
                code = await within(LoopClock(), timeout, arrived.get(), asyncio.TimeoutError)
            except asyncio.TimeoutError:
                raise OAuthError(f"no sign-in arrived within {timeout:g} s; try again") from None
            finally:
                if reading is not None:
                    reading.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reading
            if isinstance(code, OAuthError):
                raise code
            form = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "client_id": client_id,
                "code_verifier": pkce.verifier,
            }
            tokens = await _oauth.request_tokens(
                session, metadata.token_endpoint, form, what="token request"
            )
        stored = Credentials(
            origin=origin,
            issuer=metadata.issuer,
            authorization_endpoint=metadata.authorization_endpoint,
            token_endpoint=metadata.token_endpoint,
            registration_endpoint=metadata.registration_endpoint,
            revocation_endpoint=metadata.revocation_endpoint,
            client_id=client_id,
            redirect_uri=registered,
            access_token="",
        ).renewed(tokens)
        await store.save(stored)
        return store.where, stored
    finally:
        await store.aclose()


async def logout(
    credentials: str | os.PathLike[str] | Any = None, base_url: str | None = None
) -> str:
    """Revoke the stored tokens where the server offers revocation (RFC 7009), then delete
    the sign-in (the file, or the Redis key); what was done, as a sentence for the person.

    Raises :class:`MagisteriumError` when the server could not revoke them (the sign-in is
    deleted all the same).
    """
    store = open_store(credentials, _oauth.origin_of(endpoint(base_url)))
    try:
        try:
            stored = await store.load()
        except UnreadableCredentialsError:
            await store.delete()
            return (
                f"Signed out: {store.where} held no readable sign-in, so nothing was "
                "revoked; deleted it"
            )
        if stored is None:
            return f"not signed in (no credentials at {store.where})"
        refused = None
        if stored.revocation_endpoint is not None:
            # The refresh token first: revoking it ends the whole grant.
            tokens = [
                (stored.refresh_token, "refresh_token"),
                (stored.access_token, "access_token"),
            ]
            try:
                async with aiohttp.ClientSession() as session:
                    for token, hint in tokens:
                        if token is not None:
                            await _oauth.revoke(
                                session,
                                stored.revocation_endpoint,
                                client_id=stored.client_id,
                                token=token,
                                hint=hint,
                            )
            except MagisteriumError as exc:
                refused = exc
        await store.delete()
    finally:
        await store.aclose()
    if refused is not None:
        raise MagisteriumError(
            f"deleted {store.where}, but the server could not revoke the tokens: {refused}"
        )
    how = (
        "the tokens were revoked"
        if stored.revocation_endpoint
        else "the server offers no revocation"
    )
    return f"Signed out: {how}; deleted {store.where}"


async def auth_status(
    credentials: str | os.PathLike[str] | Any = None, base_url: str | None = None
) -> tuple[str, Credentials | None]:
    """Where the sign-in is kept (a Redis URL with its password masked), and what it is
    (``None``: none); sends nothing to the service (a Redis store is read)."""
    store = open_store(credentials, _oauth.origin_of(endpoint(base_url)))
    try:
        return store.where, await store.load()
    finally:
        await store.aclose()
