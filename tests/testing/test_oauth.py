"""The emulator's OAuth authorization server, over loopback HTTP with plain aiohttp."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from yarl import URL

from magisterium_async.testing import EmulatorConfig, Fault, RateLimitConfig

from ..conftest import JumpClock
from .conftest import StartWire
from .helpers import Wire, text

REDIRECT = "http://127.0.0.1/callback"
OMIT = object()


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def code_request(
    client_id: str, redirect_uri: str = REDIRECT, **change: object
) -> tuple[str, dict[str, str]]:
    """A PKCE verifier and a valid authorization request for it, with ``change`` applied
    (a value of ``OMIT`` leaves that parameter out)."""
    verifier, challenge = _pkce()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **change,
    }
    return verifier, {key: str(value) for key, value in params.items() if value is not OMIT}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class OAuth:
    """A hand-written public client of the emulator's authorization server."""

    http: aiohttp.ClientSession
    origin: str
    wire: Wire = None  # type: ignore[assignment]  # None only for the command-line test

    @classmethod
    def of(cls, wire: Wire) -> OAuth:
        return cls(wire.session, wire.emu.origin, wire)

    async def _reply(self, response: aiohttp.ClientResponse) -> Reply:
        raw = await response.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode()
        return Reply(response.status, dict(response.headers), body)

    async def register(self, **metadata: Any) -> Reply:
        body = {
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "client_name": "test",
            **metadata,
        }
        body = {key: value for key, value in body.items() if value is not OMIT}
        async with self.http.post(self.origin + "/oauth/register", json=body) as response:
            return await self._reply(response)

    async def client_id(self, **metadata: Any) -> str:
        reply = await self.register(**metadata)
        assert reply.status == 201, reply.body
        client_id: str = reply.body["client_id"]
        return client_id

    async def authorize(self, **params: str) -> Reply:
        async with self.http.get(
            self.origin + "/oauth/authorize", params=params, allow_redirects=False
        ) as response:
            return await self._reply(response)

    async def code(
        self, client_id: str, redirect_uri: str = REDIRECT, **extra: str
    ) -> tuple[str, str]:
        """A fresh authorization code and its PKCE verifier."""
        verifier, params = code_request(client_id, redirect_uri, state="xyz", **extra)
        reply = await self.authorize(**params)
        assert reply.status == 302, reply.body
        query = parse_qs(urlsplit(reply.headers["Location"]).query)
        return query["code"][0], verifier

    async def token(self, form: dict[str, str], headers: dict[str, str] | None = None) -> Reply:
        async with self.http.post(
            self.origin + "/oauth/token", data=form, headers=headers
        ) as response:
            return await self._reply(response)

    async def exchange(
        self, client_id: str, code: str, verifier: str, redirect_uri: str = REDIRECT
    ) -> Reply:
        return await self.token(
            {
                "grant_type": "authorization_code",
                "code": code,
                "code_verifier": verifier,
                "redirect_uri": redirect_uri,
                "client_id": client_id,
            }
        )

    async def sign_in(self, client_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """A client id and the token response of a whole sign-in."""
        client_id = client_id or await self.client_id()
        code, verifier = await self.code(client_id)
        reply = await self.exchange(client_id, code, verifier)
        assert reply.status == 200, reply.body
        return client_id, reply.body

    async def refresh(self, client_id: str, refresh_token: str) -> Reply:
        return await self.token(
            {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
        )

    async def revoke(self, form: dict[str, str]) -> Reply:
        async with self.http.post(self.origin + "/oauth/revoke", data=form) as response:
            return await self._reply(response)


@pytest.fixture
async def oauth(start_wire: StartWire, clock: JumpClock) -> OAuth:
    return OAuth.of(await start_wire(clock=clock, token_lifetime=600))


async def _search(wire: Wire, token: str | None) -> Any:
    return await wire.send("document_search", text("grace"), token=token)


# -- metadata ----------------------------------------------------------------------------


async def test_metadata_names_every_endpoint_at_the_emulators_origin(oauth: OAuth) -> None:
    emu = oauth.wire.emu
    async with oauth.http.get(emu.oauth_metadata_url) as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        meta = await response.json()

    assert emu.oauth_metadata_url == emu.origin + "/.well-known/oauth-authorization-server"
    assert meta["issuer"] == emu.origin == emu.issuer
    assert meta["authorization_endpoint"] == emu.origin + "/oauth/authorize"
    assert meta["token_endpoint"] == emu.origin + "/oauth/token"
    assert meta["registration_endpoint"] == emu.origin + "/oauth/register"
    assert meta["revocation_endpoint"] == emu.origin + "/oauth/revoke"
    assert meta["response_types_supported"] == ["code"]
    assert meta["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["token_endpoint_auth_methods_supported"] == ["none"]
    assert meta["revocation_endpoint_auth_methods_supported"] == ["none"]


# -- registration ------------------------------------------------------------------------


async def test_registration_answers_201_with_a_client_id_and_the_metadata(oauth: OAuth) -> None:
    reply = await oauth.register()

    assert reply.status == 201
    assert reply.headers["Cache-Control"] == "no-store"
    body = reply.body
    assert body["client_id"]
    assert isinstance(body["client_id_issued_at"], int)
    assert body["redirect_uris"] == [REDIRECT]
    assert body["token_endpoint_auth_method"] == "none"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"]
    assert body["client_name"] == "test"
    assert "client_secret" not in body
    assert [c.client_id for c in oauth.wire.emu.oauth.clients] == [body["client_id"]]
    assert oauth.wire.emu.stats.oauth.registrations == 1


@pytest.mark.parametrize(
    "uri", ["http://127.0.0.1:8000/cb", "http://[::1]/cb", "http://localhost:1234/"]
)
async def test_registration_takes_every_loopback_redirect(oauth: OAuth, uri: str) -> None:
    reply = await oauth.register(redirect_uris=[uri])

    assert reply.status == 201, reply.body
    assert reply.body["redirect_uris"] == [uri]


async def test_an_omitted_auth_method_registers_a_public_client(oauth: OAuth) -> None:
    omitted = await oauth.register(token_endpoint_auth_method=OMIT, grant_types=OMIT)
    null = await oauth.register(token_endpoint_auth_method=None)

    assert omitted.status == null.status == 201
    assert omitted.body["token_endpoint_auth_method"] == "none"
    assert omitted.body["grant_types"] == ["authorization_code"]
    assert null.body["token_endpoint_auth_method"] == "none"


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": ["https://app.example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://192.168.1.5/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://127.0.0.1/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": "http://127.0.0.1/cb"}, "invalid_redirect_uri"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"),
        ({"grant_types": ["authorization_code", "password"]}, "invalid_client_metadata"),
        ({"grant_types": ["refresh_token"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"scope": "admin"}, "invalid_client_metadata"),
    ],
)
async def test_bad_client_metadata_is_refused_with_the_rfc_7591_error(
    oauth: OAuth, metadata: dict[str, Any], error: str
) -> None:
    reply = await oauth.register(**metadata)

    assert reply.status == 400
    assert reply.body["error"] == error
    assert reply.body["error_description"]
    assert oauth.wire.emu.oauth.clients == []


async def test_registration_needs_a_json_object(oauth: OAuth) -> None:
    url = oauth.origin + "/oauth/register"
    async with oauth.http.post(url, data=b"redirect_uris=x") as response:
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_client_metadata"
    async with oauth.http.post(url, json=["not", "an", "object"]) as response:
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_client_metadata"


# -- authorization endpoint --------------------------------------------------------------


async def test_authorize_redirects_back_with_a_code_the_state_and_the_issuer(
    oauth: OAuth,
) -> None:
    client_id = await oauth.client_id()
    _, params = code_request(client_id, state="s/t a+te", scope="a2a")
    reply = await oauth.authorize(**params)

    assert reply.status == 302
    location = urlsplit(reply.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    query = parse_qs(location.query)
    assert query["state"] == ["s/t a+te"]
    assert query["iss"] == [oauth.origin]
    assert len(query["code"][0]) >= 32
    assert "error" not in query
    assert oauth.wire.emu.stats.oauth.authorizations == 1


@pytest.mark.parametrize("port", [1, 49152, 65535])
async def test_a_loopback_redirect_matches_on_any_port(oauth: OAuth, port: int) -> None:
    client_id = await oauth.client_id(redirect_uris=["http://127.0.0.1/callback"])
    sent = f"http://127.0.0.1:{port}/callback"
    code, verifier = await oauth.code(client_id, redirect_uri=sent)

    reply = await oauth.exchange(client_id, code, verifier, redirect_uri=sent)
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(
    "sent",
    [
        "http://127.0.0.1:5000/other",  # another path
        "http://localhost:5000/callback",  # another host
        "http://evil.example/callback",
        "https://127.0.0.1:5000/callback",  # another scheme
        "http://127.0.0.1:5000/callback?extra=1",
    ],
)
async def test_an_unregistered_redirect_gets_an_error_page_not_a_redirect(
    oauth: OAuth, sent: str
) -> None:
    client_id = await oauth.client_id()
    _, params = code_request(client_id, sent)
    reply = await oauth.authorize(**params)

    assert reply.status == 400
    assert "Location" not in reply.headers
    assert reply.headers["Content-Type"].startswith("text/html")
    assert "redirect_uri" in reply.body


async def test_an_unknown_client_gets_an_error_page(oauth: OAuth) -> None:
    _, params = code_request("nobody")
    reply = await oauth.authorize(**params)

    assert reply.status == 400
    assert "Location" not in reply.headers
    assert "unknown client_id" in reply.body


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge_method": OMIT}, "invalid_request"),
        ({"code_challenge": OMIT}, "invalid_request"),
        ({"code_challenge": "too-short"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"response_type": OMIT}, "invalid_request"),
        ({"scope": "a2a admin"}, "invalid_scope"),
    ],
)
async def test_a_bad_request_with_a_good_redirect_is_redirected_with_the_error(
    oauth: OAuth, change: dict[str, object], error: str
) -> None:
    client_id = await oauth.client_id()
    _, params = code_request(client_id, state="keep-me", **change)
    reply = await oauth.authorize(**params)

    assert reply.status == 302
    query = parse_qs(urlsplit(reply.headers["Location"]).query)
    assert query["error"] == [error]
    assert query["error_description"][0]
    assert query["state"] == ["keep-me"]
    assert "code" not in query
    assert oauth.wire.emu.stats.oauth.authorizations == 0


# -- token endpoint: authorization code --------------------------------------------------


async def test_a_code_exchange_gives_bearer_tokens_the_a2a_endpoint_accepts(
    oauth: OAuth,
) -> None:
    client_id = await oauth.client_id()
    code, verifier = await oauth.code(client_id)
    reply = await oauth.exchange(client_id, code, verifier)

    assert reply.status == 200
    assert reply.headers["Cache-Control"] == "no-store"
    assert reply.headers["Pragma"] == "no-cache"
    tokens = reply.body
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 600
    assert tokens["scope"] == "a2a"
    assert tokens["refresh_token"] != tokens["access_token"]
    answer = await _search(oauth.wire, tokens["access_token"])
    assert answer.status == 200
    assert answer.result["status"]["state"] == "completed"
    assert oauth.wire.emu.stats.oauth.tokens_issued == 1


async def test_a_wrong_verifier_is_invalid_grant(oauth: OAuth) -> None:
    client_id = await oauth.client_id()
    code, _ = await oauth.code(client_id)
    other, _ = _pkce()

    reply = await oauth.exchange(client_id, code, other)

    assert reply.status == 400
    assert reply.body["error"] == "invalid_grant"
    assert "code_verifier" in reply.body["error_description"]
    assert oauth.wire.emu.stats.oauth.invalid_grants == 1
    assert oauth.wire.emu.stats.oauth.tokens_issued == 0


async def test_a_code_works_once_and_its_reuse_revokes_what_it_gave(oauth: OAuth) -> None:
    client_id = await oauth.client_id()
    code, verifier = await oauth.code(client_id)
    first = await oauth.exchange(client_id, code, verifier)
    assert first.status == 200

    again = await oauth.exchange(client_id, code, verifier)

    assert again.status == 400
    assert again.body["error"] == "invalid_grant"
    assert (await _search(oauth.wire, first.body["access_token"])).status == 401
    refreshed = await oauth.refresh(client_id, first.body["refresh_token"])
    assert refreshed.body["error"] == "invalid_grant"


async def test_a_code_expires_after_a_minute_on_the_emulators_clock(
    oauth: OAuth, clock: JumpClock
) -> None:
    client_id = await oauth.client_id()
    code, verifier = await oauth.code(client_id)
    clock.time += 60

    reply = await oauth.exchange(client_id, code, verifier)

    assert reply.body == {
        "error": "invalid_grant",
        "error_description": reply.body["error_description"],
    }
    assert "expired" in reply.body["error_description"]


async def test_the_code_is_bound_to_its_client_and_redirect_uri(oauth: OAuth) -> None:
    client_id = await oauth.client_id()
    other_client = await oauth.client_id()
    code, verifier = await oauth.code(client_id, redirect_uri="http://127.0.0.1:4000/callback")

    wrong_port = await oauth.exchange(
        client_id, code, verifier, redirect_uri="http://127.0.0.1:4001/callback"
    )
    wrong_client = await oauth.exchange(
        other_client, code, verifier, redirect_uri="http://127.0.0.1:4000/callback"
    )

    assert wrong_port.body["error"] == "invalid_grant"
    assert wrong_client.body["error"] == "invalid_grant"
    right = await oauth.exchange(
        client_id, code, verifier, redirect_uri="http://127.0.0.1:4000/callback"
    )
    assert right.status == 200


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({"grant_type": "password", "client_id": "x"}, "unsupported_grant_type"),
        ({"client_id": "x"}, "invalid_request"),
        (
            {"grant_type": "authorization_code", "code": "c", "code_verifier": "v" * 43},
            "invalid_request",
        ),
        (
            {"grant_type": "authorization_code", "client_id": "nobody", "code": "c"},
            "invalid_client",
        ),
    ],
)
async def test_malformed_token_requests_get_rfc_6749_errors(
    oauth: OAuth, form: dict[str, str], error: str
) -> None:
    reply = await oauth.token(form)

    assert reply.status == 400
    assert reply.body["error"] == error
    assert reply.headers["Cache-Control"] == "no-store"


