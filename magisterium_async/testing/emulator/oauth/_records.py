"""What the emulator's authorization server remembers, and what it counts.

It owns the records of a sign-in, kept by value of the token in :mod:`._server`'s tables
(a :class:`Grant`, its :class:`Code`, its :class:`AccessToken` and
:class:`RefreshToken` records), the :class:`Access` an accepted token gives the A2A
endpoint, and the :class:`OAuthCounts` tests assert on. Records never hold a token's
value, so none can show up in a ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from magisterium_async.testing.emulator._config import Plan

__all__ = [
    "QUOTA_SUBJECT",
    "Access",
    "AccessToken",
    "Code",
    "Grant",
    "OAuthCounts",
    "RefreshToken",
]

QUOTA_SUBJECT = "oauth-user"
"""The quota every OAuth token draws on: they are all the same emulated user."""


@dataclass(slots=True)
class OAuthCounts:
    """What the authorization server did, for tests to assert on.

    ``registrations``: clients registered; ``authorizations``: codes issued;
    ``tokens_issued``: access tokens issued (by a code exchange, a refresh or
    :meth:`OAuthServer.issue`);
    ``refreshes``: successful refresh-token grants; ``invalid_grants``: token requests
    answered ``invalid_grant``; ``refresh_reuses``: spent refresh tokens presented again
    (each revokes its grant); ``revocations``: answered revocation requests;
    ``token_errors``: other token-endpoint errors; ``rejected_tokens``: A2A requests refused
    because their OAuth access token had expired or was revoked; ``faults``: scripted
    faults met at the OAuth endpoints.
    """

    registrations: int = 0
    authorizations: int = 0
    tokens_issued: int = 0
    refreshes: int = 0
    invalid_grants: int = 0
    refresh_reuses: int = 0
    revocations: int = 0
    token_errors: int = 0
    rejected_tokens: int = 0
    faults: int = 0

    def reset(self) -> None:
        """Set every counter to zero."""
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)


@dataclass(frozen=True, slots=True)
class Access:
    """An access token the A2A endpoint accepts: its plan, and the quota it draws on."""

    plan: Plan
    quota_key: str


@dataclass(slots=True)
class Grant:
    """One sign-in: what a code exchange (or :meth:`OAuthServer.issue`) granted a client.
    Every token it gave dies with it."""

    client_id: str
    scope: str
    revoked: bool = False


@dataclass(slots=True)
class Code:
    """An authorization code: single-use, bound to its redirect URI and PKCE challenge."""

    grant: Grant
    redirect_uri: str | None
    challenge: str
    expires_at: float
    used: bool = False


@dataclass(slots=True)
class AccessToken:
    """An access token's record (never its value)."""

    grant: Grant
    expires_at: float
    revoked: bool = False


@dataclass(slots=True)
class RefreshToken:
    """A refresh token's record: ``spent`` once rotated, ``revoked`` with its grant."""

    grant: Grant
    expires_at: float | None
    state: Literal["active", "spent", "revoked"] = "active"
