"""Connecting to Redis: the one place that turns what a user gives for a shared feature (the
shared quota, the cache, the sign-in) into a connected redis-py asyncio client.

What is taken (:data:`FORMS` says it in every error):

- ``redis://``, ``rediss://`` (TLS: ``?ssl_ca_certs=PATH`` and redis-py's other URL
  options), ``unix://``, with an ACL user and password;
- ``redis+cluster://HOST:PORT[,HOST:PORT...][/?options]``: a Redis or Valkey Cluster
  (``rediss+cluster://`` over TLS). Every key of one account carries one hash tag, so a
  Lua script's keys share a slot;
- ``redis+sentinel://[USER:PASS@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``: the primary
  Sentinel names for ``SERVICE``, asked again after each lost connection, so a failover is
  followed. The user and password are the primary's; the Sentinels' own, if they need any,
  are ``?sentinel_username=`` and ``?sentinel_password=``;
- a ready redis-py asyncio client (``Redis``, ``RedisCluster``, or one from
  ``Sentinel.master_for``): used as it is, and never closed (the application owns it).

``masked_url`` (from :mod:`._errors`) is what a message may show of a Redis URL.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from magisterium_async._config import REDIS_URL_ENV
from magisterium_async._errors import SharedQuotaError, masked_url

RedisClient = Any
"""A redis-py asyncio client (``Redis`` or ``RedisCluster``): typed loosely, since redis-py
is an optional dependency."""

__all__ = [
    "FORMS",
    "REDIS_URL_ENV",
    "Connection",
    "RedisClient",
    "connect",
    "describe",
    "is_client",
    "looks_like_redis",
    "masked_url",
    "redis_errors",
    "refusal",
    "token_key",
]

FORMS = (
    "redis://, rediss:// (TLS), unix://, redis+cluster://HOST:PORT[,HOST:PORT...], "
    "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB], "
    "or a redis-py asyncio client (Redis, RedisCluster, Sentinel.master_for)"
)
"""The forms a Redis location may take, as every error about one names them."""

_PLAIN = ("redis", "rediss", "unix")
_CLUSTER = ("redis+cluster", "rediss+cluster")
_SENTINEL = ("redis+sentinel", "rediss+sentinel")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_INSTALL_HINT = "needs redis-py: pip install 'magisterium-async[redis]'"


def looks_like_redis(value: str) -> bool:
    """Whether ``value`` is a URL (``scheme://``) rather than a path: a Redis one, or one
    to refuse; never a file's name."""
    return _URL.match(value) is not None


def is_client(value: object) -> bool:
    """Whether ``value`` is a redis-py asyncio client (``Redis`` or ``RedisCluster``)."""
    if value is None or isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return False
    try:
        from redis.asyncio import Redis, RedisCluster
    except ImportError:
        return False
    return isinstance(value, (Redis, RedisCluster))


def describe(target: str | RedisClient) -> str:
    """``target`` as a message may show it: the URL with its password masked, or the
    client's class (a client's repr may hold nothing secret, but it is not ours)."""
    if isinstance(target, str):
        return masked_url(target)
    return f"the application's {type(target).__name__} client"


class Connection:
    """A client for one Redis location, and whether closing it is ours to do."""

    __slots__ = ("client", "owned", "sentinels", "where")

    def __init__(self, client: RedisClient, *, owned: bool, where: str) -> None:
        self.client: Any = client
        self.owned = owned
        self.where = where
        self.sentinels: list[Any] = []  # the Sentinels' own clients, when we made them

    async def aclose(self) -> None:
        """Close the client if we made it; an application's client stays open."""
        if not self.owned:
            return
        for client in [self.client, *self.sentinels]:
            try:
                await client.aclose()
            except redis_errors():
                pass  # closing a connection that is already gone


def connect(
    target: str | RedisClient,
    timeout: float,
    error: type[Exception] = SharedQuotaError,
    what: str = "the shared quota",
) -> Connection:
    """A connection to ``target`` (a URL of :data:`FORMS`, or a client), every call of a
    client we make bounded by ``timeout`` seconds. A URL that cannot be used raises
    ``error`` (naming ``what`` and the forms), before anything is sent."""
    if not isinstance(target, str):
        if is_client(target):
            return Connection(target, owned=False, where=describe(target))
        raise TypeError(f"{what}: a Redis URL or a redis-py asyncio client, not {type(target)}")
    where = masked_url(target)
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        raise error(f"{what} {_INSTALL_HINT}") from None
    match = _URL.match(target)
    scheme = match.group(1).lower() if match else ""
    try:
        sentinels: list[Any] = []
        if scheme in _PLAIN:
            client: Any = _plain(target, timeout)
        elif scheme in _CLUSTER:
            client = _cluster(target, scheme, timeout)
        elif scheme in _SENTINEL:
            client, sentinels = _sentinel(target, scheme, timeout)
        else:
            raise ValueError(f"unknown scheme {scheme + '://' if scheme else '(none)'}")
    except (ValueError, TypeError) as exc:
        reason = str(exc)
        password = _password(target)
        if password:
            reason = reason.replace(password, "***")
        raise error(f"{what}: invalid Redis URL {where!r}: {reason}; use one of: {FORMS}") from None
    connection = Connection(client, owned=True, where=where)
    connection.sentinels = sentinels
    return connection


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _bounds(timeout: float) -> dict[str, Any]:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": False,
    }


