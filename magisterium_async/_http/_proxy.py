"""Which proxy a request goes through: one named by the user, or the environment's.

The environment is read as requests and httpx read it: ``HTTPS_PROXY`` / ``HTTP_PROXY``
for URLs of that scheme and ``NO_PROXY`` for the hosts that bypass them, each in either
case (the lower-case one wins; ``HTTP_PROXY`` is ignored under CGI, where it is a request
header). No host bypasses a proxy implicitly, loopback ones included: list them in
``NO_PROXY``. aiohttp's own ``trust_env`` is not used: it would also read ``~/.netrc`` and
put its Basic credentials in place of the bearer token.

A proxy's credentials go to aiohttp as a ``Proxy-Authorization`` header, apart from its
URL, and every text made here for people shows its password as ``***``
(:func:`~magisterium_async._errors.masked_url`).
"""

from __future__ import annotations

import urllib.request
from base64 import b64encode
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import unquote, urlsplit, urlunsplit

from magisterium_async._errors import masked_url

__all__ = [
    "Proxies",
    "Proxy",
    "RequestArguments",
    "environment_proxy",
    "request_arguments",
]

_SCHEMES = ("http", "https")


class Proxy(NamedTuple):
    """A proxy as aiohttp takes it: its URL without credentials, and the
    ``Proxy-Authorization`` header that carries them (``None``: none)."""

    url: str
    headers: Mapping[str, str] | None

    def __repr__(self) -> str:
        return f"Proxy({self.url!r}{', credentials=***' if self.headers else ''})"


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
        raise ValueError(f"{where} {masked_url(text)!r} is not a URL") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ValueError(
            f"{where} {masked_url(text)!r}: give an http:// or https:// proxy URL with a host "
            "(SOCKS proxies are not supported)"
        )
    headers = None
    if parts.username is not None or parts.password is not None:
        # A header rather than aiohttp.BasicAuth (deprecated in aiohttp 3.14); it goes on
        # the CONNECT of an https:// request and on a plain http:// one alike.
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers = {"Proxy-Authorization": "Basic " + b64encode(pair.encode()).decode("ascii")}
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if port is None else f"{host}:{port}"
    return Proxy(urlunsplit((parts.scheme, netloc, parts.path, "", "")), headers)


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


def request_arguments(
    proxy: Proxy | None, url: str, headers: Mapping[str, str]
) -> RequestArguments:
    """What aiohttp's ``request`` takes to send a request to ``url`` through ``proxy``.

    The credentials go on the ``CONNECT`` of an ``https://`` URL (``proxy_headers``); a
    plain ``http://`` request is read by the proxy itself, so they go on it (aiohttp
    applies ``proxy_headers`` only to a ``CONNECT``).
    """
    if proxy is None:
        return RequestArguments(headers, None, None)
    if proxy.headers and urlsplit(url).scheme == "http":
        return RequestArguments({**headers, **proxy.headers}, proxy.url, None)
    return RequestArguments(headers, proxy.url, proxy.headers)


class RequestArguments(NamedTuple):
    """The request's headers, the proxy's URL and the headers of its ``CONNECT``."""

    headers: Mapping[str, str]
    proxy: str | None
    proxy_headers: Mapping[str, str] | None


def environment_proxy(url: str) -> Proxy | None:
    """The environment's proxy for ``url`` now (for the sign-in's occasional requests)."""
    return Proxies().for_url(url)
