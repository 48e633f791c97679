"""Redis as production runs it: every form a Redis location takes (``rediss://``,
``redis+cluster://``, ``redis+sentinel://``, a ready redis-py client), for the shared
quota, the cache and the sign-in alike. Against real servers started here on loopback: a
three-primary Cluster, and a primary + replica watched by one Sentinel.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async._cache import open_store
from magisterium_async._config import CachePolicy
from magisterium_async._ratelimit import SharedQuota
from magisterium_async._redis import RedisUnavailable, check_redis, connect
from magisterium_async.testing import Emulator, EmulatorConfig
from tests.conftest import JumpClock
from tests.helpers.oauth_fake import FakeAuthServer, auth_server, sign_in
from tests.helpers.quota import (
    LIMIT,
    MARGIN,
    PERIOD,
    admitted_times,
    quota_config,
    run_quota_workers,
)
from tests.helpers.redis_server import (
    RedisClusterServers,
    RedisServer,
    SentinelServers,
    ci,
    redis_unavailable,
)

__all__ = ["auth_server"]


def _servers(servers: Any) -> Iterator[Any]:
    reason = redis_unavailable()
    if reason is not None:
        if ci():
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Iterator[RedisClusterServers]:
    yield from _servers(RedisClusterServers(str(tmp_path_factory.mktemp("cluster"))))


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: Any) -> Iterator[SentinelServers]:
    """One primary + replica + Sentinel for the module (starting one takes seconds): the
    sign-in test works before the failover test and after it alike (then on the promoted
    primary, Sentinel naming it)."""
    yield from _servers(SentinelServers(str(tmp_path_factory.mktemp("sentinel"))))


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(quota_config()) as emu:
        yield emu


def max_in_window(starts: list[float], period: float) -> int:
    """The most starts in any window of ``period`` seconds."""
    return max(sum(1 for t in starts if s <= t < s + period) for s in starts)


@pytest.fixture
def clock(auth_server: FakeAuthServer) -> JumpClock:
    manual = JumpClock()
    auth_server.now = manual.now
    return manual


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_TOKEN", raising=False)


# A location that cannot be used is refused at construction --------------------------

BAD = [
    ("redis+foo://127.0.0.1:1", r"unknown scheme redis\+foo://|unsupported location"),
    ("redis+sentinel://u:hunter2@127.0.0.1:1", "no SERVICE name"),
    ("redis+sentinel://u:hunter2@/mymaster", "no HOST:PORT"),
    ("redis+cluster://u:hunter2@/", "no HOST:PORT"),
    ("redis+cluster://127.0.0.1:x", "invalid HOST:PORT"),
    ("redis+cluster://u:hunter2@127.0.0.1:1?db=2", "a cluster has one database, 0"),
    # An option redis-py's connection would refuse as a keyword at the first call: named.
    ("redis://u:hunter2@127.0.0.1:1/0?foo=bar", "unknown option 'foo'"),
    ("redis://127.0.0.1:1/0?password=hunter2&timeout=1", "unknown option 'timeout'"),
    ("redis://127.0.0.1:1/0?socket_timout=1", "unknown option 'socket_timout'"),
    ("redis://127.0.0.1:1/0?ssl_cert_reqs=none", "unknown option 'ssl_cert_reqs'"),
    ("rediss://u:hunter2@127.0.0.1:1/0?ssl_cert_reqs=none&foo=1", "unknown option 'foo'"),
    (
        "unix:///tmp/r.sock?password=hunter2&socket_keepalive=1",
        "unknown option 'socket_keepalive'",
    ),
    ("redis+cluster://u:hunter2@127.0.0.1:1?foo=bar", "unknown option 'foo'"),
    ("rediss+cluster://127.0.0.1:1?ssl_cert_reqs=none&x=1", "unknown option 'x'"),
    (
        "redis+sentinel://127.0.0.1:1/svc?sentinel_password=hunter2&foo=1&bar=2",
        r"unknown options \['bar', 'foo'\]",
    ),
]


@pytest.mark.parametrize(("url", "reason"), BAD)
def test_a_bad_url_is_refused_at_construction_for_the_quota(url: str, reason: str) -> None:
    with pytest.raises(m.SharedQuotaError, match=reason) as caught:
        m.AsyncMagisterium(token="t", shared_quota=url)
    text = str(caught.value)
    assert "hunter2" not in text and "redis+cluster://HOST:PORT" in text
    assert "redis+sentinel://HOST:PORT" in text and "rediss://" in text


@pytest.mark.parametrize(("url", "reason"), BAD)
def test_a_bad_url_is_refused_at_construction_for_the_cache_never_a_path(
    url: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(m.CacheError, match=reason) as caught:
        m.AsyncMagisterium(token="t", cache=url)
    assert "hunter2" not in str(caught.value) and "redis+sentinel://" in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no file made of the URL


@pytest.mark.parametrize(("url", "reason"), BAD)
def test_a_bad_url_is_refused_at_construction_for_the_sign_in(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        m.AsyncMagisterium(credentials=url)
    assert "hunter2" not in str(caught.value)


def test_whatever_redis_py_raises_making_a_url_s_connection_is_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # redis-py 8.1 reads ?retry_on_error=...&retry_on_timeout=true into an AttributeError.
    from redis.asyncio.connection import ConnectionPool

    def breaks(pool: ConnectionPool) -> None:
        raise AttributeError("'str' object has no attribute 'append'")

    monkeypatch.setattr(ConnectionPool, "make_connection", breaks)
    with pytest.raises(m.SharedQuotaError, match=r"invalid Redis URL .*no attribute 'append'"):
        m.AsyncMagisterium(token="t", shared_quota="redis://:hunter2@127.0.0.1:1/0")


def test_each_form_makes_its_kind_of_client(tmp_path: Path) -> None:
    from redis.asyncio import Redis, RedisCluster

    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a handshake")
    cluster = connect(
        f"rediss+cluster://u:pw@127.0.0.1:7001,127.0.0.1:7002/?ssl_ca_certs={ca}", 1.0
    )
    assert isinstance(cluster.client, RedisCluster) and cluster.owned
    sentinel = connect("redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/svc/3", 1.0)
    assert isinstance(sentinel.client, Redis)
    pool = sentinel.client.connection_pool
    assert pool.service_name == "svc" and pool.connection_kwargs["db"] == 3
    tls = connect(f"rediss://127.0.0.1:6380/0?ssl_ca_certs={ca}", 1.0)
    assert tls.client.connection_pool.connection_kwargs["ssl_ca_certs"] == str(ca)
    assert connect("unix:///tmp/redis.sock?db=2", 1.0).client.connection_pool


def test_a_tls_file_that_is_not_there_is_refused_at_construction_naming_tls(
    tmp_path: Path,
) -> None:
    url = f"rediss://u:hunter2@127.0.0.1:1/0?ssl_ca_certs={tmp_path / 'missing.pem'}"
    with pytest.raises(m.SharedQuotaError, match="TLS: ssl_ca_certs=") as quota:
        m.AsyncMagisterium(token="t", shared_quota=url)
    with pytest.raises(m.CacheError, match="TLS: ssl_ca_certs=") as cache:
        m.AsyncMagisterium(token="t", cache=url)
    assert "hunter2" not in str(quota.value) + str(cache.value)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisServer, Path, Path]]:
    """A ``redis-server`` speaking TLS alone (a certificate for 127.0.0.1), and another
    CA that did not sign it."""
    key, cert, other_key, other = (tmp_path / n for n in ("k.pem", "c.pem", "ok.pem", "o.pem"))
    for k, c in ((key, cert), (other_key, other)):
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(k),
            "-out", str(c),
        )  # fmt: skip
    server = RedisServer()
    server.options = [
        "--port", "0", "--tls-port", str(server.port), "--tls-cert-file", str(cert),
        "--tls-key-file", str(key), "--tls-auth-clients", "no", "--requirepass", "hunter2",
    ]  # fmt: skip
    for running in _servers(server):
        yield running, cert, other


async def test_rediss_with_the_test_s_ca_and_a_wrong_ca_named_as_tls(
    emulator: Emulator, tls_server: tuple[RedisServer, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    server, cert, other = tls_server
    good = f"rediss://:hunter2@127.0.0.1:{server.port}/0?ssl_ca_certs={cert}"
    async with m.AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, shared_quota=good, cache=good
    ) as client:
        await client.fetch("10234")
        assert await client.fetch("10234") is not None
    assert emulator.stats.count(skill="document_fetch") == 1  # the cache over TLS
    assert caplog.records == []  # and the quota: no fallback
    # A CA that did not sign the server's certificate: refused at every call, never taken
    # for an outage (no fallback, no bypass), the password masked. The file is there, so
    # the client is made: the certificate is seen at the first call's handshake.
    wrong = f"rediss://:hunter2@127.0.0.1:{server.port}/0?ssl_ca_certs={other}"
    options: Any = {"token": emulator.token, "base_url": emulator.base_url}
    errors: list[m.MagisteriumError] = []
    for option, error in (("shared_quota", m.SharedQuotaError), ("cache", m.CacheError)):
        async with m.AsyncMagisterium(**options, **{option: wrong}) as client:
            for _ in range(2):
                with pytest.raises(error, match="TLS: the certificate of ") as caught:
                    await client.fetch("10234")
                errors.append(caught.value)
    assert emulator.stats.count(skill="document_fetch") == 1  # nothing sent meanwhile
    assert caplog.records == []
    for caught_error in errors:
        text = str(caught_error)
        assert "ssl_ca_certs" in text
        assert f"127.0.0.1:{server.port}" in text
        assert "hunter2" not in text + repr(caught_error)
        assert caught_error.__cause__ is None


@pytest.fixture
def guarded() -> Iterator[RedisServer]:
    """A ``redis-server`` that asks for a password."""
    yield from _servers(RedisServer(["--requirepass", "hunter2"]))


async def test_a_wrong_redis_password_is_a_refusal_at_each_call_never_an_outage(
    emulator: Emulator, guarded: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # No wait mends a password Redis refuses: no fallback to a local share, no bypass of
    # the cache, but the call refused naming it (the password masked, as ever).
    options: Any = {"token": emulator.token, "base_url": emulator.base_url}
    for password in ("Wr0ngPass", ""):
        url = f"redis://:{password}@127.0.0.1:{guarded.port}/0".replace(":@", "@")
        for option, error in (("shared_quota", m.SharedQuotaError), ("cache", m.CacheError)):
            async with m.AsyncMagisterium(**options, **{option: url}) as client:
                for _ in range(2):
                    with pytest.raises(error, match="refused the sign-in") as caught:
                        await client.fetch("10234")
                    assert "Wr0ngPass" not in str(caught.value) + repr(caught.value)
                    assert "check the user and password in the URL" in str(caught.value)
    assert emulator.stats.count(skill="document_fetch") == 0  # nothing was sent
    assert caplog.records == []


async def test_the_options_redis_py_takes_in_a_url_work_at_every_call(
    emulator: Emulator, guarded: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Only an option the connection takes passes the check at construction: these do.
    options = {
        "username": "default",
        "password": "hunter2",
        "db": "0",
        "client_name": "sdk",
        "encoding": "utf-8",
        "encoding_errors": "strict",
        "health_check_interval": "30",
        "max_connections": "8",
        "retry_on_timeout": "true",
        "socket_connect_timeout": "5",
        "socket_keepalive": "true",
        "socket_read_size": "65536",
        "socket_timeout": "5",
    }
    url = f"{guarded.url}?" + "&".join(f"{k}={v}" for k, v in options.items())
    await check_redis(url, 5.0)
    config: Any = {"token": emulator.token, "base_url": emulator.base_url}
    for _ in range(2):
        async with m.AsyncMagisterium(**config, cache=url, shared_quota=url) as client:
            assert (await client.fetch("10234")).id == "10234"
    assert emulator.stats.count(skill="document_fetch") == 1  # the second from the cache
    assert caplog.records == []


def _acl(server: RedisServer, *rule: str) -> None:
    subprocess.run(
        ["redis-cli", "-p", str(server.port), "-a", "hunter2", "--no-auth-warning", "ACL",
         "SETUSER", *rule],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip


async def test_check_redis_tells_a_refusal_from_no_answer_before_anything_is_written(
    guarded: RedisServer,
) -> None:
    # The CLI and the harvest ask before they make any file: a refusal is the feature's
    # error saying "refused" (exit 2), no answer is RedisUnavailable (the fallback's).
    _acl(guarded, "keys-elsewhere", "on", ">pw", "~other:*", "+@all")
    _acl(guarded, "no-scripts", "on", ">pw", "~*", "+@all", "-eval")
    at = f"127.0.0.1:{guarded.port}/0"
    await check_redis(f"redis://:hunter2@{at}", 5.0)
    refused = {
        f"redis://:Wr0ngPass@{at}": "refused the sign-in",
        f"redis://{at}": "refused the sign-in",
        f"redis://keys-elsewhere:Wr0ngPass@{at}": "refused the sign-in",
        f"redis://keys-elsewhere:pw@{at}": "refused a command to this user",
        f"redis://no-scripts:pw@{at}": "refused a command to this user",
    }
    for url, words in refused.items():
        for error in (m.SharedQuotaError, m.CacheError):
            with pytest.raises(error, match=f"^--redis: .*{words}") as caught:
                await check_redis(url, 5.0, error=error, what="--redis")
            assert "Wr0ngPass" not in str(caught.value) + repr(caught.value)
            assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(RedisUnavailable, match=r"^--cache: Redis at .* did not answer") as gone:
        await check_redis("redis://:Wr0ngPass@127.0.0.1:1/0", 5.0, what="--cache")
    assert "Wr0ngPass" not in str(gone.value) and "refused the" not in str(gone.value)
    assert isinstance(gone.value, m.MagisteriumError)
    with pytest.raises(m.CacheError, match="unknown scheme"):
        await check_redis("redis+foo://:Wr0ngPass@h:1", 5.0, error=m.CacheError)
    counted = connect(f"redis://:hunter2@{at}", 5.0)
    try:
        assert await counted.client.dbsize() == 0  # the checks wrote nothing
    finally:
        await counted.aclose()


async def test_check_redis_on_a_wrong_ca_says_tls_refused(
    tls_server: tuple[RedisServer, Path, Path],
) -> None:
    server, cert, other = tls_server
    url = f"rediss://:hunter2@127.0.0.1:{server.port}/0?ssl_ca_certs="
    await check_redis(url + str(cert), 5.0)
    with pytest.raises(m.SharedQuotaError, match=r"TLS: the certificate of .* was refused"):
        await check_redis(url + str(other), 5.0)


# A Cluster: the quota, the cache and the sign-in ----------------------------------------


async def test_four_processes_on_a_cluster_share_one_quota(
    emulator: Emulator, cluster: RedisClusterServers
) -> None:
    workers, each = 4, 8
    results = await run_quota_workers(emulator, cluster.url, workers, each)
    assert sum(r["errors"] for r in results) == 0
    assert emulator.stats.count(outcome="rate_limited") == 0
    times = admitted_times(emulator)
    assert len(times) == workers * each
    assert max_in_window(times, PERIOD) == LIMIT  # the quota used, never exceeded


async def test_a_cache_on_a_cluster_serves_the_next_client_without_a_request(
    cluster: RedisClusterServers,
) -> None:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        options: Any = {"token": emu.token, "base_url": emu.base_url, "cache": cluster.url}
        options["rate_limits"] = m.RateLimits.unlimited()
        async with m.AsyncMagisterium(**options) as one:
            original = await one.fetch("10234")
        async with m.AsyncMagisterium(**options) as two:
            assert await two.fetch("10234") == original
            assert two.cache_stats.hits == 1
        assert emu.stats.count(skill="document_fetch") == 1


async def test_an_application_s_client_is_used_for_quota_and_cache_and_left_open(
    emulator: Emulator, redis_server: Any
) -> None:
    from redis.asyncio import Redis

    app: Any = Redis(host="127.0.0.1", port=redis_server.port)
    try:
        async with m.AsyncMagisterium(
            token=emulator.token, base_url=emulator.base_url, shared_quota=app, cache=app
        ) as client:
            await client.fetch("10234")
            assert await client.fetch("10234") is not None
        assert await app.keys("magisterium:{*}:default:state")  # the quota went there
        assert await app.keys("magisterium:cache:*")  # and the cache
        assert emulator.stats.count(skill="document_fetch") == 1
        assert await app.ping()  # still the application's, still open
    finally:
        await app.aclose()


async def test_an_application_s_cluster_client_is_used_and_left_open(
    cluster: RedisClusterServers,
) -> None:
    from redis.asyncio import RedisCluster

    app: Any = RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    try:
        store = open_store(app, CachePolicy())
        assert store is not None and "RedisCluster" in store.where
        assert await store.claim("app", 5.0, "me") == (None, True)
        await store.put("app", b"answer", 100.0, 0.0)
        assert await store.claim("app", 5.0, "me") == (b"answer", False)
        await store.aclose()
        assert await app.get("magisterium:cache:{app}") == b"answer"  # still open
        assert await app.ping()  # and fit for the application's own commands
    finally:
        await app.aclose()


async def test_the_sign_in_on_a_cluster_is_refreshed_once_by_many_clients(
    auth_server: FakeAuthServer, cluster: RedisClusterServers, clock: JumpClock
) -> None:
    await sign_in(auth_server, cluster.url)
    clients = [
        m.AsyncMagisterium(
            base_url=auth_server.base_url,
            credentials=cluster.url,
            rate_limits=m.RateLimits.unlimited(),
            clock=clock,
        )
        for _ in range(4)
    ]
    try:
        await asyncio.gather(*(c.search("grace") for c in clients))
        clock.time += auth_server.lifetime
        await asyncio.gather(*(c.search("grace") for c in clients))
    finally:
        for c in clients:
            await c.aclose()
    assert auth_server.refreshes == 1 and auth_server.invalid_grants == 0


# Sentinel: followed through a failover ---------------------------------------------------


async def test_the_quota_follows_a_sentinel_failover_mid_run(
    emulator: Emulator, sentinel: SentinelServers
) -> None:
    quota = SharedQuota(sentinel.url, timeout=0.5, retry_interval=0.2)
    limits = m.RateLimits(LIMIT, 2, period=PERIOD, safety_margin=MARGIN)
    async with m.AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, shared_quota=quota, rate_limits=limits
    ) as client:
        await asyncio.gather(*(client.search(f"before {i}") for i in range(3)))

        async def calls() -> None:
            for i in range(12):  # through the failover, one after another
                await client.search(f"during {i}")

        # SIGKILL of the primary, the replica promoted, while the calls go on.
        await asyncio.gather(calls(), asyncio.to_thread(sentinel.fail_over))
        await asyncio.gather(*(client.search(f"after {i}") for i in range(3)))
    assert emulator.stats.count(outcome="rate_limited") <= 1
    promoted = connect(f"redis://127.0.0.1:{sentinel.replica.port}/0", 5.0)
    try:
        assert await promoted.client.keys("magisterium:{*}:default:state")
    finally:
        await promoted.aclose()


async def test_the_sign_in_through_sentinel(
    auth_server: FakeAuthServer, sentinel: SentinelServers, clock: JumpClock
) -> None:
    await sign_in(auth_server, sentinel.url)
    async with m.AsyncMagisterium(
        base_url=auth_server.base_url, credentials=sentinel.url,
        rate_limits=m.RateLimits.unlimited(), clock=clock,
    ) as client:  # fmt: skip
        clock.time += auth_server.lifetime
        assert await client.search("grace") == []
    assert auth_server.refreshes == 1


async def test_check_redis_through_sentinel_cluster_and_an_application_s_client(
    sentinel: SentinelServers, cluster: RedisClusterServers
) -> None:
    await check_redis(sentinel.url, 5.0)
    await check_redis(cluster.url, 5.0)
    primary = sentinel.url.replace("redis+sentinel://", "redis+sentinel://nobody:Wr0ngPass@")
    with pytest.raises(m.CacheError, match=r"Redis at .* refused the sign-in") as caught:
        await check_redis(primary, 5.0, error=m.CacheError, what="the cache")
    assert "Wr0ngPass" not in str(caught.value)
    with pytest.raises(m.SharedQuotaError, match=r"the Sentinels at .* refused the sign-in"):
        await check_redis(
            f"{sentinel.url}?sentinel_username=nobody&sentinel_password=Wr0ngPass", 5.0
        )
    from redis.asyncio import Redis

    app: Any = Redis(host="127.0.0.1", port=sentinel.master_port())
    try:
        await check_redis(app, 5.0)
        assert await app.ping()  # the application's, left open
    finally:
        await app.aclose()
