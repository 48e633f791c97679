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
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

from ._config import EmulatorConfig, Plan

__all__ = [
    "CODE_LIFETIME",
    "QUOTA_SUBJECT",
    "REALM",
    "SCOPES",
    "Access",
    "AuthorizationRedirect",
    "OAuthClient",
    "OAuthCounts",
    "OAuthError",
    "OAuthServer",
    "bearer_challenge",
]

CODE_LIFETIME = 60.0
REALM = "magisterium-emulator"
SCOPES = ("a2a",)
QUOTA_SUBJECT = "oauth-user"

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
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


@dataclass(frozen=True, slots=True)
class Access:
    """An access token the A2A endpoint accepts: its plan, and the quota it draws on."""

    plan: Plan
    quota_key: str


@dataclass(slots=True)
class _Grant:
    client_id: str
    scope: str
    revoked: bool = False


@dataclass(slots=True)
class _Code:
    grant: _Grant
    redirect_uri: str | None
    challenge: str
    expires_at: float
    used: bool = False


@dataclass(slots=True)
class _AccessToken:
    grant: _Grant
    expires_at: float
    revoked: bool = False


@dataclass(slots=True)
class _RefreshToken:
    grant: _Grant
    expires_at: float | None
    state: Literal["active", "spent", "revoked"] = "active"


def _uri_problem(uri: object) -> str | None:
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


def _loopback_match(registered: str, sent: str) -> bool:
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


def _with_query(uri: str, params: Mapping[str, str]) -> str:
    parts = urlsplit(uri)
    query = urlencode(params)
    joined = f"{parts.query}&{query}" if parts.query else query
    return parts._replace(query=joined).geturl()


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _scope_problem(scope: str, allowed: Iterable[str]) -> str | None:
    unknown = sorted(set(scope.split()) - set(allowed))
    return f"unknown scope {' '.join(unknown)!r}" if unknown else None


def _sent_twice(name: str) -> str:
    return f"parameter {name} was sent more than once"


