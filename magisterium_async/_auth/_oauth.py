"""The OAuth 2.0 protocol steps a public client on a user's machine needs, over aiohttp.

Discovery (RFC 8414), dynamic client registration (RFC 7591), the authorization-code
grant with PKCE S256 (RFC 6749 §4.1, RFC 7636), refresh (RFC 6749 §6) and revocation
(RFC 7009). Each step is one function of an :class:`aiohttp.ClientSession`; none keeps
state. Errors are :class:`OAuthError` (the server said no, or answered off-spec) or
:class:`APIConnectionError` (no answer); none carries a token, a code or a verifier.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import msgspec

from magisterium_async import _version
from magisterium_async._auth._credentials import origin_of
from magisterium_async._errors import APIConnectionError, APITimeoutError, OAuthError
from magisterium_async._http._base import check_base_url
from magisterium_async._http._jsonrpc import raise_alone
from magisterium_async._http._proxy import environment_proxy, request_arguments

__all__ = [
    "METADATA_PATH",
    "Pkce",
    "ServerMetadata",
    "TokenResponse",
    "authorization_url",
    "discover",
    "exchange_code",
    "metadata_url",
    "new_pkce",
    "new_state",
    "refresh",
    "register_client",
    "revoke",
]

METADATA_PATH = "/.well-known/oauth-authorization-server"
CLIENT_NAME = "magisterium-async"
_TIMEOUT = aiohttp.ClientTimeout(total=30.0, sock_connect=10.0)
_MAX_BODY = 1 << 20
_HEADERS = {"Accept": "application/json", "User-Agent": f"magisterium-async/{_version.__version__}"}
_DESCRIPTION = 200  # characters of an error_description kept in a message


class ServerMetadata(msgspec.Struct, frozen=True):
    """The authorization server's metadata (RFC 8414): what the client uses of it."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None


class TokenResponse(msgspec.Struct, frozen=True):
    """A successful token response (RFC 6749 §5.1); the tokens stay out of ``repr``."""

    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None

    def __repr__(self) -> str:
        return f"TokenResponse(token_type={self.token_type!r}, expires_in={self.expires_in!r})"


class _Registration(msgspec.Struct):
    client_id: str


class _ErrorBody(msgspec.Struct):
    error: Any = None
    error_description: Any = None


_METADATA = msgspec.json.Decoder(ServerMetadata)
_TOKENS = msgspec.json.Decoder(TokenResponse)
_REGISTRATION = msgspec.json.Decoder(_Registration)
_ERROR = msgspec.json.Decoder(_ErrorBody)
# RecursionError: a body nested past what the decoder follows is no answer either.
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_NETWORK_ERRORS = (asyncio.TimeoutError, aiohttp.ClientError, OSError)


class Pkce(msgspec.Struct, frozen=True):
    """A PKCE pair (RFC 7636): the secret ``verifier`` and its S256 ``challenge``."""

    verifier: str
    challenge: str

    def __repr__(self) -> str:
        return "Pkce(...)"


def new_pkce() -> Pkce:
    """A fresh verifier (64 characters from 48 random bytes) and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii"))


def new_state() -> str:
    """An unguessable ``state`` value binding a redirect to this login."""
    return secrets.token_urlsafe(32)


def metadata_url(base_url: str) -> str:
    """Where the metadata lives: the well-known path at ``base_url``'s origin."""
    return origin_of(base_url) + METADATA_PATH


def _checked_endpoint(name: str, url: str) -> str:
    try:
        return check_base_url(url)
    except (ValueError, TypeError):
        raise OAuthError(
            f"the authorization server's {name} {url!r} is not an https:// URL "
            "(or http:// to a loopback host)"
        ) from None


async def _read(response: aiohttp.ClientResponse) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65536):
        size += len(chunk)
        if size > _MAX_BODY:
            raise OAuthError(f"{response.url.human_repr()}: the answer is larger than 1 MiB")
        chunks.append(chunk)
    return b"".join(chunks)


async def _request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    what: str,
    *,
    form: Mapping[str, str] | None = None,
    json: Any = None,
    timeout: aiohttp.ClientTimeout = _TIMEOUT,
) -> tuple[int, bytes]:
    # The form may hold a code, a verifier or a token: no exception from here chains to an
    # aiohttp one (whose request_info would hold them), and none names the body.
    headers = dict(_HEADERS)
    data: bytes | None = None
    if form is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        data = urlencode(form).encode("ascii")
    elif json is not None:
        headers["Content-Type"] = "application/json"
        data = msgspec.json.encode(json)
    error: APIConnectionError | None = None
    # The environment's proxies, as for the client's requests.
    via = request_arguments(environment_proxy(url), url, headers)
    try:
        async with session.request(
            method,
            url,
            data=data,
            headers=via.headers,
            allow_redirects=False,
            timeout=timeout,
            proxy=via.proxy,
            proxy_headers=via.proxy_headers,
        ) as response:
            return response.status, await _read(response)
    except asyncio.TimeoutError:
        error = APITimeoutError(f"{what} timed out ({url})")
    except (aiohttp.ClientError, OSError) as exc:
        error = APIConnectionError(f"{what} failed: {type(exc).__name__} ({url})")
    raise_alone(error)