async def test_the_token_endpoint_wants_a_form_and_no_client_secret(oauth: OAuth) -> None:
    client_id, _ = await oauth.sign_in()
    url = oauth.origin + "/oauth/token"
    async with oauth.http.post(url, json={"grant_type": "refresh_token"}) as response:
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_request"

    reply = await oauth.token(
        {"grant_type": "refresh_token", "refresh_token": "x", "client_id": client_id},
        headers={"Authorization": "Basic " + base64.b64encode(b"a:b").decode()},
    )

    assert reply.status == 401
    assert reply.body["error"] == "invalid_client"
    assert reply.headers["WWW-Authenticate"].startswith("Basic realm=")


# -- refresh with rotation ---------------------------------------------------------------


async def test_refresh_rotates_and_the_old_refresh_token_is_invalid_grant(
    oauth: OAuth,
) -> None:
    client_id, first = await oauth.sign_in()

    second = await oauth.refresh(client_id, first["refresh_token"])
    assert second.status == 200
    assert second.headers["Cache-Control"] == "no-store"
    assert second.body["refresh_token"] not in (first["refresh_token"], None)
    assert second.body["access_token"] != first["access_token"]
    assert second.body["token_type"] == "Bearer"
    assert second.body["expires_in"] == 600

    reused = await oauth.refresh(client_id, first["refresh_token"])
    assert reused.status == 400
    assert reused.body["error"] == "invalid_grant"

    counts = oauth.wire.emu.stats.oauth
    assert (counts.tokens_issued, counts.refreshes, counts.invalid_grants) == (2, 1, 1)
    assert counts.refresh_reuses == 1