def _single(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    """One parameter's value; an empty value counts as absent (RFC 6749 §3.1)."""
    values = params.get(name, ())
    if len(values) > 1:
        raise OAuthError("invalid_request", _sent_twice(name))
    return values[0] if values and values[0] != "" else None


def _duplicated(params: Mapping[str, Sequence[str]]) -> str | None:
    """What is wrong when a parameter was sent more than once (RFC 6749 §3.1), else None."""
    names = sorted(name for name, values in params.items() if len(values) > 1)
    return _sent_twice(names[0]) if names else None


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
        self._clock: Callable[[], float] = config.clock
        self._lock = threading.Lock()
        self._clients: dict[str, OAuthClient] = {}
        self._codes: dict[str, _Code] = {}
        self._access: dict[str, _AccessToken] = {}
        self._refresh: dict[str, _RefreshToken] = {}
        self._denials = 0

    def __repr__(self) -> str:
        return (
            f"<OAuthServer clients={len(self._clients)} access_tokens={len(self._access)} "
            f"refresh_tokens={len(self._refresh)}>"
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
        if not isinstance(metadata, dict):
            raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
        metadata = {key: value for key, value in metadata.items() if value is not None}
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list")
        for uri in uris:
            problem = _uri_problem(uri)
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
        unsupported = sorted(set(grant_types) - _GRANT_TYPES)
        if unsupported:
            raise OAuthError("invalid_client_metadata", f"unsupported grant_types {unsupported}")
        if "authorization_code" not in grant_types:
            raise OAuthError(
                "invalid_client_metadata", "grant_types must include authorization_code"
            )
        response_types = metadata.get("response_types", ["code"])
        if response_types != ["code"]:
            raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
        scope = metadata.get("scope", " ".join(SCOPES))
        if not isinstance(scope, str):
            raise OAuthError("invalid_client_metadata", "scope must be a string")
        problem = _scope_problem(scope, SCOPES)
        if problem is not None:
            raise OAuthError("invalid_client_metadata", problem)
        name = metadata.get("client_name")
        if name is not None and not isinstance(name, str):
            raise OAuthError("invalid_client_metadata", "client_name must be a string")
        client = OAuthClient(
            client_id="emu-client-" + secrets.token_hex(8),
            redirect_uris=tuple(uris),
            grant_types=tuple(dict.fromkeys(grant_types)),
            client_name=name,
            scope=scope or " ".join(SCOPES),
            issued_at=int(time.time()),
        )
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
        client_id = _single(params, "client_id")
        with self._lock:
            client = self._clients.get(client_id) if client_id is not None else None
        if client is None:
            what = "client_id is required" if client_id is None else "unknown client_id"
            raise OAuthError("invalid_request", what)
        sent_uri = _single(params, "redirect_uri")
        if sent_uri is None:
            if len(client.redirect_uris) != 1:
                raise OAuthError(
                    "invalid_request", "redirect_uri is required: the client registered several"
                )
            target = client.redirect_uris[0]
        elif any(_loopback_match(uri, sent_uri) for uri in client.redirect_uris):
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
            return AuthorizationRedirect(_with_query(target, answer), error)

        def refuse(error: str, description: str) -> AuthorizationRedirect:
            return redirect({"error": error, "error_description": description}, error)

        duplicated = _duplicated(params)
        if duplicated:
            return refuse("invalid_request", duplicated)
        response_type = _single(params, "response_type")
        if response_type is None:
            return refuse("invalid_request", "response_type is required")
        if response_type != "code":
            return refuse("unsupported_response_type", 'response_type must be "code"')
        challenge = _single(params, "code_challenge")
        if challenge is None:
            return refuse("invalid_request", "code_challenge is required (PKCE, RFC 7636)")
        if _single(params, "code_challenge_method") != "S256":
            return refuse("invalid_request", "code_challenge_method must be S256")
        if not _CHALLENGE.fullmatch(challenge):
            return refuse(
                "invalid_request",
                "code_challenge must be the 43-character base64url SHA-256 of the verifier",
            )
        scope = _single(params, "scope") or client.scope
        problem = _scope_problem(scope, client.scope.split())
        if problem is not None:
            return refuse("invalid_scope", problem)
        code = secrets.token_urlsafe(32)
        with self._lock:
            if self._denials:
                self._denials -= 1
                return refuse("access_denied", "the user declined to sign in")
            self._codes[code] = _Code(
                _Grant(client.client_id, scope),
                sent_uri,
                challenge,
                self._clock() + CODE_LIFETIME,
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
        duplicated = _duplicated(form)
        if duplicated:
            raise OAuthError("invalid_request", duplicated)
        grant_type = _single(form, "grant_type")
        if grant_type is None:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant_type not in _GRANT_TYPES:
            raise OAuthError(
                "unsupported_grant_type", f"grant_type {grant_type!r} is not supported"
            )
        client_id = _single(form, "client_id")
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
        code_value = _single(form, "code")
        if code_value is None:
            raise OAuthError("invalid_request", "code is required")
        verifier = _single(form, "code_verifier")
        if verifier is None:
            raise OAuthError("invalid_request", "code_verifier is required (PKCE, RFC 7636)")
        if not _VERIFIER.fullmatch(verifier):
            raise OAuthError(
                "invalid_request",
                "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~",
            )
        code = self._codes.get(code_value)
        if code is None:
            raise OAuthError("invalid_grant", "unknown authorization code")
        if code.used:
            self._revoke_grant(code.grant)
            raise OAuthError(
                "invalid_grant",
                "the authorization code was already used; the tokens it gave are revoked",
            )
        if self._clock() >= code.expires_at:
            raise OAuthError("invalid_grant", "the authorization code expired")
        if code.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the authorization code was issued to another client")
        sent_uri = _single(form, "redirect_uri")
        if code.redirect_uri is not None and sent_uri != code.redirect_uri:
            raise OAuthError(
                "invalid_grant",
                "redirect_uri must be identical to the one sent to the authorization endpoint",
            )
        registered = client.redirect_uris
        if code.redirect_uri is None and sent_uri is not None and sent_uri not in registered:
            raise OAuthError("invalid_grant", "redirect_uri does not match the registered one")
        if not hmac.compare_digest(_s256(verifier), code.challenge):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        code.used = True
        return self._issue(client, code.grant, code.grant.scope)

    def _rotate(self, client: OAuthClient, form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        value = _single(form, "refresh_token")
        if value is None:
            raise OAuthError("invalid_request", "refresh_token is required")
        record = self._refresh.get(value)
        if record is None:
            raise OAuthError("invalid_grant", "unknown refresh token")
        if record.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "the refresh token was issued to another client")
        if record.state == "spent":
            self.counts.refresh_reuses += 1
            self._revoke_grant(record.grant)
            raise OAuthError(
                "invalid_grant",
                "the refresh token was already used (it rotates on every refresh); "
                "every token of this sign-in is revoked",
            )
        if record.state == "revoked" or record.grant.revoked:
            raise OAuthError("invalid_grant", "the refresh token was revoked")
        if record.expires_at is not None and self._clock() >= record.expires_at:
            raise OAuthError("invalid_grant", "the refresh token expired")
        scope = _single(form, "scope") or record.grant.scope
        problem = _scope_problem(scope, record.grant.scope.split())
        if problem is not None:
            raise OAuthError("invalid_scope", f"{problem}: a refresh cannot widen the grant")
        self.counts.refreshes += 1
        if not self.config.rotate_refresh_tokens:
            return self._issue(client, record.grant, scope, refresh=False)
        record.state = "spent"
        return self._issue(client, record.grant, scope)

    def _issue(
        self, client: OAuthClient, grant: _Grant, scope: str, *, refresh: bool = True
    ) -> dict[str, Any]:
        now = self._clock()
        lifetime = self.config.token_lifetime
        access = "emu-at-" + secrets.token_urlsafe(32)
        self._access[access] = _AccessToken(grant, now + lifetime)
        self.counts.tokens_issued += 1
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(lifetime) if float(lifetime).is_integer() else lifetime,
            "scope": scope,
        }
        if refresh and "refresh_token" in client.grant_types:
            token = "emu-rt-" + secrets.token_urlsafe(32)
            horizon = self.config.refresh_token_lifetime
            self._refresh[token] = _RefreshToken(
                grant, now + horizon if horizon is not None else None
            )
            answer["refresh_token"] = token
        return answer

    def _revoke_grant(self, grant: _Grant) -> None:
        grant.revoked = True
        for record in self._refresh.values():
            if record.grant is grant and record.state == "active":
                record.state = "revoked"

    # -- revocation (RFC 7009) ----------------------------------------------------------

    def revoke(self, form: Mapping[str, Sequence[str]]) -> None:
        """Revoke the token in a revocation request; unknown tokens are not an error."""
        with self._lock:
            try:
                token = _single(form, "token")
                if token is None:
                    raise OAuthError("invalid_request", "token is required")
                client_id = _single(form, "client_id")
                if client_id is not None and client_id not in self._clients:
                    raise OAuthError("invalid_client", "unknown client_id")
                refresh = self._refresh.get(token)
                access = self._access.get(token)
                grant = refresh.grant if refresh is not None else access.grant if access else None
                if grant is not None and client_id is not None and grant.client_id != client_id:
                    raise OAuthError(
                        "unauthorized_client", "the token was issued to another client"
                    )
            except OAuthError:
                self.counts.token_errors += 1
                raise
            if refresh is not None:
                self._revoke_grant(refresh.grant)
            elif access is not None:
                access.revoked = True
            self.counts.revocations += 1

    # -- the resource server's check ----------------------------------------------------

    def check(self, token: str) -> Access | str:
        """What the A2A endpoint makes of an access token: :class:`Access`, or the reason
        it is refused (``"invalid token"``, ``"token expired"``, ``"token revoked"``)."""
        with self._lock:
            record = self._access.get(token)
            if record is None:
                return "invalid token"
            if record.revoked or record.grant.revoked:
                self.counts.rejected_tokens += 1
                return "token revoked"
            if self._clock() >= record.expires_at:
                self.counts.rejected_tokens += 1
                return "token expired"
        return Access(self.config.oauth_plan, QUOTA_SUBJECT)

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
        problem = _scope_problem(granted, client.scope.split())
        if problem is not None:
            raise ValueError(problem)
        with self._lock:
            return self._issue(client, _Grant(client.client_id, granted), granted)

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
            revoked = 0
            for record in self._refresh.values():
                if record.state == "active" and client_id in (None, record.grant.client_id):
                    record.state = "revoked"
                    revoked += 1
            return revoked

    def revoke_tokens(self, client_id: str | None = None) -> int:
        """Revoke every grant (of ``client_id``, else of every client): access and refresh
        tokens alike stop working. Returns how many grants were revoked."""
        with self._lock:
            every = [r.grant for r in self._access.values()]
            every += [r.grant for r in self._refresh.values()]
            grants = {
                id(grant): grant
                for grant in every
                if not grant.revoked and client_id in (None, grant.client_id)
            }
            for grant in grants.values():
                self._revoke_grant(grant)
            return len(grants)

    def expire_access_tokens(self, client_id: str | None = None) -> int:
        """Make every live access token (of ``client_id``, else of every client) expired
        now; refresh tokens stay valid. Returns how many were expired."""
        with self._lock:
            now = self._clock()
            expired = 0
            for record in self._access.values():
                if (
                    record.expires_at > now
                    and not record.revoked
                    and client_id in (None, record.grant.client_id)
                ):
                    record.expires_at = now
                    expired += 1
            return expired
