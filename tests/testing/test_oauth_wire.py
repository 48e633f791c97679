"""The shapes of the emulator's OAuth exchange: the bearer challenge, parameters sent at
most once, redirects that keep their query, and PKCE S256 (RFC 7636's own example)."""

from __future__ import annotations

import pytest

from magisterium_async.testing.emulator.oauth._wire import (
    REALM,
    OAuthError,
    bearer_challenge,
    pkce_matches,
    repeated_parameter,
    single,
    valid_challenge,
    valid_verifier,
    with_query,
)

# RFC 7636 Appendix B.
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_the_challenge_names_the_realm_and_why_a_token_was_refused() -> None:
    assert bearer_challenge() == f'Bearer realm="{REALM}"'
    refused = bearer_challenge('token "expired"\r\n\\')
    assert refused == (
        f'Bearer realm="{REALM}", error="invalid_token", error_description="token expired"'
    )  # quotes, backslashes and control characters cannot break the header


def test_an_error_answer_is_the_rfc_6749_body() -> None:
    error = OAuthError("invalid_grant", "the code expired")
    assert (error.status, str(error)) == (400, "invalid_grant: the code expired")
    assert error.body() == {"error": "invalid_grant", "error_description": "the code expired"}


def test_a_parameter_is_read_once_and_an_empty_one_is_absent() -> None:
    params = {"code": ["abc"], "state": [""], "scope": ["a", "b"]}
    assert single(params, "code") == "abc"
    assert single(params, "state") is None
    assert single(params, "missing") is None
    with pytest.raises(OAuthError, match="parameter scope was sent more than once"):
        single(params, "scope")
    assert repeated_parameter(params) == "parameter scope was sent more than once"
    assert repeated_parameter({"code": ["abc"]}) is None


def test_a_redirect_keeps_the_query_it_had() -> None:
    assert with_query("http://127.0.0.1:5000/cb", {"code": "x y"}) == (
        "http://127.0.0.1:5000/cb?code=x+y"
    )
    assert with_query("http://localhost/cb?app=1", {"state": "s"}) == (
        "http://localhost/cb?app=1&state=s"
    )


def test_pkce_s256_with_the_rfcs_example() -> None:
    assert valid_verifier(VERIFIER) and valid_challenge(CHALLENGE)
    assert pkce_matches(VERIFIER, CHALLENGE)
    assert not pkce_matches(VERIFIER[:-1] + "h", CHALLENGE)
    assert not valid_verifier("short") and not valid_verifier(VERIFIER + "!")
    assert not valid_challenge(CHALLENGE + "=")