async def test_reusing_a_rotated_refresh_token_revokes_the_whole_sign_in(oauth: OAuth) -> None:
    client_id, first = await oauth.sign_in()
    second = (await oauth.refresh(client_id, first["refresh_token"])).body

    await oauth.refresh(client_id, first["refresh_token"])

    assert (await oauth.refresh(client_id, second["refresh_token"])).body["error"] == (
        "invalid_grant"
    )
    assert (await _search(oauth.wire, second["access_token"])).status == 401


async def test_a_chain_of_refreshes_keeps_working(oauth: OAuth) -> None:
    client_id, tokens = await oauth.sign_in()
    for _ in range(5):
        reply = await oauth.refresh(client_id, tokens["refresh_token"])
        assert reply.status == 200, reply.body
        tokens = reply.body
        assert (await _search(oauth.wire, tokens["access_token"])).status == 200
    assert oauth.wire.emu.stats.oauth.refreshes == 5


async def test_a_refresh_token_belongs_to_its_client(oauth: OAuth) -> None:
    _, tokens = await oauth.sign_in()
    other = await oauth.client_id()

    reply = await oauth.refresh(other, tokens["refresh_token"])

    assert reply.body["error"] == "invalid_grant"


async def test_a_refresh_cannot_widen_the_scope(oauth: OAuth) -> None:
    client_id, tokens = await oauth.sign_in()
    reply = await oauth.token(
        {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client_id,
            "scope": "a2a admin",
        }
    )
    assert reply.body["error"] == "invalid_scope"
    assert (await oauth.refresh(client_id, tokens["refresh_token"])).status == 200


