"""Connecting to Redis: the one place that turns what a user gives for a shared feature (the
shared quota, the cache, the sign-in) into a connected redis-py asyncio client.

What is taken: a URL of one of :data:`FORMS` (every error about one names them), with the
details ``docs/network.md`` (Redis as production runs it) tabulates, or a ready
redis-py asyncio client, used as it is and never closed (the application owns it). A
cluster's keys of one account carry one hash tag, so a Lua script's keys share a slot; a
Sentinel is asked again for the primary after each lost connection, so a failover is
followed.

One rule for a Redis that fails, whichever feature asks: a refusal (the user or password,
an ACL user's commands, the TLS certificate) is raised at once as the feature's own error
saying "refused", as no wait mends it; anything else is :class:`RedisUnavailable` ("did
not answer"), for which each feature has its fallback. :func:`check_redis` asks once,
before anything else is done. No message shows a password (:func:`masked_url`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from magisterium_async._clock import LoopClock, within
from magisterium_async._errors import MagisteriumError, SharedQuotaError, masked_url

T = TypeVar("T")
Refused = Callable[[str], Exception]
"""What a feature raises for a Redis it cannot use, given the message (its error class)."""

FORMS = (
    "redis://, rediss:// (TLS), unix://, redis+cluster://HOST:PORT[,HOST:PORT...], "
    "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB], "
    "or a redis-py asyncio client (Redis, RedisCluster, Sentinel.master_for)"
)
"""The forms a Redis location may take, as every error about one names them."""

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
# A check needs what every feature needs, in one round trip: the sign-in, TLS, the
# database, a script, and a key of the SDK's (which an ACL may deny).
_CHECK = "return redis.call('EXISTS', KEYS[1])"


class RedisUnavailable(MagisteriumError):
    """Redis did not answer (down, unreachable, too slow, failing over): a failure that
    may pass, for which the feature that asked has its fallback."""


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


def describe(target: object) -> str:
    """``target`` as a message may show it: the URL with its password masked, or the
    client's class (a client's repr may hold nothing secret, but it is not ours)."""
    if isinstance(target, str):
        return masked_url(target)
    return f"the application's {type(target).__name__} client"


@dataclass(eq=False, slots=True)
class Connection:
    """A client for one Redis location (``where``, as messages show it), whether closing
    it is ours (``owned``), and the one rule for its failures: each :meth:`run` is bounded
    by ``timeout`` seconds, and a refusal raises ``error`` naming ``what`` (the feature).
    ``sentinels``: the Sentinels' own clients, when we made them."""

    client: Any = field(repr=False)
    owned: bool
    where: str
    timeout: float = 2.0
    error: Refused = SharedQuotaError
    what: str = "the shared quota"
    sentinels: list[Any] = field(default_factory=list, repr=False)

    async def run(self, command: Awaitable[T]) -> T:
        """``await command``. Raises ``error`` when Redis refused (:func:`refusal`), and
        :class:`RedisUnavailable` when it did not answer."""
        try:
            return await within(LoopClock(), self.timeout, command, asyncio.TimeoutError)
        except redis_errors() as exc:
            refused = refusal(exc, self.where)
            if refused is not None:
                raise self.error(f"{self.what}: {refused}") from None
            reason = str(exc) or f"no answer within {self.timeout:g} s"
            raise RedisUnavailable(
                f"{self.what}: Redis at {self.where} did not answer ({reason})"
            ) from None

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
    target: object,
    timeout: float,
    error: Refused = SharedQuotaError,
    what: str = "the shared quota",
) -> Connection:
    """A connection to ``target`` (a URL of :data:`FORMS`, or a client); nothing is sent
    before its first command. A URL that cannot be used raises ``error`` naming ``what``
    and the forms."""
    rule: dict[str, Any] = {"timeout": timeout, "error": error, "what": what}
    if not isinstance(target, str):
        if is_client(target):
            return Connection(target, owned=False, where=describe(target), **rule)
        raise TypeError(f"{what}: a Redis URL or a redis-py asyncio client, not {type(target)}")
    where = masked_url(target)
    try:
        from redis.asyncio import Redis
    except ImportError:
        raise error(f"{what} needs redis-py: pip install 'magisterium-async[redis]'") from None
    match = _URL.match(target)
    scheme = match.group(1).lower() if match else ""
    sentinels: list[Any] = []
    try:
        _check_tls_files(target.partition("?")[2])
        if scheme in ("redis", "rediss", "unix"):
            client: Any = Redis.from_url(target, **_bounds(timeout))
            # An option of the query redis-py does not take reaches its connection as a
            # keyword, refused at the first call: a connection made now (never opened)
            # refuses it here.
            client.connection_pool.make_connection()
        elif scheme in ("redis+cluster", "rediss+cluster"):
            client = _cluster(target, scheme, timeout)
        elif scheme in ("redis+sentinel", "rediss+sentinel"):
            client, sentinels = _sentinel(target, scheme, timeout)
        else:
            raise ValueError(f"unknown scheme {scheme + '://' if scheme else '(none)'}")
    # Their words name no password. Any exception: redis-py reads some options of a URL
    # only as its connection is made (8.1: ?retry_on_error= with ?retry_on_timeout= is an
    # AttributeError), and a URL it cannot use is one to refuse, never a traceback.
    except Exception as exc:
        said = re.sub(r".*unexpected keyword argument ('.*')", r"unknown option \1", str(exc))
        raise error(f"{what}: invalid Redis URL {where!r}: {said}; use one of: {FORMS}") from None
    return Connection(client, owned=True, where=where, sentinels=sentinels, **rule)


