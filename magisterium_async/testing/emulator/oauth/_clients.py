"""The emulator's OAuth clients: who may register, with what, and where codes may go.

It owns RFC 7591 dynamic registration of public clients (the metadata a client sends,
checked into an :class:`OAuthClient`), the loopback redirect URIs of native apps
(RFC 8252 §7.3 and §8.3: ``http://127.0.0.1``, ``http://[::1]`` or ``http://localhost``,
matched on any port) and the scopes the server knows. Keeping the registry of clients is
:mod:`._server`'s business.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from magisterium_async.testing.emulator.oauth._wire import OAuthError

__all__ = [
    "GRANT_TYPES",
    "SCOPES",
    "OAuthClient",
    "client_from_metadata",
    "loopback_match",
    "scope_problem",
    "uri_problem",
]

SCOPES = ("a2a",)
GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """A registered client, as RFC 7591 describes it."""

    client_id: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    client_name: str | None
    scope: str
    issued_at: int

    def metadata(self) -> dict[str, Any]:
        """The registration response body (RFC 7591 §3.2.1)."""
        body: dict[str, Any] = {
            "client_id": self.client_id,
            "client_id_issued_at": self.issued_at,
            "redirect_uris": list(self.redirect_uris),
            "token_endpoint_auth_method": "none",
            "grant_types": list(self.grant_types),
            "response_types": ["code"],
            "scope": self.scope,
        }
        if self.client_name is not None:
            body["client_name"] = self.client_name
        return body


def client_from_metadata(metadata: object) -> OAuthClient:
    """A new public client (a fresh ``client_id``) from its registration metadata; raises
    :class:`OAuthError` with ``invalid_redirect_uri`` or ``invalid_client_metadata``. A
    ``null`` value counts as an omitted one."""
    if not isinstance(metadata, dict):
        raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
    metadata = {key: value for key, value in metadata.items() if value is not None}
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list")
    for uri in uris:
        problem = uri_problem(uri)
        if problem is not None:
            raise OAuthError("invalid_redirect_uri", problem)
    method = metadata.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise OAuthError(
            "invalid_client_metadata",
            f"token_endpoint_auth_method {method!r} is not supported: only public clients "
            '("none") can register',
        )
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if (
        not isinstance(grant_types, list)
        or not grant_types
        or not all(isinstance(g, str) for g in grant_types)
    ):
        raise OAuthError("invalid_client_metadata", "grant_types must be a list of strings")
    unsupported = sorted(set(grant_types) - GRANT_TYPES)
    if unsupported:
        raise OAuthError("invalid_client_metadata", f"unsupported grant_types {unsupported}")
    if "authorization_code" not in grant_types:
        raise OAuthError("invalid_client_metadata", "grant_types must include authorization_code")
    response_types = metadata.get("response_types", ["code"])
    if response_types != ["code"]:
        raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
    scope = metadata.get("scope", " ".join(SCOPES))
    if not isinstance(scope, str):
        raise OAuthError("invalid_client_metadata", "scope must be a string")
    problem = scope_problem(scope, SCOPES)
    if problem is not None:
        raise OAuthError("invalid_client_metadata", problem)
    name = metadata.get("client_name")
    if name is not None and not isinstance(name, str):
        raise OAuthError("invalid_client_metadata", "client_name must be a string")
    return OAuthClient(
        client_id="emu-client-" + secrets.token_hex(8),
        redirect_uris=tuple(uris),
        grant_types=tuple(dict.fromkeys(grant_types)),
        client_name=name,
        scope=scope or " ".join(SCOPES),
        issued_at=int(time.time()),
    )


def uri_problem(uri: object) -> str | None:
    """What is wrong with ``uri`` as a registered redirect URI, or ``None``."""
    if not isinstance(uri, str):
        return "redirect_uris must be strings"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return f"{uri!r} is not a valid URI"
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK_HOSTS:
        return (
            f"{uri!r} is not a loopback redirect URI: use http://127.0.0.1, http://[::1] "
            "or http://localhost (RFC 8252)"
        )
    if parts.fragment or "#" in uri:
        return f"{uri!r} has a fragment"
    if parts.username is not None or parts.password is not None:
        return f"{uri!r} has user information"
    return None


def loopback_match(registered: str, sent: str) -> bool:
    """RFC 8252 §7.3: equal but for the port, which may be any."""
    a, b = urlsplit(registered), urlsplit(sent)
    try:
        b.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return (
        a.scheme == b.scheme
        and a.hostname == b.hostname
        and (a.path or "/") == (b.path or "/")
        and a.query == b.query
        and not b.fragment
        and b.username is None
        and b.password is None
    )


def scope_problem(scope: str, allowed: Iterable[str]) -> str | None:
    """What is wrong with ``scope`` (a space-separated list) given ``allowed``, or ``None``."""
    unknown = sorted(set(scope.split()) - set(allowed))
    return f"unknown scope {' '.join(unknown)!r}" if unknown else None
