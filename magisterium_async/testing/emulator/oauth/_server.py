"""The emulator's OAuth 2.0 authorization server: clients, codes and tokens, no HTTP.

What it implements, and how strictly:

- RFC 7591 dynamic registration of public clients only (``token_endpoint_auth_method``
  ``"none"``; an omitted method is registered as ``"none"``), with loopback redirect URIs
  (``http://127.0.0.1``, ``http://[::1]`` or ``http://localhost``, RFC 8252 §7.3 and §8.3).
- The authorization-code grant (RFC 6749 §4.1) with PKCE S256 required (RFC 7636; no
  ``plain``); consent is automatic. A loopback redirect URI matches a registered one on any
  port. Codes live 60 s on the emulator's clock and are single-use: a second use is
  ``invalid_grant`` and revokes every token the first use gave (RFC 6749 §4.1.2).
- The refresh-token grant with rotation: each refresh returns a new refresh token and the
  old one is spent. Presenting a spent refresh token again is ``invalid_grant`` *and*
  revokes the whole grant, access tokens included (reuse detection, OAuth 2.0 Security
  BCP §4.14.2): a client that ever sends a rotated token twice is signed out, as a careful
  real server would do. There is no grace period. With ``rotate_refresh_tokens=False``
  the refresh token stays the same and refresh answers leave it out (RFC 6749 §6).
- RFC 7009 revocation, unless ``offer_revocation=False``: revoking a refresh token
  revokes its grant (every access and refresh token the authorization gave); revoking an
  access token revokes that token alone. Unknown tokens are answered as success.

Access tokens are opaque, live ``token_lifetime`` seconds on the emulator's clock and are
served with the plan ``oauth_plan``; every OAuth token is the same emulated user, so they
share one quota. Tokens are never logged, counted by value or shown in a ``repr``.

This module owns the server's state (the registry of clients, the live codes, the ledger
of tokens) and the grant rules above. The shapes of the exchange (errors, parameters,
PKCE) are in :mod:`._wire`, client registration in :mod:`._clients`, the
records and counters in :mod:`._records`, the live tokens (issued, checked,
revoked, expired) in :mod:`._tokens`, the HTTP endpoints in :mod:`._routes`.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from magisterium_async.testing.emulator._config import EmulatorConfig
from magisterium_async.testing.emulator.oauth._clients import (
    GRANT_TYPES,
    OAuthClient,
    client_from_metadata,
    loopback_match,
    scope_problem,
)
from magisterium_async.testing.emulator.oauth._records import (
    Access,
    Code,
    Grant,
    OAuthCounts,
)
from magisterium_async.testing.emulator.oauth._tokens import TokenLedger
from magisterium_async.testing.emulator.oauth._wire import (
    AuthorizationRedirect,
    OAuthError,
    pkce_matches,
    repeated_parameter,
    single,
    valid_challenge,
    valid_verifier,
    with_query,
)

__all__ = ["CODE_LIFETIME", "OAuthServer"]

CODE_LIFETIME = 60.0


class OAuthServer:
    """The authorization server's state: registered clients, codes, grants and tokens.

    Reached as ``emulator.oauth``. Besides serving the endpoints it lets a test reach in:
    :meth:`issue` tokens without the browser dance, :meth:`revoke_refresh_tokens` or
    :meth:`revoke_tokens` (a user signing the app out), and :meth:`expire_access_tokens`
    (the next A2A call meets an expired token). Safe to call from another thread.
    """

    def __init__(self, config: EmulatorConfig, counts: OAuthCounts | None = None) -> None:
        self.config = config
        self.counts = counts if counts is not None else OAuthCounts()
        self._clock = config.clock
        self._lock = threading.Lock()
        self._clients: dict[str, OAuthClient] = {}
        self._codes: dict[str, Code] = {}
        self._tokens = TokenLedger(config, self.counts)
        self._denials = 0

    def __repr__(self) -> str:
        return (
            f"<OAuthServer clients={len(self._clients)} access_tokens={len(self._tokens.access)} "
            f"refresh_tokens={len(self._tokens.refresh)}>"
        )

    @property
    def clients(self) -> list[OAuthClient]:
        """Every registered client, oldest first."""
        with self._lock:
            return list(self._clients.values())

    # -- registration (RFC 7591) --------------------------------------------------------

    def register(self, metadata: object) -> OAuthClient:
        """Register a public client from its metadata; raises :class:`OAuthError` with
        ``invalid_redirect_uri`` or ``invalid_client_metadata``. A ``null`` value counts as
        an omitted one."""
        client = client_from_metadata(metadata)
        with self._lock:
            self._clients[client.client_id] = client
            self.counts.registrations += 1
        return client

    # -- authorization endpoint (RFC 6749 §4.1.1, RFC 7636) ------------------------------

    def authorize(self, params: Mapping[str, Sequence[str]], issuer: str) -> AuthorizationRedirect:
        """Grant a code (consent is automatic) or refuse.

        Raises :class:`OAuthError` when the client or redirect URI cannot be trusted: the
        caller shows an error page then (RFC 6749 §4.1.2.1). Every other problem comes back
        as a redirect carrying ``error``.
        """
        client_id = single(params, "client_id")
        with self._lock:
            client = self._clients.get(client_id) if client_id is not None else None
        if client is None:
            what = "client_id is required" if client_id is None else "unknown client_id"
            raise OAuthError("invalid_request", what)
        sent_uri = single(params, "redirect_uri")
        if sent_uri is None:
            if len(client.redirect_uris) != 1:
                raise OAuthError(
                    "invalid_request", "redirect_uri is required: the client registered several"
                )
            target = client.redirect_uris[0]
        elif any(loopback_match(uri, sent_uri) for uri in client.redirect_uris):
            target = sent_uri
        else:
            raise OAuthError(
                "invalid_request", "redirect_uri does not match any registered redirect URI"
            )
        state = params.get("state", [""])[0]

        def redirect(answer: dict[str, str], error: str | None = None) -> AuthorizationRedirect:
            if state:
                answer["state"] = state
            answer["iss"] = issuer
            return AuthorizationRedirect(with_query(target, answer), error)

        def refuse(error: str, description: str) -> AuthorizationRedirect:
            return redirect({"error": error, "error_description": description}, error)

        duplicated = repeated_parameter(params)
        if duplicated:
            return refuse("invalid_request", duplicated)
        response_type = single(params, "response_type")
        if response_type is None:
            return refuse("invalid_request", "response_type is required")
        if response_type != "code":
            return refuse("unsupported_response_type", 'response_type must be "code"')
        challenge = single(params, "code_challenge")
        if challenge is None:
            return refuse("invalid_request", "code_challenge is required (PKCE, RFC 7636)")
        if single(params, "code_challenge_method") != "S256":
            return refuse("invalid_request", "code_challenge_method must be S256")
        if not valid_challenge(challenge):
            return refuse(
                "invalid_request",
                "code_challenge must be the 43-character base64url SHA-256 of the verifier",
            )
        scope = single(params, "scope") or client.scope
        problem = scope_problem(scope, client.scope.split())
        if problem is not None:
            return refuse("invalid_scope", problem)
        code = secrets.token_urlsafe(32)
        with self._lock:
            if self._denials:
                self._denials -= 1
                return refuse("access_denied", "the user declined to sign in")
            self._codes[code] = Code(
                Grant(client.client_id, scope),
                sent_uri,
                challenge,
                self._clock.now() + CODE_LIFETIME,
            )
            self.counts.authorizations += 1
        return redirect({"code": code})

    # -- token endpoint (RFC 6749 §4.1.3, §6) -------------------------------------------

    def token(self, form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """Answer a token request: the token response, or :class:`OAuthError`."""
        with self._lock:
            try:
                return self._token(form)
            except OAuthError as error:
                if error.error == "invalid_grant":
                    self.counts.invalid_grants += 1
                else:
                    self.counts.token_errors += 1
                raise

    def _token(self, form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        duplicated = repeated_parameter(form)
        if duplicated:
            raise OAuthError("invalid_request", duplicated)
        grant_type = single(form, "grant_type")
        if grant_type is None:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant_type not in GRANT_TYPES:
            raise OAuthError(
                "unsupported_grant_type", f"grant_type {grant_type!r} is not supported"
            )
        client_id = single(form, "client_id")
        if client_id is None:
            raise OAuthError("invalid_request", "client_id is required for public clients")
        client = self._clients.get(client_id)
        if client is None:
            raise OAuthError("invalid_client", "unknown client_id")
        if grant_type not in client.grant_types:
            raise OAuthError(
                "unauthorized_client", f"the client did not register the {grant_type} grant"
            )
        if grant_type == "authorization_code":
            return self._exchange(client, form)
        return self._rotate(client, form)

    def _exchange(self, client: OAuthClient, form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        code_value = single(form, "code")
        if code_value is None:
            raise OAuthError("invalid_request", "code is required")
        verifier = single(form, "code_verifier")
        if verifier is None:
            raise OAuthError("invalid_request", "code_verifier is required (PKCE, RFC 7636)")
        if not valid_verifier(verifier):
            raise OAuthError(
                "invalid_request",
                "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~",
            )
        code = self._codes.get(code_value)
        if code is None:
            raise OAuthError("invalid_grant", "unknown authorization code")
        if code.used:
            self._tokens.revoke_grant(code.grant)
            raise OAuthError(
                "invalid_grant",
                "the authorization code was already used; the tokens it gave are revoked",
            )
        if self._clock.now() >= code.expires_at:
            raise OAuthError("invalid_grant", "the authorization code expired")
        if code.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the authorization code was issued to another client")
        sent_uri = single(form, "redirect_uri")
        if code.redirect_uri is not None and sent_uri != code.redirect_uri:
            raise OAuthError(
                "invalid_grant",
                "redirect_uri must be identical to the one sent to the authorization endpoint",
            )
        registered = client.redirect_uris
        if code.redirect_uri is None and sent_uri is not None and sent_uri not in registered:
            raise OAuthError("invalid_grant", "redirect_uri does not match the registered one")
        if not pkce_matches(verifier, code.challenge):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        code.used = True
        return self._tokens.issue(client, code.grant, code.grant.scope)

    def _rotate(self, client: OAuthClient, form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        value = single(form, "refresh_token")
        if value is None:
            raise OAuthError("invalid_request", "refresh_token is required")
        record = self._tokens.refresh.get(value)
        if record is None:
            raise OAuthError("invalid_grant", "unknown refresh token")
        if record.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the refresh token was issued to another client")
        if record.state == "spent":
            self.counts.refresh_reuses += 1
            self._tokens.revoke_grant(record.grant)
            raise OAuthError(
                "invalid_grant",
                "the refresh token was already used (it rotates on every refresh); "
                "every token of this sign-in is revoked",
            )
        if record.state == "revoked" or record.grant.revoked:
            raise OAuthError("invalid_grant", "the refresh token was revoked")
        if record.expires_at is not None and self._clock.now() >= record.expires_at:
            raise OAuthError("invalid_grant", "the refresh token expired")
        scope = single(form, "scope") or record.grant.scope
        problem = scope_problem(scope, record.grant.scope.split())
        if problem is not None:
            raise OAuthError("invalid_scope", f"{problem}: a refresh cannot widen the grant")
        self.counts.refreshes += 1
        if not self.config.rotate_refresh_tokens:
            return self._tokens.issue(client, record.grant, scope, refresh=False)
        record.state = "spent"
        return self._tokens.issue(client, record.grant, scope)

    # -- revocation (RFC 7009) ----------------------------------------------------------

    def revoke(self, form: Mapping[str, Sequence[str]]) -> None:
        """Revoke the token in a revocation request; unknown tokens are not an error."""
        with self._lock:
            try:
                token = single(form, "token")
                if token is None:
                    raise OAuthError("invalid_request", "token is required")
                client_id = single(form, "client_id")
                if client_id is not None and client_id not in self._clients:
                    raise OAuthError("invalid_client", "unknown client_id")
                refresh = self._tokens.refresh.get(token)
                access = self._tokens.access.get(token)
                grant = refresh.grant if refresh is not None else access.grant if access else None
                if grant is not None and client_id is not None and grant.client_id != client_id:
                    raise OAuthError(
                        "unauthorized_client", "the token was issued to another client"
                    )
            except OAuthError:
                self.counts.token_errors += 1
                raise
            if refresh is not None:
                self._tokens.revoke_grant(refresh.grant)
            elif access is not None:
                access.revoked = True
            self.counts.revocations += 1

    # -- the resource server's check ----------------------------------------------------

    def check(self, token: str) -> Access | str:
        """What the A2A endpoint makes of an access token: :class:`Access`, or the reason
        it is refused (``"invalid token"``, ``"token expired"``, ``"token revoked"``)."""
        with self._lock:
            return self._tokens.check(token)

    # -- for tests ----------------------------------------------------------------------

    def register_client(
        self,
        redirect_uris: Sequence[str] = ("http://127.0.0.1/callback",),
        *,
        grant_types: Sequence[str] = ("authorization_code", "refresh_token"),
        client_name: str | None = None,
    ) -> OAuthClient:
        """Register a client without an HTTP request (same checks as the endpoint)."""
        return self.register(
            {
                "redirect_uris": list(redirect_uris),
                "grant_types": list(grant_types),
                "token_endpoint_auth_method": "none",
                **({"client_name": client_name} if client_name is not None else {}),
            }
        )

    def issue(self, client_id: str | None = None, *, scope: str | None = None) -> dict[str, Any]:
        """Tokens for a new sign-in, as the token endpoint would answer them, skipping the
        browser; registers a client first when ``client_id`` is ``None``."""
        client = self.register_client() if client_id is None else self._clients.get(client_id)
        if client is None:
            raise LookupError("unknown client_id")
        granted = scope if scope is not None else client.scope
        problem = scope_problem(granted, client.scope.split())
        if problem is not None:
            raise ValueError(problem)
        with self._lock:
            return self._tokens.issue(client, Grant(client.client_id, granted), granted)

    def deny_consent(self, times: int = 1) -> None:
        """The next ``times`` otherwise valid authorization requests are declined, as by a
        person clicking "Deny": a redirect with ``error=access_denied``."""
        if times < 0:
            raise ValueError("times must be >= 0")
        with self._lock:
            self._denials += times

    def revoke_refresh_tokens(self, client_id: str | None = None) -> int:
        """Revoke every live refresh token (of ``client_id``, else of every client); the
        access tokens keep working until they expire. Returns how many were revoked."""
        with self._lock:
            return self._tokens.revoke_refresh_tokens(client_id)

    def revoke_tokens(self, client_id: str | None = None) -> int:
        """Revoke every grant (of ``client_id``, else of every client): access and refresh
        tokens alike stop working. Returns how many grants were revoked."""
        with self._lock:
            return self._tokens.revoke_grants(client_id)

    def expire_access_tokens(self, client_id: str | None = None) -> int:
        """Make every live access token (of ``client_id``, else of every client) expired
        now; refresh tokens stay valid. Returns how many were expired."""
        with self._lock:
            return self._tokens.expire_access_tokens(client_id)
