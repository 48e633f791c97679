"""Which proxy a request goes through: one named by the user, or the environment's.

The environment is read as requests and httpx read it: ``HTTPS_PROXY`` / ``HTTP_PROXY``
for URLs of that scheme and ``NO_PROXY`` for the hosts that bypass them, each in either
case (the lower-case one wins; ``HTTP_PROXY`` is ignored under CGI, where it is a request
header). No host bypasses a proxy implicitly, loopback ones included: list them in
``NO_PROXY``. aiohttp's own ``trust_env`` is not used: it would also read ``~/.netrc`` and
put its Basic credentials in place of the bearer token.

A proxy's credentials go to aiohttp as ``proxy_auth``, apart from its URL, and every text
made here for people (:func:`redact`) shows them as ``***``.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

__all__ = ["Proxies", "Proxy", "environment_proxy", "redact"]

_SCHEMES = ("http", "https")


class Proxy(NamedTuple):
    """A proxy as aiohttp takes it: its URL without credentials, and those apart."""

    url: str
    auth: aiohttp.BasicAuth | None

    def __repr__(self) -> str:
        return f"Proxy({self.url!r}{', auth=***' if self.auth is not None else ''})"


def redact(url: str) -> str:
    """``url`` with any user and password shown as ``***``."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def _parse(url: str, where: str) -> Proxy:
    """``url`` as a :class:`Proxy`; ``ValueError`` (naming ``where``) if it is not one."""
    if not isinstance(url, str):
        raise TypeError(f"proxy must be a str URL, not {type(url).__name__}")
    text = url.strip()
    if text and "://" not in text:
        text = f"http://{text}"  # "proxy:3128", as curl and requests read it
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(f"{where} {redact(url)!r} is not a URL") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ValueError(
            f"{where} {redact(url)!r}: give an http:// or https:// proxy URL with a host "
            "(SOCKS proxies are not supported)"
        )
    auth = None
    if parts.username is not None or parts.password is not None:
        auth = aiohttp.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if port is None else f"{host}:{port}"
    return Proxy(urlunsplit((parts.scheme, netloc, parts.path, "", "")), auth)


class Proxies:
    """The proxy for each URL: ``proxy`` for every one, else (with ``trust_env``) the
    environment's for its scheme unless ``NO_PROXY`` names its host; read once, here."""

    def __init__(self, proxy: str | None = None, *, trust_env: bool = True) -> None:
        self._explicit = None if proxy is None else _parse(proxy, "proxy")
        environment: Mapping[str, str] = {}
        if proxy is None and trust_env:
            environment = urllib.request.getproxies_environment()
        self._environment = environment
        self._by_scheme = {
            scheme: _parse(environment[scheme], f"${scheme.upper()}_PROXY")
            for scheme in _SCHEMES
            if environment.get(scheme)
        }
        self._bypass: dict[str, bool] = {}

    def __repr__(self) -> str:
        if self._explicit is not None:
            return f"<Proxies {self._explicit.url}>"
        named = ", ".join(f"{s}: {p.url}" for s, p in self._by_scheme.items()) or "none"
        return f"<Proxies from the environment: {named}>"

    @property
    def description(self) -> str | None:
        """The proxies in use, for people (credentials never shown); ``None``: none."""
        if self._explicit is not None:
            return self._explicit.url
        if not self._by_scheme:
            return None
        return ", ".join(f"{p.url} for {s}://" for s, p in self._by_scheme.items())

    def for_url(self, url: str) -> Proxy | None:
        """The proxy a request to ``url`` goes through, or ``None``: straight there."""
        if self._explicit is not None:
            return self._explicit
        if not self._by_scheme:
            return None
        parts = urlsplit(url)
        chosen = self._by_scheme.get(parts.scheme)
        if chosen is None:
            return None
        host = parts.netloc.rpartition("@")[2]
        bypass = self._bypass.get(host)
        if bypass is None:
            # Documented in urllib.request's source, not in its stubs.
            check = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
            bypass = self._bypass[host] = bool(check(host, self._environment))
        return None if bypass else chosen


def environment_proxy(url: str) -> Proxy | None:
    """The environment's proxy for ``url`` now (for the sign-in's occasional requests)."""
    return Proxies().for_url(url)