async def check_redis(
    target: object,
    timeout: float,
    *,
    error: Refused = SharedQuotaError,
    what: str = "the shared quota",
) -> None:
    """Ask the Redis at ``target`` (a URL of :data:`FORMS`, or a client, left open) once,
    as the features will, before anything else is done; nothing is written.

    Raises:
        ``error``: the URL cannot be used, or Redis refused (the user or password, an ACL
            user's commands, the TLS certificate); the message says "refused" and begins
            with ``what`` (``"--redis"``).
        RedisUnavailable: Redis did not answer within ``timeout`` seconds.
    """
    connection = connect(target, timeout, error, what)
    try:
        await connection.run(connection.client.eval(_CHECK, 1, "magisterium:{check}"))
    finally:
        await connection.aclose()


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
        if name in _TLS_FILES and not os.path.isfile(value):
            raise ValueError(f"TLS: {name}={value!r} is not a file")


def _hosts(netloc: str, default_port: int) -> list[tuple[str, int]]:
    """The ``(host, port)`` list of ``netloc`` (``[USER:PASS@]HOST:PORT,HOST:PORT``)."""
    hosts: list[tuple[str, int]] = []
    for item in filter(None, (h.strip() for h in netloc.rpartition("@")[2].split(","))):
        try:
            parts = urlsplit(f"//{item}")
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
        if not host or port == 0:
            raise ValueError(f"invalid HOST:PORT {item!r}")
        hosts.append((host, port or default_port))
    if not hosts:
        raise ValueError("no HOST:PORT given")
    return hosts


def _cluster(url: str, scheme: str, timeout: float) -> Any:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    parts = urlsplit(url)
    hosts = _hosts(parts.netloc, 6379)
    if parts.path.strip("/") not in ("", "0") or dict(parse_qsl(parts.query)).get("db", "0") != "0":
        raise ValueError("a cluster has one database, 0: give no /DB or ?db=")
    # redis-py reads the first node's URL (user, password, TLS and the other options);
    # the others are more nodes to start from.
    userinfo = parts.netloc.rpartition("@")[0]
    host, port = hosts[0]
    node = f"{scheme.partition('+')[0]}://{userinfo + '@' if userinfo else ''}"
    node += f"{f'[{host}]' if ':' in host else host}:{port}/0"
    bounds = _bounds(timeout)
    bounds.pop("retry")  # a cluster retries once through MOVED/ASK redirects: keep its own
    return RedisCluster.from_url(
        f"{node}?{parts.query}" if parts.query else node,
        startup_nodes=[ClusterNode(h, p) for h, p in hosts[1:]],
        **bounds,
    )


def _sentinel(url: str, scheme: str, timeout: float) -> tuple[Any, list[Any]]:
    from redis.asyncio.sentinel import Sentinel

    parts = urlsplit(url)
    hosts = _hosts(parts.netloc, 26379)
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("no SERVICE name: redis+sentinel://HOST:PORT/SERVICE[/DB]")
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(f"invalid path {parts.path!r}: give /SERVICE[/DB]")
    options = dict(parse_qsl(parts.query))
    own: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    for name in ("sentinel_username", "sentinel_password"):
        if name in options:
            own[name.removeprefix("sentinel_")] = options.pop(name)
    bounds = _bounds(timeout)
    if scheme.startswith("rediss"):
        bounds["ssl"] = own["ssl"] = True
        for name in (*_TLS_FILES, "ssl_cert_reqs"):
            if name in options:
                bounds[name] = own[name] = options.pop(name)
    if options:
        raise ValueError(f"unknown options {sorted(options)}")
    # redis-py before 8.2 leaves Sentinel untyped; 8.2 types it.
    sentinel = Sentinel(hosts, sentinel_kwargs=own, **bounds)  # type: ignore[no-untyped-call, unused-ignore]
    client = sentinel.master_for(
        unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )
    return client, list(sentinel.sentinels)


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis raises: its errors, the socket's, and timeouts."""
    from redis.exceptions import RedisError

    return (RedisError, OSError, asyncio.TimeoutError)


def refusal(exc: BaseException, where: str) -> str | None:
    """What to say when ``exc`` (a failing Redis call's) is a refusal that no wait will
    change, else ``None``: the server's TLS certificate refused, the URL's user and
    password refused (by Redis or the Sentinels), an ACL user denied a command. ``where``:
    the location as a message may show it (:func:`describe`)."""
    import ssl

    from redis.asyncio.sentinel import MasterNotFoundError
    from redis.exceptions import AuthenticationError, NoPermissionError

    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        said = str(error)  # Redis's own words name no secret ("WRONGPASS invalid ...")
        if isinstance(error, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in said:
            reason = getattr(error, "verify_message", None) or "certificate verify failed"
            return (
                f"TLS: the certificate of {where} was refused ({reason}): check that "
                "ssl_ca_certs names the CA that signed the server's certificate"
            )
        # A Redis older than 6 (no ACL users) refuses a user name as too many arguments.
        if isinstance(error, AuthenticationError) or "arguments for 'auth'" in said.lower():
            return (
                f"Redis at {where} refused the sign-in ({error}): check the user and "
                "password in the URL"
            )
        if isinstance(error, MasterNotFoundError) and "AuthenticationError" in said:
            return (
                f"the Sentinels at {where} refused the sign-in: check sentinel_username "
                "and sentinel_password in the URL"
            )
        if isinstance(error, NoPermissionError):
            return (
                f"Redis at {where} refused a command to this user ({error}): allow the URL's "
                "user the scripts (EVALSHA, EVAL) and commands on the keys magisterium:*"
            )
        error = error.__cause__ or error.__context__
    return None


def token_key(token: str) -> str:
    """The part of every key that names the token: a hash, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]