def _check_tls_files(query: str) -> None:
    """A TLS file named in the URL's options must be there: else the handshake would fail
    at every call, far from the typo."""
    for name, value in parse_qsl(query):
        if name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile") and not os.path.isfile(value):
            raise ValueError(f"TLS: {name}={value!r} is not a file")


def _plain(url: str, timeout: float) -> Any:
    from redis.asyncio import Redis

    _check_tls_files(url.partition("?")[2])
    return Redis.from_url(url, **_bounds(timeout))


def _hosts(netloc: str, scheme: str) -> tuple[str | None, str | None, list[tuple[str, int]]]:
    """The user, password and ``(host, port)`` list of ``netloc`` (``u:p@h:p,h:p``)."""
    userinfo, _, hostlist = netloc.rpartition("@")
    user = password = None
    if userinfo:
        name, colon, secret = userinfo.partition(":")
        user = unquote(name) or None
        password = unquote(secret) if colon else None
    hosts: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):  # [::1]:port
            host, _, port = item[1:].partition("]")
            port = port.lstrip(":")
        else:
            host, _, port = item.rpartition(":")
            if not host:
                host, port = port, ""
        default = 26379 if scheme in _SENTINEL else 6379
        try:
            number = int(port) if port else default
        except ValueError:
            raise ValueError(f"invalid port {port!r}") from None
        if not host or not 0 < number < 65536:
            raise ValueError(f"invalid host {item!r}")
        hosts.append((host, number))
    if not hosts:
        raise ValueError("no HOST:PORT given")
    return user, password, hosts


def _split(url: str) -> tuple[str, str, str]:
    """``url``'s ``netloc``, path and query (urlsplit refuses a list of hosts' ports)."""
    rest = url.split("://", 1)[1]
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    return netloc, slash + path, query


def _cluster(url: str, scheme: str, timeout: float) -> Any:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    netloc, path, query = _split(url)
    _, _, hosts = _hosts(netloc, scheme)
    _check_tls_files(query)
    if path.strip("/") not in ("", "0"):
        raise ValueError("a cluster has one database, 0: give no /DB")
    first = "rediss" if scheme.startswith("rediss") else "redis"
    # redis-py parses the first node's URL (user, password, TLS and the other options);
    # the others are more nodes to start from.
    base = f"{first}://{netloc.rpartition('@')[0] + '@' if '@' in netloc else ''}"
    host, port = hosts[0]
    shown = f"[{host}]" if ":" in host else host
    node_url = f"{base}{shown}:{port}/0" + (f"?{query}" if query else "")
    bounds = _bounds(timeout)
    bounds.pop("retry")  # a cluster retries once through MOVED/ASK redirects: keep its own
    return RedisCluster.from_url(
        node_url,
        startup_nodes=[ClusterNode(h, p) for h, p in hosts[1:]],
        **bounds,
    )


