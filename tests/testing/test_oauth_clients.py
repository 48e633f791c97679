"""Registering the emulator's OAuth clients: public clients only, loopback redirect URIs
matched on any port, known scopes; each refusal says what was wrong."""

from __future__ import annotations

from typing import Any

import pytest

from magisterium_async.testing.emulator.oauth._clients import (
    SCOPES,
    client_from_metadata,
    loopback_match,
    scope_problem,
    uri_problem,
)
from magisterium_async.testing.emulator.oauth._wire import OAuthError


def test_a_client_gets_an_id_and_the_defaults_of_rfc_7591() -> None:
    client = client_from_metadata({"redirect_uris": ["http://127.0.0.1/cb"], "scope": None})
    assert client.client_id.startswith("emu-client-")
    assert client.grant_types == ("authorization_code",)
    assert client.scope == " ".join(SCOPES)
    body = client.metadata()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_name" not in body
    other = client_from_metadata({"redirect_uris": ["http://127.0.0.1/cb"]})
    assert other.client_id != client.client_id


@pytest.mark.parametrize(
    ("metadata", "error", "message"),
    [
        ([], "invalid_client_metadata", "JSON object"),
        ({}, "invalid_redirect_uri", "non-empty list"),
        ({"redirect_uris": ["https://app.example/cb"]}, "invalid_redirect_uri", "loopback"),
        (
            {"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "basic"},
            "invalid_client_metadata",
            "only public clients",
        ),
        (
            {"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["client_credentials"]},
            "invalid_client_metadata",
            "unsupported grant_types",
        ),
        (
            {"redirect_uris": ["http://127.0.0.1/cb"], "scope": "a2a admin"},
            "invalid_client_metadata",
            "unknown scope 'admin'",
        ),
    ],
)
def test_bad_metadata_is_refused_with_its_error(metadata: Any, error: str, message: str) -> None:
    with pytest.raises(OAuthError, match=message) as caught:
        client_from_metadata(metadata)
    assert caught.value.error == error


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("http://127.0.0.1/cb", None),
        ("http://[::1]:8000/cb", None),
        ("http://localhost/cb", None),
        ("https://127.0.0.1/cb", "not a loopback redirect URI"),
        ("http://127.0.0.1/cb#frag", "has a fragment"),
        ("http://user@127.0.0.1/cb", "has user information"),
        ("http://127.0.0.1:99999/cb", "not a valid URI"),
        (42, "must be strings"),
    ],
)
def test_redirect_uris(uri: object, problem: str | None) -> None:
    found = uri_problem(uri)
    assert found is None if problem is None else problem in (found or "")


def test_a_loopback_uri_matches_on_any_port_but_nothing_else() -> None:
    registered = "http://127.0.0.1/callback"
    assert loopback_match(registered, "http://127.0.0.1:53124/callback")
    assert not loopback_match(registered, "http://127.0.0.1:53124/other")
    assert not loopback_match(registered, "http://localhost:53124/callback")
    assert not loopback_match(registered, "http://127.0.0.1:53124/callback#x")
    assert not loopback_match(registered, "http://127.0.0.1:bad/callback")


def test_scopes_outside_the_allowed_ones_are_named() -> None:
    assert scope_problem("a2a", SCOPES) is None
    assert scope_problem("", SCOPES) is None
    assert scope_problem("write a2a read", SCOPES) == "unknown scope 'read write'"
