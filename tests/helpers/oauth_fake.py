"""A small OAuth authorization server and A2A endpoint on 127.0.0.1, and the sign-in steps
a person takes, for the client's tests.

It speaks the RFCs the client relies on (8414 metadata, 7591 registration, the code grant
with PKCE S256, refresh with rotation, 7009 revocation) and counts what it was asked, so a
test can assert how many refreshes were sent and whether a rotated refresh token was ever
used twice. Its clock is the test's, so token lifetimes pass in jump time.

The emulator's authorization server (``tests/test_signin_emulator.py``) covers the
end-to-end story; this one stays for what the emulator does not show a test: the ordered
list of endpoints asked (so "no request was sent" covers the metadata fetch too), a token
answer held back after the refresh token rotated (``token_gate``: a latency fault answers
only after a real sleep, and before rotating), and access tokens granted or dropped by
value (``access``), with the issuing step replaceable.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from magisterium_async._auth import login
from magisterium_async.testing import Emulator

__all__ = [
    "FakeAuthServer",
    "auth_server",
    "browser_follows",
    "redirect_location",
    "sign_in",
]


def _task() -> dict[str, Any]:
    return {
        "kind": "task",
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {"state": "completed"},
        "artifacts": [
            {
                "artifactId": "a-1",
                "name": "search_results",
                "parts": [{"kind": "data", "data": {"results": []}}],
            }
        ],
        "history": [],
    }


@dataclass
class _Grant:
    client_id: str
    scope: str


@dataclass
class FakeAuthServer:
    """The server's state and counters; ``now`` is the clock token lifetimes run on."""

    now: Callable[[], float]
    lifetime: float = 60.0
    revocation: bool = True
    server: TestServer | None = None
    clients: dict[str, list[str]] = field(default_factory=dict)
    codes: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    access: dict[str, float] = field(default_factory=dict)  # token -> expiry on ``now``
    refresh_tokens: dict[str, _Grant] = field(default_factory=dict)
    registrations: int = 0
    refreshes: int = 0
    invalid_grants: int = 0
    revoked: list[str] = field(default_factory=list)
    token_outages: int = 0  # the next token requests answered 503
    token_gate: asyncio.Event | None = None  # token answers wait for it to be sent
    token_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    rpc_calls: int = 0
    rpc_refused: int = 0
    requests: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    @property
    def base_url(self) -> str:
        return self.origin + "/api/v1/a2a"

    def revoke_all(self) -> None:
        """Revoke every refresh and access token (the user signed out elsewhere)."""
        self.refresh_tokens.clear()
        self.access.clear()

    def _issue(self, grant: _Grant) -> dict[str, Any]:
        token = "at-" + secrets.token_urlsafe(16)
        self.access[token] = self.now() + self.lifetime
        body: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "scope": grant.scope,
        }
        refresh_token = "rt-" + secrets.token_urlsafe(16)
        self.refresh_tokens[refresh_token] = grant
        body["refresh_token"] = refresh_token
        return body

    # The endpoints -------------------------------------------------------------------

    async def metadata(self, request: web.Request) -> web.Response:
        self.requests.append("metadata")
        body = {
            "issuer": self.origin,
            "authorization_endpoint": self.origin + "/oauth/authorize",
            "token_endpoint": self.origin + "/oauth/token",
            "registration_endpoint": self.origin + "/oauth/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }
        if self.revocation:
            body["revocation_endpoint"] = self.origin + "/oauth/revoke"
        return web.json_response(body)

    async def register(self, request: web.Request) -> web.Response:
        self.requests.append("register")
        body = await request.json()
        assert body["token_endpoint_auth_method"] == "none"
        assert set(body["grant_types"]) == {"authorization_code", "refresh_token"}
        for uri in body["redirect_uris"]:
            assert urlsplit(uri).hostname == "127.0.0.1", uri
        self.registrations += 1
        client_id = "client-" + secrets.token_hex(4)
        self.clients[client_id] = body["redirect_uris"]
        return web.json_response(
            {"client_id": client_id, **body, "client_id_issued_at": 0}, status=201
        )

    async def authorize(self, request: web.Request) -> web.Response:
        self.requests.append("authorize")
        q = request.query
        if q.get("client_id") not in self.clients:
            return web.Response(status=400, text="unknown client")
        redirect = q["redirect_uri"]
        parts = urlsplit(redirect)
        registered = [urlsplit(u) for u in self.clients[q["client_id"]]]
        # RFC 8252 §7.3: any port matches for a loopback redirect.
        if not any(r.hostname == parts.hostname and r.path == parts.path for r in registered):
            return web.Response(status=400, text="redirect_uri mismatch")
        if q.get("code_challenge_method") != "S256" or "state" not in q:
            return web.Response(status=400, text="PKCE S256 and state required")
        code = "code-" + secrets.token_urlsafe(8)
        self.codes[code] = (q["client_id"], redirect, q["code_challenge"], q.get("scope", "a2a"))
        location = redirect + "?" + urlencode({"code": code, "state": q["state"]})
        raise web.HTTPFound(location)

    async def token(self, request: web.Request) -> web.Response:
        response = await self._token(request)
        # The answer is made (a refresh token rotated) before it is held back.
        self.token_arrived.set()
        if self.token_gate is not None:
            await self.token_gate.wait()
        return response

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        grant_type = form.get("grant_type")
        self.requests.append(f"token:{grant_type}")
        if self.token_outages:
            self.token_outages -= 1
            return web.json_response({"error": "temporarily_unavailable"}, status=503)
        if grant_type == "authorization_code":
            entry = self.codes.pop(str(form.get("code")), None)
            if entry is None:
                return self._error("invalid_grant", "unknown code")
            client_id, redirect, challenge, scope = entry
            verifier = str(form.get("code_verifier", ""))
            digest = hashlib.sha256(verifier.encode()).digest()
            expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if expected != challenge or form.get("redirect_uri") != redirect:
                return self._error("invalid_grant", "PKCE or redirect_uri mismatch")
            if form.get("client_id") != client_id:
                return self._error("invalid_client", "wrong client")
            return web.json_response(self._issue(_Grant(client_id, scope)))
        if grant_type == "refresh_token":
            self.refreshes += 1
            presented = str(form.get("refresh_token"))
            grant = self.refresh_tokens.get(presented)
            if grant is None or grant.client_id != form.get("client_id"):
                self.invalid_grants += 1
                return self._error("invalid_grant", "refresh token unknown, used or revoked")
            del self.refresh_tokens[presented]
            return web.json_response(self._issue(grant))
        return self._error("unsupported_grant_type", str(grant_type))

    def _error(self, error: str, description: str) -> web.Response:
        return web.json_response({"error": error, "error_description": description}, status=400)

    async def revoke(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = str(form.get("token"))
        self.revoked.append(str(form.get("token_type_hint")))
        self.refresh_tokens.pop(token, None)
        self.access.pop(token, None)
        return web.Response(status=200)

    async def rpc(self, request: web.Request) -> web.Response:
        self.rpc_calls += 1
        body = await request.json()
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        expiry = self.access.get(token) if scheme == "Bearer" else None
        if expiry is None or self.now() >= expiry:
            self.rpc_refused += 1
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": body.get("id"),
                    "error": {"code": -32004, "message": "Unauthorized"},
                },
                status=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return web.json_response({"jsonrpc": "2.0", "id": body.get("id"), "result": _task()})


async def browser_follows(url: str) -> int:
    """What a browser does with the authorization URL: follow the redirects to the end."""
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()
        return response.status


async def sign_in(
    server: FakeAuthServer | Emulator,
    path: Path | str,
    say: Callable[[str], None] = lambda line: None,
    show: Callable[[str], None] = lambda url: None,
) -> None:
    """Log in through the library flow, the browser step done by an HTTP client.

    Arguments:
        server: the authorization server and service.
        path: the credentials' location.
        say: hears what the login tells the person.
        show: hears the authorization URL, before the browser follows it.
    """
    visits: list[asyncio.Task[int]] = []

    def follow(url: str) -> None:
        show(url)
        visits.append(asyncio.ensure_future(browser_follows(url)))

    await login(server.base_url, path, say=say, show_url=follow)
    assert [await visit for visit in visits] == [200]


async def redirect_location(url: str) -> str:
    """What a browser on another machine is sent to: the redirect, not followed."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, allow_redirects=False) as response,
    ):
        assert response.status == 302
        return response.headers["Location"]


@pytest.fixture
async def auth_server() -> AsyncIterator[FakeAuthServer]:
    """A :class:`FakeAuthServer` on a free 127.0.0.1 port, on a clock the test moves
    (``auth_server.now = ...``)."""
    fake = FakeAuthServer(now=lambda: 0.0)
    app = web.Application()
    app.router.add_get("/.well-known/oauth-authorization-server", fake.metadata)
    app.router.add_post("/oauth/register", fake.register)
    app.router.add_get("/oauth/authorize", fake.authorize)
    app.router.add_post("/oauth/token", fake.token)
    app.router.add_post("/oauth/revoke", fake.revoke)
    app.router.add_post("/api/v1/a2a", fake.rpc)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    fake.server = server
    try:
        yield fake
    finally:
        await server.close()
