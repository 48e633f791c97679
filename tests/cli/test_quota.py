"""``quota``: what is left of the token's quota, from this process or from the shared quota
in Redis (every process's requests), against the emulator with its limits on; it sends
nothing."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

from magisterium_async.testing import Emulator, EmulatorConfig, RateLimitConfig
from tests.cli.helpers import cli
from tests.helpers.credentials import PASSWORD, require_password
from tests.helpers.redis_server import RedisServer


def test_quota_without_a_shared_quota_is_this_processs_whole_quota() -> None:
    run = cli("quota", "--emulator", "--quota", "10/3", "--json")
    assert run.code == 0, run.err
    record = json.loads(run.out)
    assert record["shared"] is False
    default, expensive = record["pools"]["default"], record["pools"]["expensive"]
    assert (default["limit"], default["used"], default["left"]) == (10.0, 0, 10)
    assert (expensive["limit"], expensive["left"], expensive["next_start_in"]) == (3.0, 3, 0.0)

    shown = cli("quota", "--emulator", "--emulator-limits")
    assert shown.code == 0, shown.err
    assert "default (every skill but ask): 0 of 15 per 60 s used, 15 left; next request now" in (
        shown.out
    )
    assert "this process's view only" in shown.out and "--redis" in shown.out


def test_quota_without_a_shared_quota_needs_no_token(tmp_path: Path) -> None:
    """Nothing to read but this process's view: no sign-in, no $MAGISTERIUM_TOKEN."""
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    run = cli("quota", "--quota", "10/3", "--json", env=home)
    assert run.code == 0, run.err
    record = json.loads(run.out)
    assert record["shared"] is False and record["pools"]["default"]["left"] == 10
    # With a shared quota the token says whose quota it is: it is needed then.
    shared = cli("quota", "--redis", "redis://127.0.0.1:9", env=home)
    assert shared.code == 3 and "no API token" in shared.err
    assert list(tmp_path.iterdir()) == []


async def test_quota_counts_every_processs_requests_from_redis(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    limits = RateLimitConfig(default=40, expensive=2, period=60.0)
    async with Emulator(EmulatorConfig(rate_limits=limits)) as emulator:
        env = {"MAGISTERIUM_TOKEN": emulator.token, "MAGISTERIUM_BASE_URL": emulator.base_url}
        argv = ["--quota", "40/2", "--redis", redis_server.url]
        harvest = await asyncio.to_thread(
            cli, "harvest", *argv, "-q", "grace", "--out", "d.jsonl", cwd=tmp_path, env=env
        )
        assert harvest.code == 0, harvest.err
        sent = emulator.stats.total
        assert sent > 1  # a search and its fetches
        # Another process, told of the Redis by the environment, sees them all.
        env["MAGISTERIUM_REDIS_URL"] = redis_server.url
        run = await asyncio.to_thread(cli, "quota", "--quota", "40/2", "--json", env=env)
        assert run.code == 0, run.err
        record = json.loads(run.out)
        assert record["shared"] is True
        default = record["pools"]["default"]
        assert (default["used"], default["left"]) == (sent, 40 - sent)
        assert default["shared"] is True and record["pools"]["expensive"]["used"] == 0
        shown = await asyncio.to_thread(cli, "quota", "--quota", "40/2", env=env)
        assert f"{sent} of 40 per 60 s used, {40 - sent} left" in shown.out
        assert "from the shared quota in Redis" in shown.out
        assert emulator.stats.total == sent  # reading the quota sent nothing


def test_quota_with_redis_down_says_it_is_this_processs_view() -> None:
    with socket.socket() as sock:  # a free port: nothing listens there
        sock.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    args = ("quota", "--emulator", "--emulator-limits", "--redis", url)
    run = cli(*args, "--json")
    assert run.code == 0, run.err
    record = json.loads(run.out)
    assert record["shared"] is False and record["pools"]["default"]["left"] == 15
    assert "Redis did not answer: this process's view only" in cli(*args).out


def test_a_quota_of_part_of_a_request_is_not_said_lowered_by_the_service() -> None:
    """`quota --quota 2.9/1`: 2.9 a minute allows 2 starts; nothing was refused."""
    run = cli("quota", "--quota", "2.9/1.5")
    assert run.code == 0, run.err
    assert "lowered" not in run.out and "refused" not in run.out
    assert "default (every skill but ask): 0 of 2 per 60 s used, 2 left" in run.out
    # Below 1 a period, one start per longer window: never lowered, whatever the float.
    slow = cli("quota", "--quota", "0.11/0.055")
    assert slow.code == 0, slow.err
    assert "lowered" not in slow.out and "0 of 0.11 per 60 s used" in slow.out


async def test_a_redis_that_refuses_is_said_as_a_refusal_and_exit_2_in_every_command(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The same URL, a password missing or wrong: one refusal, one exit code, whatever the
    command and wherever the URL was given (#50, 3); nothing is made."""
    good = await require_password(redis_server)
    missing = redis_server.url
    wrong = good.replace(PASSWORD, "not-the-password")
    cases = [
        (["quota", "--emulator", "--emulator-limits", "--redis", missing], {}, "--redis"),
        (["quota", "--quota", "15/2"], {"MAGISTERIUM_REDIS_URL": wrong}, "$MAGISTERIUM_REDIS_URL"),
        (["search", "grace", "--emulator", "--cache", wrong], {}, "--cache"),
        (["search", "grace", "--emulator"], {"MAGISTERIUM_CACHE": missing}, "$MAGISTERIUM_CACHE"),
        (["search", "grace", "--credentials", missing], {}, "--credentials"),
        (
            ["harvest", "--emulator", "-q", "grace", "--out", "d.jsonl", "--redis", wrong],
            {},
            "--redis",
        ),
    ]
    for argv, env, named in cases:
        env = {"MAGISTERIUM_TOKEN": "sk-test", **env}
        run = await asyncio.to_thread(cli, *argv, cwd=tmp_path, env=env)
        assert run.code == 2, (argv, run.err)
        [line] = run.err.splitlines()
        assert line.startswith(f"magisterium-async: error: {named}: Redis at redis://"), line
        assert "refused the sign-in" in line and "check the user and password" in line
        assert PASSWORD not in line and "not-the-password" not in line
    assert os.listdir(tmp_path) == []
    answered = await asyncio.to_thread(
        cli, "quota", "--quota", "15/2", "--redis", good, "--json", env={"MAGISTERIUM_TOKEN": "t"}
    )
    assert answered.code == 0 and json.loads(answered.out)["shared"] is True, answered.err
