"""The emulator's live tokens: issuing, checking, revoking and expiring them.

A :class:`TokenLedger` holds every access and refresh token the authorization server
gave, by value, each with the grant it belongs to; revoking a grant revokes every token
it gave. The endpoints' rules (who may have a token, when a refresh is refused) are
:class:`~._oauth.OAuthServer`'s, which calls the ledger under its lock: the ledger has
none of its own. Token values are never logged, counted by value or shown.
"""

from __future__ import annotations

import secrets
from typing import Any

from magisterium_async.testing.emulator._config import EmulatorConfig
from magisterium_async.testing.emulator.oauth._clients import OAuthClient
from magisterium_async.testing.emulator.oauth._records import (
    QUOTA_SUBJECT,
    Access,
    AccessToken,
    Grant,
    OAuthCounts,
    RefreshToken,
)

__all__ = ["TokenLedger"]


class TokenLedger:
    """Every live access and refresh token, by value; the caller holds the server's lock."""

    def __init__(self, config: EmulatorConfig, counts: OAuthCounts) -> None:
        self._config = config
        self._counts = counts
        self._clock = config.clock
        self.access: dict[str, AccessToken] = {}
        """Access tokens by value."""
        self.refresh: dict[str, RefreshToken] = {}
        """Refresh tokens by value, spent and revoked ones included (to detect reuse)."""

    def issue(
        self, client: OAuthClient, grant: Grant, scope: str, *, refresh: bool = True
    ) -> dict[str, Any]:
        """A token response for ``grant``: a new access token and, when the client
        registered the refresh grant and ``refresh``, a new refresh token."""
        now = self._clock.now()
        lifetime = self._config.token_lifetime
        access = "emu-at-" + secrets.token_urlsafe(32)
        self.access[access] = AccessToken(grant, now + lifetime)
        self._counts.tokens_issued += 1
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(lifetime) if float(lifetime).is_integer() else lifetime,
            "scope": scope,
        }
        if refresh and "refresh_token" in client.grant_types:
            token = "emu-rt-" + secrets.token_urlsafe(32)
            horizon = self._config.refresh_token_lifetime
            self.refresh[token] = RefreshToken(
                grant, now + horizon if horizon is not None else None
            )
            answer["refresh_token"] = token
        return answer

    def revoke_grant(self, grant: Grant) -> None:
        """Revoke ``grant``: every token it gave stops working."""
        grant.revoked = True
        for record in self.refresh.values():
            if record.grant is grant and record.state == "active":
                record.state = "revoked"

    def check(self, token: str) -> Access | str:
        """What an access token gives: :class:`Access`, or why it is refused."""
        record = self.access.get(token)
        if record is None:
            return "invalid token"
        if record.revoked or record.grant.revoked:
            self._counts.rejected_tokens += 1
            return "token revoked"
        if self._clock.now() >= record.expires_at:
            self._counts.rejected_tokens += 1
            return "token expired"
        return Access(self._config.oauth_plan, QUOTA_SUBJECT)

    def revoke_refresh_tokens(self, client_id: str | None) -> int:
        """Revoke every live refresh token (of ``client_id``, else of every client)."""
        revoked = 0
        for record in self.refresh.values():
            if record.state == "active" and client_id in (None, record.grant.client_id):
                record.state = "revoked"
                revoked += 1
        return revoked

    def revoke_grants(self, client_id: str | None) -> int:
        """Revoke every grant (of ``client_id``, else of every client); how many."""
        every = [r.grant for r in self.access.values()]
        every += [r.grant for r in self.refresh.values()]
        grants = {
            id(grant): grant
            for grant in every
            if not grant.revoked and client_id in (None, grant.client_id)
        }
        for grant in grants.values():
            self.revoke_grant(grant)
        return len(grants)

    def expire_access_tokens(self, client_id: str | None) -> int:
        """Make every live access token (of ``client_id``, else of every client) expire now."""
        now = self._clock.now()
        expired = 0
        for record in self.access.values():
            if (
                record.expires_at > now
                and not record.revoked
                and client_id in (None, record.grant.client_id)
            ):
                record.expires_at = now
                expired += 1
        return expired
