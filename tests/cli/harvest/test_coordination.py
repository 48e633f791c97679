"""Redis around a harvest of several processes: clear errors when it cannot serve, no
password in any message, and a private ``redis-server`` that leaves nothing behind."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli.harvest._coordination import (
    check_redis,
    private_redis,
    require_redis_py,
    shared_state_error,
)
from magisterium_async._errors import SharedStateError
from tests.helpers.redis_server import RedisServer

pytest.importorskip("redis")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://app:s3cret@cache.example/2", "rediss://app:***@cache.example/2"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("unix:///tmp/redis.sock", "unix:///tmp/redis.sock"),
    ],
)
async def test_a_url_is_named_without_its_password(url: str, shown: str) -> None:
    error = shared_state_error(SharedStateError(f"lost {url}"), url)
    assert str(error) == f"lost {shown}"


def test_redis_py_is_there_when_the_extra_is_installed() -> None:
    require_redis_py()


async def test_a_reachable_redis_passes(redis_server: RedisServer) -> None:
    await check_redis(redis_server.url)


async def test_an_unreachable_redis_is_a_connection_error_without_the_password() -> None:
    url = f"redis://:s3cret@127.0.0.1:{_closed_port()}/0"
    with pytest.raises(CliError) as caught:
        await check_redis(url)
    error = caught.value
    assert error.code == ExitCode.CONNECTION
    assert "cannot reach Redis at redis://:***@127.0.0.1" in str(error)
    assert "s3cret" not in str(error)


async def test_a_url_that_is_not_redis_is_a_usage_error() -> None:
    with pytest.raises(CliError) as caught:
        await check_redis("http://127.0.0.1:6379")
    assert caught.value.code == ExitCode.USAGE


def test_a_lost_redis_is_exit_5_and_lost_claims_exit_1_both_without_the_password() -> None:
    url = "redis://:s3cret@127.0.0.1:6379/0"
    lost = SharedStateError(f"the harvest's Redis at {url} went away")
    lost.__cause__ = ConnectionError("refused")
    error = shared_state_error(lost, url)
    assert error.code == ExitCode.CONNECTION and "s3cret" not in str(error)
    assert "redis://:***@127.0.0.1:6379/0" in str(error)
    assert shared_state_error(SharedStateError("claims lost"), url).code == ExitCode.ERROR


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server installed")
async def test_a_private_redis_serves_on_a_private_socket_and_is_removed_after() -> None:
    async with private_redis() as url:
        assert url.startswith("unix://")
        directory = Path(url.removeprefix("unix://")).parent
        assert directory.stat().st_mode & 0o077 == 0  # the user's alone
        await check_redis(url)
    assert not directory.exists()