async def test_a_client_without_the_refresh_grant_gets_no_refresh_token(oauth: OAuth) -> None:
    client_id = await oauth.client_id(grant_types=["authorization_code"])
    _, tokens = await oauth.sign_in(client_id)

    assert "refresh_token" not in tokens
    reply = await oauth.refresh(client_id, "anything")
    assert reply.body["error"] == "unauthorized_client"


async def test_refresh_tokens_can_expire(start_wire: StartWire, clock: JumpClock) -> None:
    oauth = OAuth.of(await start_wire(clock=clock, token_lifetime=10, refresh_token_lifetime=100))
    client_id, tokens = await oauth.sign_in()
    clock.time += 100

    reply = await oauth.refresh(client_id, tokens["refresh_token"])

    assert reply.body["error"] == "invalid_grant"
    assert "expired" in reply.body["error_description"]


# -- revocation --------------------------------------------------------------------------


async def test_revoking_a_refresh_token_ends_the_sign_in(oauth: OAuth) -> None:
    client_id, tokens = await oauth.sign_in()

    reply = await oauth.revoke(
        {
            "token": tokens["refresh_token"],
            "token_type_hint": "refresh_token",
            "client_id": client_id,
        }
    )

    assert reply.status == 200
    assert (await oauth.refresh(client_id, tokens["refresh_token"])).body["error"] == (
        "invalid_grant"
    )
    answer = await _search(oauth.wire, tokens["access_token"])
    assert answer.status == 401
    assert answer.error["data"]["detail"] == "token revoked"
    assert oauth.wire.emu.stats.oauth.revocations == 1


