"""The OAuth 2.0 protocol steps a public client on a user's machine needs, over aiohttp.

Discovery (RFC 8414), dynamic client registration (RFC 7591), the authorization URL with
PKCE S256 (RFC 6749 §4.1, RFC 7636), a token request (the code exchange of §4.1.3 and the
refresh of §6) and revocation (RFC 7009). Each step is one function of an
:class:`aiohttp.ClientSession`; none keeps state. Errors are :class:`OAuthError` (the
server said no, or answered off-spec) or :class:`APIConnectionError` (no answer); none
carries a token, a code or a verifier.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import msgspec

from magisterium_async import _version
from magisterium_async._errors import APIConnectionError, APITimeoutError, OAuthError
from magisterium_async._http import Proxies, check_base_url, raise_alone

CLIENT_NAME = "magisterium-async"
TIMEOUT = 30.0  # bounds one request to the authorization server, by default
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


class _Answer(msgspec.Struct):
    """What else the client reads: a registration's ``client_id``, or an error."""

    client_id: Any = None
    error: Any = None
    error_description: Any = None


_METADATA = msgspec.json.Decoder(ServerMetadata)
_TOKENS = msgspec.json.Decoder(TokenResponse)
_ANSWER = msgspec.json.Decoder(_Answer)
# RecursionError: a body nested past what the decoder follows is no answer either.
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


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


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased: what a token is bound to."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


async def _request(
    session: aiohttp.ClientSession,
    url: str,
    what: str,
    *,
    form: dict[str, str] | None = None,
    json: Any = None,
    timeout: float = TIMEOUT,
) -> tuple[int, bytes]:
    """GET ``url`` (or POST ``form`` or ``json``) through the environment's proxy; the
    status and at most 1 MiB of body.

    The form may hold a code, a verifier or a token: no exception from here chains to an
    aiohttp one (whose ``request_info`` would hold them), and none names the body.
    """
    error: APIConnectionError
    try:
        async with session.request(
            "GET" if form is None and json is None else "POST",
            url,
            data=form,
            json=json,
            headers=_HEADERS,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, 10.0)),
            proxy=Proxies().for_url(url),
        ) as response:
            body = b""
            async for chunk in response.content.iter_chunked(65536):
                body += chunk
                if len(body) > _MAX_BODY:
                    raise OAuthError(f"{what} ({url}): the answer is larger than 1 MiB")
            return response.status, body
    except asyncio.TimeoutError:
        error = APITimeoutError(f"{what} timed out ({url})")
    except (aiohttp.ClientError, OSError) as exc:
        error = APIConnectionError(f"{what} failed: {type(exc).__name__} ({url})")
    raise_alone(error)


def _refused(what: str, status: int, body: bytes) -> OAuthError:
    try:
        parsed = _ANSWER.decode(body)
    except _DECODE_ERRORS:
        parsed = _Answer()
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
    url = origin_of(check_base_url(base_url)) + "/.well-known/oauth-authorization-server"
    status, body = await _request(session, url, "authorization-server discovery")
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
    for name in ("authorization", "token", "registration", "revocation"):
        endpoint = getattr(metadata, f"{name}_endpoint")
        try:
            if endpoint is not None:
                check_base_url(endpoint)
        except (ValueError, TypeError):
            raise OAuthError(
                f"the authorization server's {name}_endpoint {endpoint!r} is not an https:// "
                "URL (or http:// to a loopback host)"
            ) from None
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
        session, metadata.registration_endpoint, "client registration", json=request
    )
    if status not in (200, 201):
        raise _refused("client registration", status, body)
    try:
        client_id = _ANSWER.decode(body).client_id
    except _DECODE_ERRORS:
        client_id = None
    if not isinstance(client_id, str) or not client_id:
        raise OAuthError("client registration: the answer holds no client_id")
    return client_id


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


async def request_tokens(
    session: aiohttp.ClientSession,
    token_endpoint: str,
    form: dict[str, str],
    *,
    what: str,
    timeout: float = TIMEOUT,
) -> TokenResponse:
    """Tokens for ``form``: a code and its PKCE verifier (``grant_type=authorization_code``,
    RFC 6749 §4.1.3) or a refresh token (``grant_type=refresh_token``, §6; the answer may
    rotate it).

    Arguments:
        what: the step, as a message names it (``"token refresh"``).
        timeout: seconds the whole request may take (a refresh holding a lock other
            processes wait on must end within the lock's lease).
    """
    status, body = await _request(session, token_endpoint, what, form=form, timeout=timeout)
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


async def revoke(
    session: aiohttp.ClientSession, endpoint: str, *, client_id: str, token: str, hint: str
) -> None:
    """Revoke one token (RFC 7009 §2.1); an unknown token counts as revoked (§2.2)."""
    form = {"token": token, "token_type_hint": hint, "client_id": client_id}
    status, body = await _request(session, endpoint, "revocation", form=form)
    if status != 200:
        raise _refused("revocation", status, body)
