"""The emulator's ledger of live tokens: what it issues, what an access token gives, and
revoking and expiring tokens by grant and by client."""

from __future__ import annotations

from magisterium_async.testing import EmulatorConfig
from magisterium_async.testing.emulator.oauth._clients import client_from_metadata
from magisterium_async.testing.emulator.oauth._records import Access, Grant, OAuthCounts
from magisterium_async.testing.emulator.oauth._tokens import TokenLedger

from ..conftest import JumpClock


def _ledger(**config: object) -> tuple[TokenLedger, OAuthCounts, JumpClock]:
    clock, counts = JumpClock(), OAuthCounts()
    settings = EmulatorConfig(clock=clock, token_lifetime=60.0, **config)
    return TokenLedger(settings, counts), counts, clock


def _issue(ledger: TokenLedger, client_id: str, *, refresh: bool = True) -> dict[str, object]:
    grant_types = ("authorization_code", "refresh_token")
    metadata = {"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": list(grant_types)}
    client = client_from_metadata(metadata)
    return ledger.issue(client, Grant(client_id, "a2a"), "a2a", refresh=refresh)


def test_issued_tokens_are_bearer_tokens_an_access_check_accepts() -> None:
    ledger, counts, _ = _ledger()
    answer = _issue(ledger, "c1")
    assert answer["token_type"] == "Bearer" and answer["expires_in"] == 60
    assert answer["scope"] == "a2a" and "refresh_token" in answer
    assert isinstance(ledger.check(str(answer["access_token"])), Access)
    assert counts.tokens_issued == 1
    assert "refresh_token" not in _issue(ledger, "c1", refresh=False)


def test_an_access_check_names_why_a_token_is_refused() -> None:
    ledger, counts, clock = _ledger()
    assert ledger.check("nonsense") == "invalid token"
    expired = str(_issue(ledger, "c1")["access_token"])
    clock.time += 60
    assert ledger.check(expired) == "token expired"
    revoked = _issue(ledger, "c1")
    ledger.revoke_grant(ledger.refresh[str(revoked["refresh_token"])].grant)
    assert ledger.check(str(revoked["access_token"])) == "token revoked"
    assert counts.rejected_tokens == 2  # an unknown token is not counted as rejected


def test_revoking_by_client_leaves_other_clients_alone() -> None:
    ledger, _, _ = _ledger()
    mine, theirs = _issue(ledger, "c1"), _issue(ledger, "c2")
    assert ledger.revoke_refresh_tokens("c1") == 1
    assert ledger.refresh[str(mine["refresh_token"])].state == "revoked"
    assert ledger.refresh[str(theirs["refresh_token"])].state == "active"
    assert isinstance(ledger.check(str(mine["access_token"])), Access)  # until it expires
    assert ledger.revoke_grants("c2") == 1
    assert ledger.check(str(theirs["access_token"])) == "token revoked"
    assert ledger.revoke_grants(None) == 1  # c1's grant; c2's is revoked already


def test_expiring_access_tokens_counts_only_live_ones() -> None:
    ledger, _, _ = _ledger()
    first, second = _issue(ledger, "c1"), _issue(ledger, "c2")
    assert ledger.expire_access_tokens("c1") == 1
    assert ledger.check(str(first["access_token"])) == "token expired"
    assert ledger.expire_access_tokens(None) == 1  # c1's is expired already
    assert ledger.check(str(second["access_token"])) == "token expired"
    assert ledger.refresh[str(first["refresh_token"])].state == "active"


def test_refresh_tokens_live_as_long_as_configured() -> None:
    ledger, _, clock = _ledger(refresh_token_lifetime=600.0)
    answer = _issue(ledger, "c1")
    assert ledger.refresh[str(answer["refresh_token"])].expires_at == clock.time + 600.0