async def test_revoking_an_access_token_leaves_the_refresh_token(oauth: OAuth) -> None:
    client_id, tokens = await oauth.sign_in()

    reply = await oauth.revoke({"token": tokens["access_token"]})

    assert reply.status == 200
    assert (await _search(oauth.wire, tokens["access_token"])).status == 401
    assert (await oauth.refresh(client_id, tokens["refresh_token"])).status == 200


async def test_revoking_an_unknown_token_succeeds_and_no_token_is_invalid_request(
    oauth: OAuth,
) -> None:
    assert (await oauth.revoke({"token": "never-issued"})).status == 200
    missing = await oauth.revoke({"token_type_hint": "access_token"})
    assert missing.status == 400
    assert missing.body["error"] == "invalid_request"


# -- the A2A endpoint and its 401s -------------------------------------------------------


async def test_an_expired_token_is_401_minus_32004_with_an_invalid_token_challenge(
    oauth: OAuth, clock: JumpClock
) -> None:
    client_id, tokens = await oauth.sign_in()
    clock.time += 599
    assert (await _search(oauth.wire, tokens["access_token"])).status == 200
    clock.time += 1

    answer = await _search(oauth.wire, tokens["access_token"])

    assert answer.status == 401
    assert answer.error["code"] == -32004
    assert answer.error["data"]["detail"] == "token expired"
    challenge = answer.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="magisterium-emulator", error="invalid_token"')
    assert 'error_description="' in challenge
    assert tokens["access_token"] not in challenge
    assert oauth.wire.emu.stats.oauth.rejected_tokens == 1
    assert oauth.wire.emu.stats.count(outcome="unauthorized") == 1

    fresh = await oauth.refresh(client_id, tokens["refresh_token"])
    assert (await _search(oauth.wire, fresh.body["access_token"])).status == 200