def _refused(what: str, status: int, body: bytes) -> OAuthError:
    try:
        parsed = _ERROR.decode(body)
    except _DECODE_ERRORS:
        parsed = _ErrorBody()
    code = parsed.error if isinstance(parsed.error, str) and parsed.error.isprintable() else None
    text = f"{what}: the authorization server answered HTTP {status}"
    if code is not None:
        text += f" ({code[:64]}"
        description = parsed.error_description
        if isinstance(description, str) and description.strip():
            text += ": " + " ".join(description.split())[:_DESCRIPTION]
        text += ")"
    return OAuthError(text, error=code, status_code=status)


async def discover(session: aiohttp.ClientSession, base_url: str) -> ServerMetadata:
    """The authorization server's metadata, from the well-known URL at ``base_url``'s origin.

    The ``issuer`` must be that origin (RFC 8414 §3.3) and every endpoint https:// (or
    http:// on loopback): tokens are sent to none that the service did not name.
    """
    url = metadata_url(check_base_url(base_url))
    status, body = await _request(session, "GET", url, "authorization-server discovery")
    if status != 200:
        raise OAuthError(
            f"no OAuth authorization server at {url} (HTTP {status}); check --base-url",
            status_code=status,
        )
    try:
        metadata = _METADATA.decode(body)
    except _DECODE_ERRORS as exc:
        raise OAuthError(f"{url} is not authorization-server metadata: {exc}") from None
    if metadata.issuer.rstrip("/") != origin_of(url):
        raise OAuthError(
            f"{url} names the issuer {metadata.issuer!r}, not {origin_of(url)!r} (RFC 8414 §3.3)"
        )
    for name in ("authorization_endpoint", "token_endpoint"):
        _checked_endpoint(name, getattr(metadata, name))
    for name in ("registration_endpoint", "revocation_endpoint"):
        value = getattr(metadata, name)
        if value is not None:
            _checked_endpoint(name, value)
    methods = metadata.code_challenge_methods_supported
    if methods is not None and "S256" not in methods:
        raise OAuthError(f"the authorization server at {url} does not offer PKCE S256")
    return metadata


async def register_client(
    session: aiohttp.ClientSession, metadata: ServerMetadata, redirect_uri: str
) -> str:
    """Register this program as a public client (RFC 7591); its ``client_id``."""
    if metadata.registration_endpoint is None:
        raise OAuthError(
            f"the authorization server {metadata.issuer} offers no dynamic client registration"
        )
    request = {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    status, body = await _request(
        session, "POST", metadata.registration_endpoint, "client registration", json=request
    )
    if status not in (200, 201):
        raise _refused("client registration", status, body)
    try:
        return _REGISTRATION.decode(body).client_id
    except _DECODE_ERRORS as exc:
        raise OAuthError(f"client registration: not a registration response: {exc}") from None


def authorization_url(
    metadata: ServerMetadata,
    *,
    client_id: str,
    redirect_uri: str,
    pkce: Pkce,
    state: str,
    scope: str | None = None,
) -> str:
    """The URL the person opens to sign in and consent (RFC 6749 §4.1.1, RFC 7636 §4.3)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "state": state,
    }
    if scope:
        query["scope"] = scope
    endpoint = metadata.authorization_endpoint
    separator = "&" if urlsplit(endpoint).query else "?"
    return endpoint + separator + urlencode(query)


async def _tokens(
    session: aiohttp.ClientSession,
    token_endpoint: str,
    what: str,
    form: dict[str, str],
    timeout: aiohttp.ClientTimeout = _TIMEOUT,
) -> TokenResponse:
    status, body = await _request(session, "POST", token_endpoint, what, form=form, timeout=timeout)
    if status != 200:
        raise _refused(what, status, body)
    try:
        tokens = _TOKENS.decode(body)
    except _DECODE_ERRORS as exc:
        # msgspec names the field that is wrong, never a value: no token in the message.
        raise OAuthError(f"{what}: not a token response: {exc}", status_code=status) from None
    if tokens.token_type.lower() != "bearer":
        raise OAuthError(f"{what}: unsupported token type {tokens.token_type[:32]!r}")
    token = tokens.access_token
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise OAuthError(f"{what}: the access token is not a printable ASCII string")
    return tokens


async def exchange_code(
    session: aiohttp.ClientSession,
    metadata: ServerMetadata,
    *,
    client_id: str,
    code: str,
    redirect_uri: str,
    pkce: Pkce,
) -> TokenResponse:
    """Trade an authorization code (and the PKCE verifier) for tokens (RFC 6749 §4.1.3)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": pkce.verifier,
    }
    return await _tokens(session, metadata.token_endpoint, "token request", form)


async def refresh(
    session: aiohttp.ClientSession,
    token_endpoint: str,
    *,
    client_id: str,
    refresh_token: str,
    timeout: float | None = None,
) -> TokenResponse:
    """New tokens for a refresh token (RFC 6749 §6); the answer may rotate it.

    ``timeout`` (seconds, default 30) bounds the whole request: a refresh holding a lock
    other processes wait on must end within the lock's lease.
    """
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    bound = _TIMEOUT if timeout is None else aiohttp.ClientTimeout(total=timeout)
    return await _tokens(session, token_endpoint, "token refresh", form, bound)


async def revoke(
    session: aiohttp.ClientSession,
    revocation_endpoint: str,
    *,
    client_id: str,
    token: str,
    hint: str,
) -> None:
    """Revoke one token (RFC 7009 §2.1); an unknown token counts as revoked (§2.2)."""
    form = {"token": token, "token_type_hint": hint, "client_id": client_id}
    status, body = await _request(session, "POST", revocation_endpoint, "revocation", form=form)
    if status != 200:
        raise _refused("revocation", status, body)
