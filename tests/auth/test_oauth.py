"""The OAuth protocol steps: PKCE, discovery checks, registration, error mapping."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import web

import magisterium_async as m
from magisterium_async._auth import _oauth
from tests.conftest import Reply, ScriptedServer
from tests.helpers.oauth_fake import FakeAuthServer, auth_server
from tests.helpers.raw_server import RawServer, chain

__all__ = ["auth_server"]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def test_pkce_s256_is_the_hash_of_the_verifier() -> None:
    pkce = _oauth.new_pkce()
    assert 43 <= len(pkce.verifier) <= 128
    assert set(pkce.verifier) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    )
    digest = hashlib.sha256(pkce.verifier.encode()).digest()
    assert pkce.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert _oauth.new_pkce().verifier != pkce.verifier
    assert pkce.verifier not in repr(pkce)


def test_the_authorization_url_carries_pkce_and_state() -> None:
    metadata = _oauth.ServerMetadata(
        issuer="https://as.example",
        authorization_endpoint="https://as.example/authorize?tenant=1",
        token_endpoint="https://as.example/token",
    )
    pkce = _oauth.new_pkce()
    url = _oauth.authorization_url(
        metadata,
        client_id="c1",
        redirect_uri="http://127.0.0.1:9/callback",
        pkce=pkce,
        state="s1",
    )
    query = parse_qs(urlsplit(url).query)
    assert query == {
        "tenant": ["1"],
        "response_type": ["code"],
        "client_id": ["c1"],
        "redirect_uri": ["http://127.0.0.1:9/callback"],
        "code_challenge": [pkce.challenge],
        "code_challenge_method": ["S256"],
        "state": ["s1"],
    }


def test_metadata_is_looked_up_at_the_origin() -> None:
    assert (
        _oauth.metadata_url("https://www.magisterium.com/api/v1/a2a")
        == "https://www.magisterium.com/.well-known/oauth-authorization-server"
    )


async def test_discovery_and_registration(
    auth_server: FakeAuthServer, session: aiohttp.ClientSession
) -> None:
    metadata = await _oauth.discover(session, auth_server.base_url)
    assert metadata.issuer == auth_server.origin
    assert metadata.revocation_endpoint == auth_server.origin + "/oauth/revoke"
    client_id = await _oauth.register_client(session, metadata, "http://127.0.0.1:1/callback")
    assert auth_server.clients[client_id] == ["http://127.0.0.1:1/callback"]


def _metadata(server: ScriptedServer, **changes: object) -> dict[str, object]:
    origin = server.url.rsplit("/api/", 1)[0]
    body: dict[str, object] = {
        "issuer": origin,
        "authorization_endpoint": origin + "/authorize",
        "token_endpoint": origin + "/token",
    }
    body.update(changes)
    return body


async def _serve_metadata(server: ScriptedServer, body: object, status: int = 200) -> None:
    from aiohttp import web

    async def metadata(request: web.Request) -> web.Response:
        return web.json_response(body, status=status)

    server.extra_routes["/.well-known/oauth-authorization-server"] = metadata


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"issuer": "https://evil.example"}, "names the issuer"),
        ({"token_endpoint": "http://evil.example/token"}, "token_endpoint"),
        ({"code_challenge_methods_supported": ["plain"]}, "PKCE S256"),
    ],
)
async def test_discovery_refuses_metadata_that_would_leak_tokens(
    server: ScriptedServer,
    session: aiohttp.ClientSession,
    changes: dict[str, object],
    message: str,
) -> None:
    await _serve_metadata(server, _metadata(server, **changes))
    with pytest.raises(m.OAuthError, match=message):
        await _oauth.discover(session, server.url)


async def test_no_authorization_server_is_a_clear_error(
    server: ScriptedServer, session: aiohttp.ClientSession
) -> None:
    await _serve_metadata(server, {"error": "nope"}, status=404)
    with pytest.raises(m.OAuthError, match=r"no OAuth authorization server.*HTTP 404"):
        await _oauth.discover(session, server.url)


async def test_an_unreachable_server_is_a_connection_error(
    session: aiohttp.ClientSession,
) -> None:
    with pytest.raises(m.APIConnectionError, match="discovery failed"):
        await _oauth.discover(session, "http://127.0.0.1:1/a2a")


async def test_a_broken_answer_is_a_connection_error_with_nothing_chained(
    session: aiohttp.ClientSession,
) -> None:
    # aiohttp's exceptions show the request in their repr: none may ride along in the
    # chain, whatever the task running the call (3.10's pure-Python ones included).
    async with RawServer(b"NOT-HTTP garbage\r\n\r\n") as url:
        with pytest.raises(m.APIConnectionError, match="discovery failed") as caught:
            await _oauth.discover(session, url)
    assert chain(caught.value) == [caught.value]


async def test_deeply_nested_metadata_is_refused_as_an_oauth_error(
    server: ScriptedServer, session: aiohttp.ClientSession
) -> None:
    async def metadata(request: web.Request) -> web.StreamResponse:
        body = '{"issuer": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
        return web.Response(text=body, content_type="application/json")

    server.extra_routes["/.well-known/oauth-authorization-server"] = metadata
    with pytest.raises(m.OAuthError):
        await _oauth.discover(session, server.url)


async def test_a_refused_refresh_names_the_oauth_error_never_the_token(
    auth_server: FakeAuthServer, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(m.OAuthError) as caught:
        await _oauth.refresh(
            session,
            auth_server.origin + "/oauth/token",
            client_id="c1",
            refresh_token="rt-secret-value",
        )
    assert caught.value.error == "invalid_grant" and caught.value.status_code == 400
    assert "invalid_grant" in str(caught.value)
    assert "rt-secret-value" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__ is False


async def test_a_token_response_without_a_token_is_refused(
    server: ScriptedServer, session: aiohttp.ClientSession
) -> None:
    server.reply(Reply(body={"token_type": "Bearer", "refresh_token": "rt-leak"}))
    with pytest.raises(m.OAuthError, match="not a token response") as caught:
        await _oauth.refresh(session, server.url, client_id="c1", refresh_token="rt-1")
    assert "rt-leak" not in str(caught.value)