async def test_the_fixed_token_keeps_working_beside_oauth(oauth: OAuth, clock: JumpClock) -> None:
    await oauth.sign_in()
    clock.time += 10_000
    oauth.wire.emu.oauth.revoke_tokens()

    answer = await _search(oauth.wire, oauth.wire.emu.token)

    assert answer.status == 200
    assert oauth.wire.emu.token == "emu-token"


async def test_a_request_without_a_token_gets_a_challenge_without_an_error(
    oauth: OAuth,
) -> None:
    answer = await _search(oauth.wire, None)

    assert answer.status == 401
    assert answer.error["code"] == -32004
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="magisterium-emulator"'


async def test_an_unknown_token_gets_an_invalid_token_challenge(oauth: OAuth) -> None:
    answer = await _search(oauth.wire, "made-up")

    assert answer.status == 401
    assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]


@pytest.mark.parametrize(
    "fault", [Fault.jsonrpc_error(-32004, "Unauthorized"), Fault.http_error(401)]
)
async def test_injected_401s_carry_a_challenge_too(oauth: OAuth, fault: Fault) -> None:
    oauth.wire.emu.script(fault)

    answer = await _search(oauth.wire, oauth.wire.emu.token)

    assert answer.status == 401
    assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]


async def test_oauth_tokens_are_served_with_the_configured_plan(start_wire: StartWire) -> None:
    oauth = OAuth.of(await start_wire(oauth_plan="free"))
    _, tokens = await oauth.sign_in()

    answer = await _search(oauth.wire, tokens["access_token"])

    assert answer.status == 403
    assert answer.error["code"] == -32005


async def test_every_oauth_token_of_the_user_shares_one_quota(start_wire: StartWire) -> None:
    config = EmulatorConfig(rate_limits=RateLimitConfig(2, 1))
    oauth = OAuth.of(await start_wire(config))
    client_id, first = await oauth.sign_in()
    second = (await oauth.refresh(client_id, first["refresh_token"])).body

    statuses = [
        (await _search(oauth.wire, token)).status
        for token in (first["access_token"], second["access_token"], second["access_token"])
    ]

    assert statuses == [200, 200, 429]
    assert (await _search(oauth.wire, oauth.wire.emu.token)).status == 200


# -- reaching in from a test -------------------------------------------------------------


async def test_expire_access_tokens_makes_the_next_call_meet_an_expired_token(
    oauth: OAuth,
) -> None:
    client_id, tokens = await oauth.sign_in()

    assert oauth.wire.emu.oauth.expire_access_tokens() == 1

    answer = await _search(oauth.wire, tokens["access_token"])
    assert answer.error["data"]["detail"] == "token expired"
    assert (await oauth.refresh(client_id, tokens["refresh_token"])).status == 200
    assert oauth.wire.emu.oauth.expire_access_tokens(client_id="someone-else") == 0


async def test_revoke_refresh_tokens_leaves_access_tokens_until_they_expire(
    oauth: OAuth,
) -> None:
    client_id, tokens = await oauth.sign_in()
    other_id, other = await oauth.sign_in()

    assert oauth.wire.emu.oauth.revoke_refresh_tokens(client_id) == 1

    assert (await oauth.refresh(client_id, tokens["refresh_token"])).body["error"] == (
        "invalid_grant"
    )
    assert (await _search(oauth.wire, tokens["access_token"])).status == 200
    assert (await oauth.refresh(other_id, other["refresh_token"])).status == 200


async def test_issue_gives_tokens_without_the_browser(oauth: OAuth) -> None:
    emu = oauth.wire.emu
    tokens = emu.oauth.issue()
    [client] = emu.oauth.clients

    assert (await _search(oauth.wire, tokens["access_token"])).status == 200
    assert (await oauth.refresh(client.client_id, tokens["refresh_token"])).status == 200
    assert emu.stats.oauth.tokens_issued == 2
    assert emu.oauth.revoke_tokens() == 1


