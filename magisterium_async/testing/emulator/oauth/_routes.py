"""The OAuth endpoints over HTTP: metadata, registration, authorize, token, revocation.

Every path is at the emulator's origin, which is also the issuer:

==========================================  ==========================================
``GET  /.well-known/oauth-authorization-server``  RFC 8414 metadata
``POST /oauth/register``                    RFC 7591 registration (JSON), 201
``GET  /oauth/authorize``                   302 to the redirect URI (auto-consent)
``POST /oauth/token``                       RFC 6749 token requests (form-encoded)
``POST /oauth/revoke``                      RFC 7009 revocation (form-encoded), 200;
                                            absent with ``offer_revocation=False``
==========================================  ==========================================

Scripted faults reach these endpoints only when scripted for them by name
(``emu.script(Fault.drop(processed=True), method="oauth/token")``): ``latency``,
``http_error``, ``drop`` (``processed=True``: the request takes effect, its answer is
lost), ``truncated``, ``malformed`` and ``none``. Random faults never do.

It also makes sure every 401 the emulator sends carries ``WWW-Authenticate``.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from magisterium_async.testing.emulator._faults import Fault, FaultInjector
from magisterium_async.testing.emulator._wire import encode
from magisterium_async.testing.emulator.oauth._clients import SCOPES
from magisterium_async.testing.emulator.oauth._server import OAuthServer
from magisterium_async.testing.emulator.oauth._wire import REALM, OAuthError, bearer_challenge

__all__ = [
    "AUTHORIZE_PATH",
    "METADATA_PATH",
    "OAUTH_METHODS",
    "REGISTER_PATH",
    "REVOKE_PATH",
    "TOKEN_PATH",
    "add_oauth_routes",
    "check_oauth_faults",
    "metadata",
]

METADATA_PATH = "/.well-known/oauth-authorization-server"
REGISTER_PATH = "/oauth/register"
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REVOKE_PATH = "/oauth/revoke"

OAUTH_METHODS = frozenset(
    {"oauth/metadata", "oauth/register", "oauth/authorize", "oauth/token", "oauth/revoke"}
)
_FAULT_KINDS = frozenset({"none", "latency", "http_error", "drop", "truncated", "malformed"})

_JSON = "application/json"
_FORM = "application/x-www-form-urlencoded"
_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
_PAGE = (
    "<!doctype html>\n<html><head><title>Sign-in failed</title></head><body>\n"
    "<h1>Sign-in failed</h1>\n<p><code>{error}</code>: {description}</p>\n"
    "<p>The application asked to sign in with a request the emulator cannot trust, so it "
    "was not sent back to the application.</p>\n</body></html>\n"
)


def metadata(issuer: str, *, revocation: bool = True) -> dict[str, Any]:
    """The authorization-server metadata document (RFC 8414 §2) for ``issuer``."""
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": issuer + AUTHORIZE_PATH,
        "token_endpoint": issuer + TOKEN_PATH,
        "registration_endpoint": issuer + REGISTER_PATH,
        "revocation_endpoint": issuer + REVOKE_PATH,
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": True,
    }
    if not revocation:
        del document["revocation_endpoint"], document["revocation_endpoint_auth_methods_supported"]
    return document


def _issuer(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _json(
    body: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(body=encode(body), status=status, content_type=_JSON, headers=headers)


def _error(request: web.Request, error: OAuthError) -> web.Response:
    headers = dict(_NO_STORE)
    status = error.status
    if error.error == "invalid_client" and "Authorization" in request.headers:
        # RFC 6749 §5.2: a client that tried the Authorization header gets 401 and a challenge.
        status = 401
        headers["WWW-Authenticate"] = f'Basic realm="{REALM}"'
    return _json(error.body(), status, headers)


async def _form(request: web.Request) -> dict[str, list[str]]:
    if request.content_type != _FORM:
        raise OAuthError("invalid_request", f"the body must be {_FORM}")
    try:
        text = (await request.read()).decode("utf-8")
        return parse_qs(text, keep_blank_values=True, strict_parsing=bool(text))
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "the body is not valid form encoding") from None


def _public_client_only(request: web.Request) -> None:
    if "Authorization" in request.headers:
        raise OAuthError(
            "invalid_client",
            'only public clients are served: authenticate with client_id alone ("none")',
        )


def _query(request: web.Request) -> dict[str, Sequence[str]]:
    return {name: request.query.getall(name) for name in set(request.query.keys())}


def check_oauth_faults(method: str, faults: Iterable[Fault]) -> None:
    """Refuse faults an OAuth endpoint cannot meet (JSON-RPC errors, failed tasks, 429s)."""
    if method not in OAUTH_METHODS:
        raise ValueError(
            f"no OAuth endpoint is called {method!r}; expected one of {sorted(OAUTH_METHODS)}"
        )
    for fault in faults:
        if fault.kind not in _FAULT_KINDS:
            raise ValueError(f"a {fault.kind} fault cannot happen at {method}")


def _drop(request: web.Request) -> web.Response:
    if request.transport is not None:
        request.transport.close()
    return web.Response()


_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Routes:
    def __init__(self, server: OAuthServer, faults: FaultInjector) -> None:
        self.server = server
        self.faults = faults

    def faulted(self, method: str, handler: _Handler) -> _Handler:
        """``handler``, meeting the faults scripted for ``method`` first."""

        async def handle(request: web.Request) -> web.StreamResponse:
            fault = self.faults.claim(method)
            if fault is None or fault.kind == "none":
                return await handler(request)
            self.server.counts.faults += 1
            if fault.kind == "latency":
                await asyncio.sleep(fault.seconds)
                return await handler(request)
            if fault.kind == "http_error":
                headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after else None
                return web.Response(
                    body=fault.body,
                    status=fault.status,
                    headers=headers,
                    content_type=fault.content_type,
                )
            if fault.kind == "drop":
                if fault.processed:
                    await handler(request)
                return _drop(request)
            answer = await handler(request)
            body = answer.body if isinstance(answer, web.Response) else None
            whole = body if isinstance(body, bytes) else b""
            if fault.kind == "malformed":
                return web.Response(
                    body=fault.body or whole[: len(whole) // 2],
                    status=answer.status,
                    content_type=_JSON,
                )
            response = web.StreamResponse(status=answer.status)
            response.content_type = _JSON
            response.content_length = len(whole)
            await response.prepare(request)
            await response.write(whole[: len(whole) // 2])
            if request.transport is not None:
                request.transport.close()
            return response

        return handle

    async def metadata(self, request: web.Request) -> web.Response:
        offered = self.server.config.offer_revocation
        return _json(metadata(_issuer(request), revocation=offered))

    async def register(self, request: web.Request) -> web.Response:
        try:
            if request.content_type != _JSON:
                raise OAuthError("invalid_client_metadata", f"the body must be {_JSON}")
            try:
                body = json.loads(await request.read())
            except ValueError:
                raise OAuthError("invalid_client_metadata", "the body is not valid JSON") from None
            client = self.server.register(body)
        except OAuthError as error:
            return _error(request, error)
        return _json(client.metadata(), 201, _NO_STORE)

    async def authorize(self, request: web.Request) -> web.Response:
        try:
            redirect = self.server.authorize(_query(request), _issuer(request))
        except OAuthError as error:
            page = _PAGE.format(error=error.error, description=html.escape(error.description))
            return web.Response(text=page, status=400, content_type="text/html")
        return web.Response(status=302, headers={"Location": redirect.location, **_NO_STORE})

    async def token(self, request: web.Request) -> web.Response:
        try:
            _public_client_only(request)
            answer = self.server.token(await _form(request))
        except OAuthError as error:
            return _error(request, error)
        return _json(answer, 200, _NO_STORE)

    async def revoke(self, request: web.Request) -> web.Response:
        try:
            _public_client_only(request)
            self.server.revoke(await _form(request))
        except OAuthError as error:
            return _error(request, error)
        return web.Response(status=200, headers=_NO_STORE)


async def _challenge_401(request: web.Request, response: web.StreamResponse) -> None:
    """RFC 6750 §3 / RFC 7235 §3.1: a 401 always says how to authenticate."""
    if response.status == 401 and "WWW-Authenticate" not in response.headers:
        refused = "the token was refused" if "Authorization" in request.headers else None
        response.headers["WWW-Authenticate"] = bearer_challenge(refused)


def add_oauth_routes(app: web.Application, server: OAuthServer, faults: FaultInjector) -> None:
    """Serve ``server``'s endpoints on ``app`` (meeting the faults scripted for them), and
    give every 401 its challenge."""
    routes = _Routes(server, faults)
    app.router.add_get(METADATA_PATH, routes.faulted("oauth/metadata", routes.metadata))
    app.router.add_post(REGISTER_PATH, routes.faulted("oauth/register", routes.register))
    app.router.add_get(AUTHORIZE_PATH, routes.faulted("oauth/authorize", routes.authorize))
    app.router.add_post(TOKEN_PATH, routes.faulted("oauth/token", routes.token))
    if server.config.offer_revocation:
        app.router.add_post(REVOKE_PATH, routes.faulted("oauth/revoke", routes.revoke))
    app.on_response_prepare.append(_challenge_401)