def _sentinel(url: str, scheme: str, timeout: float) -> tuple[Any, list[Any]]:
    from redis.asyncio.sentinel import Sentinel

    netloc, path, query = _split(url)
    user, password, hosts = _hosts(netloc, scheme)
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise ValueError("no SERVICE name: redis+sentinel://HOST:PORT/SERVICE[/DB]")
    if len(parts) > 2:
        raise ValueError(f"too many path parts {path!r}: give /SERVICE[/DB]")
    service = unquote(parts[0])
    try:
        db = int(parts[1]) if len(parts) == 2 else 0
    except ValueError:
        raise ValueError(f"invalid database {parts[1]!r}") from None
    _check_tls_files(query)
    options = dict(parse_qsl(query))
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": timeout}
    sentinel_kwargs["socket_connect_timeout"] = timeout
    for name in ("sentinel_username", "sentinel_password"):
        if name in options:
            sentinel_kwargs[name.removeprefix("sentinel_")] = options.pop(name)
    bounds = _bounds(timeout)
    if scheme.startswith("rediss"):
        bounds["ssl"] = True
        sentinel_kwargs["ssl"] = True
        for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs"):
            if name in options:
                bounds[name] = sentinel_kwargs[name] = options.pop(name)
    if options:
        raise ValueError(f"unknown options {sorted(options)}")
    # redis-py before 8.2 leaves Sentinel untyped; 8.2 types it.
    sentinel = Sentinel(hosts, sentinel_kwargs=sentinel_kwargs, **bounds)  # type: ignore[no-untyped-call, unused-ignore]
    client = sentinel.master_for(service, db=db, username=user, password=password)
    return client, list(sentinel.sentinels)


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis raises: its errors, the socket's, and timeouts."""
    from redis.exceptions import RedisError

    return (RedisError, OSError, asyncio.TimeoutError)


def refusal(exc: BaseException, where: str) -> str | None:
    """What to say when ``exc`` (a failing Redis call's) is a refusal that no wait will
    change, else ``None``: a TLS handshake that refused the server's certificate (a CA that
    did not sign it, a name it does not carry), or Redis refusing the URL's user and
    password. Not an outage to wait out: the same call is refused every time.
    ``where``: the location as a message may show it (:func:`describe`)."""
    import ssl

    from redis.exceptions import AuthenticationError, NoPermissionError

    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ssl.SSLCertVerificationError) or (
            "CERTIFICATE_VERIFY_FAILED" in str(error)
        ):
            reason = getattr(error, "verify_message", None) or "certificate verify failed"
            return (
                f"TLS: the certificate of {where} was refused ({reason}): check that "
                "ssl_ca_certs names the CA that signed the server's certificate"
            )
        if isinstance(error, AuthenticationError) or "wrong number of arguments for 'auth'" in (
            str(error).lower()  # a user name sent to a Redis older than 6 (no ACL users)
        ):
            # Redis's own words name no secret ("invalid username-password pair ...").
            return (
                f"Redis at {where} refused the sign-in ({error}): check the user and "
                "password in the URL"
            )
        if isinstance(error, NoPermissionError):  # an ACL user without the commands used
            return (
                f"Redis at {where} refused a command to this user ({error}): allow the URL's "
                "user the scripts (EVALSHA, EVAL) and commands on the SDK's keys"
            )
        error = error.__cause__ or error.__context__
    return None


def token_key(token: str) -> str:
    """The part of every key that names the token: a hash, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]