async def test_reset_stats_forgets_the_oauth_counters(oauth: OAuth) -> None:
    await oauth.sign_in()
    oauth.wire.emu.reset_stats()

    assert oauth.wire.emu.stats.oauth.tokens_issued == 0
    assert oauth.wire.emu.stats.oauth.registrations == 0


def test_no_token_in_the_servers_repr() -> None:
    from magisterium_async.testing import OAuthServer

    server = OAuthServer(EmulatorConfig())
    tokens = server.issue()
    shown = repr(server) + repr(server.clients) + repr(server.counts)

    assert tokens["access_token"] not in shown
    assert tokens["refresh_token"] not in shown


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"token_lifetime": 0}, "token_lifetime"),
        ({"token_lifetime": float("inf")}, "token_lifetime"),
        ({"refresh_token_lifetime": -1}, "refresh_token_lifetime"),
        ({"oauth_plan": "gold"}, "oauth_plan"),
    ],
)
def test_oauth_config_is_checked(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EmulatorConfig(**fields)


async def test_the_emulator_command_takes_a_token_lifetime(http: aiohttp.ClientSession) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "magisterium_async",
        "emulator",
        "--port",
        "0",
        "--json",
        "--token-lifetime",
        "7",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = json.loads(await process.stdout.readline())
        origin = str(URL(line["base_url"]).origin())
        oauth = OAuth(http, origin)
        client_id = await oauth.client_id()
        code, verifier = await oauth.code(client_id)
        reply = await oauth.exchange(client_id, code, verifier)
    finally:
        process.terminate()
        assert await process.wait() == 0
    assert reply.body["expires_in"] == 7


async def test_a_declined_consent_redirects_with_access_denied(oauth: OAuth) -> None:
    client_id = await oauth.client_id()
    oauth.wire.emu.oauth.deny_consent()
    _, params = code_request(client_id, state="s1")

    declined = await oauth.authorize(**params)
    granted = await oauth.authorize(**params)

    query = parse_qs(urlsplit(declined.headers["Location"]).query)
    assert query["error"] == ["access_denied"]
    assert query["state"] == ["s1"]
    assert "code" in parse_qs(urlsplit(granted.headers["Location"]).query)


# -- faults at the OAuth endpoints -------------------------------------------------------


async def test_a_scripted_503_hits_the_token_endpoint_once(oauth: OAuth) -> None:
    client_id, tokens = await oauth.sign_in()
    emu = oauth.wire.emu
    emu.script(Fault.http_503(retry_after=2), method="oauth/token")

    failed = await oauth.refresh(client_id, tokens["refresh_token"])
    retried = await oauth.refresh(client_id, tokens["refresh_token"])

    assert failed.status == 503
    assert failed.headers["Retry-After"] == "2"
    assert retried.status == 200
    assert emu.stats.oauth.faults == 1
    assert emu.stats.oauth.refreshes == 1


async def test_a_lost_refresh_answer_then_a_retry_is_a_reuse(oauth: OAuth) -> None:
    """The hazard of rotation: the refresh took effect, its answer never arrived."""
    client_id, tokens = await oauth.sign_in()
    emu = oauth.wire.emu
    emu.script(Fault.drop(processed=True), method="oauth/token")

    with pytest.raises(aiohttp.ClientError):
        await oauth.refresh(client_id, tokens["refresh_token"])
    retry = await oauth.refresh(client_id, tokens["refresh_token"])

    assert retry.body["error"] == "invalid_grant"
    assert emu.stats.oauth.refresh_reuses == 1


async def test_oauth_faults_leave_a2a_requests_alone(oauth: OAuth) -> None:
    emu = oauth.wire.emu
    emu.script(Fault.http_502(), method="oauth/token")

    assert (await _search(oauth.wire, emu.token)).status == 200
    assert emu.pending_faults == 1
    client_id = await oauth.client_id()
    code, verifier = await oauth.code(client_id)
    assert (await oauth.exchange(client_id, code, verifier)).status == 502
    assert emu.pending_faults == 0


async def test_a_malformed_token_answer(oauth: OAuth) -> None:
    client_id = await oauth.client_id()
    code, verifier = await oauth.code(client_id)
    oauth.wire.emu.script(Fault.malformed(), method="oauth/token")

    reply = await oauth.exchange(client_id, code, verifier)

    assert reply.status == 200
    assert isinstance(reply.body, str)  # not JSON


def test_faults_an_oauth_endpoint_cannot_meet_are_refused() -> None:
    from magisterium_async.testing import Emulator

    emu = Emulator()
    with pytest.raises(ValueError, match="cannot happen"):
        emu.script(Fault.rate_limit(), method="oauth/token")
    with pytest.raises(ValueError, match="no OAuth endpoint"):
        emu.script(Fault.http_502(), method="oauth/tokens")
    assert emu.pending_faults == 0


async def test_concurrent_refreshes_with_one_token_let_exactly_one_through(
    oauth: OAuth,
) -> None:
    client_id, tokens = await oauth.sign_in()

    replies = await asyncio.gather(
        *(oauth.refresh(client_id, tokens["refresh_token"]) for _ in range(4))
    )

    assert sorted(reply.status for reply in replies) == [200, 400, 400, 400]
    [winner] = [reply.body for reply in replies if reply.status == 200]
    # the losers reused a spent token, which signs the winner out too
    assert (await oauth.refresh(client_id, winner["refresh_token"])).status == 400
    assert oauth.wire.emu.stats.oauth.refresh_reuses == 3


async def test_a_client_cannot_revoke_another_clients_token(oauth: OAuth) -> None:
    owner, tokens = await oauth.sign_in()
    intruder = await oauth.client_id()

    refused = await oauth.revoke({"token": tokens["refresh_token"], "client_id": intruder})

    assert refused.status == 400
    assert refused.body["error"] == "unauthorized_client"
    assert (await oauth.refresh(owner, tokens["refresh_token"])).status == 200


async def test_revocation_wants_a_form(oauth: OAuth) -> None:
    async with oauth.http.post(oauth.origin + "/oauth/revoke", json={"token": "x"}) as response:
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_request"


async def test_tasks_get_with_an_expired_token_is_refused_too(
    oauth: OAuth, clock: JumpClock
) -> None:
    _, tokens = await oauth.sign_in()
    sent = await _search(oauth.wire, tokens["access_token"])
    clock.time += 600

    answer = await oauth.wire.call(
        "tasks/get", {"id": sent.result["id"]}, token=tokens["access_token"]
    )

    assert answer.status == 401
    assert answer.error["code"] == -32004
    assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]


