"""What the emulator's OAuth endpoints read and write, apart from any state.

It owns the shapes of the exchange: the error answer (RFC 6749 §5.2) and the
``WWW-Authenticate`` challenge of a refused bearer token (RFC 6750 §3), the redirect the
authorization endpoint answers with, the reading of form and query parameters (each sent
at most once, an empty one absent: RFC 6749 §3.1), and the PKCE S256 check (RFC 7636).
Who is registered and which tokens live is :mod:`._server`'s business.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

__all__ = [
    "REALM",
    "AuthorizationRedirect",
    "OAuthError",
    "bearer_challenge",
    "pkce_matches",
    "repeated_parameter",
    "single",
    "valid_challenge",
    "valid_verifier",
    "with_query",
]

REALM = "magisterium-emulator"

_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_DESCRIPTION_UNSAFE = re.compile(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]")


def bearer_challenge(error_description: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750 §3): the realm alone when no token
    was sent, ``error="invalid_token"`` with a description when one was refused."""
    if error_description is None:
        return f'Bearer realm="{REALM}"'
    safe = _DESCRIPTION_UNSAFE.sub("", error_description)
    return f'Bearer realm="{REALM}", error="invalid_token", error_description="{safe}"'


class OAuthError(Exception):
    """An OAuth error answer: ``error`` code, ``description``, HTTP ``status``."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        self.error = error
        self.description = description
        self.status = status
        super().__init__(f"{error}: {description}")

    def body(self) -> dict[str, str]:
        """The JSON error object of RFC 6749 §5.2 and RFC 7591 §3.2.2."""
        return {"error": self.error, "error_description": self.description}


@dataclass(frozen=True, slots=True)
class AuthorizationRedirect:
    """Where the authorization endpoint sends the browser: ``location`` (a code, or an
    error the client is told about through its redirect URI)."""

    location: str
    error: str | None = None


def with_query(uri: str, params: Mapping[str, str]) -> str:
    """``uri`` with ``params`` added to its query."""
    parts = urlsplit(uri)
    query = urlencode(params)
    joined = f"{parts.query}&{query}" if parts.query else query
    return parts._replace(query=joined).geturl()


def _sent_twice(name: str) -> str:
    return f"parameter {name} was sent more than once"


def single(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    """One parameter's value; an empty value counts as absent (RFC 6749 §3.1)."""
    values = params.get(name, ())
    if len(values) > 1:
        raise OAuthError("invalid_request", _sent_twice(name))
    return values[0] if values and values[0] != "" else None


def repeated_parameter(params: Mapping[str, Sequence[str]]) -> str | None:
    """What is wrong when a parameter was sent more than once (RFC 6749 §3.1), else None."""
    names = sorted(name for name, values in params.items() if len(values) > 1)
    return _sent_twice(names[0]) if names else None


def valid_challenge(challenge: str) -> bool:
    """Whether ``challenge`` can be an S256 ``code_challenge``: 43 base64url characters."""
    return _CHALLENGE.fullmatch(challenge) is not None


def valid_verifier(verifier: str) -> bool:
    """Whether ``verifier`` is a ``code_verifier``: 43 to 128 unreserved characters."""
    return _VERIFIER.fullmatch(verifier) is not None


def pkce_matches(verifier: str, challenge: str) -> bool:
    """Whether ``verifier`` hashes (S256) to ``challenge``, compared in constant time."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    s256 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return hmac.compare_digest(s256, challenge)