async def test_without_rotation_the_refresh_token_stays_and_is_left_out(
    start_wire: StartWire,
) -> None:
    oauth = OAuth.of(await start_wire(rotate_refresh_tokens=False))
    client_id, tokens = await oauth.sign_in()

    first = await oauth.refresh(client_id, tokens["refresh_token"])
    second = await oauth.refresh(client_id, tokens["refresh_token"])

    assert first.status == second.status == 200
    assert "refresh_token" not in first.body
    assert first.body["access_token"] != second.body["access_token"]
    assert oauth.wire.emu.stats.oauth.invalid_grants == 0


async def test_a_server_without_revocation_does_not_name_it(start_wire: StartWire) -> None:
    oauth = OAuth.of(await start_wire(offer_revocation=False))
    async with oauth.http.get(oauth.wire.emu.oauth_metadata_url) as response:
        meta = await response.json()

    assert "revocation_endpoint" not in meta
    assert "revocation_endpoint_auth_methods_supported" not in meta
    assert (await oauth.revoke({"token": "x"})).status == 404


async def test_a_fractional_lifetime_is_sent_as_is_and_kept(
    start_wire: StartWire, clock: JumpClock
) -> None:
    oauth = OAuth.of(await start_wire(clock=clock, token_lifetime=2.5))
    _, tokens = await oauth.sign_in()
    assert tokens["expires_in"] == 2.5

    clock.time += 2.25
    assert (await _search(oauth.wire, tokens["access_token"])).status == 200
    clock.time += 0.25
    assert (await _search(oauth.wire, tokens["access_token"])).status == 401
