"""Signing in end to end against the emulator's authorization server: the issue's done-when.

Login by the browser redirect and by the pasted URL; a harvest across six token lifetimes
(virtual time: the emulator and the client share one clock, moved as documents arrive);
four processes sharing one file while refresh tokens rotate; a revoked sign-in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import magisterium_async as m
from magisterium_async._auth import StoredToken
from magisterium_async.testing import Emulator, EmulatorConfig, SyntheticCorpus
from tests.cli.helpers import TIMEOUT, LoginRun, clean_env
from tests.conftest import JumpClock
from tests.helpers.credentials import load_credentials
from tests.helpers.oauth_fake import redirect_location, sign_in
from tests.helpers.refresh_log import RefreshLog, assert_one_refresh_per_lifetime

WORKER = Path(__file__).parents[1] / "workers" / "auth_worker.py"
LIFETIME = 100.0


@pytest.fixture
def clock() -> JumpClock:
    return JumpClock()


@pytest.fixture
async def emulator(clock: JumpClock) -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        rate_limits=None,
        corpus=SyntheticCorpus(5000, seed=3),
        token_lifetime=LIFETIME,
        clock=clock,
    )
    async with Emulator(config) as emu:
        yield emu


async def test_cli_login_by_the_browser_redirect(emulator: Emulator, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    login = await LoginRun.start(emulator.base_url, path)
    url = await login.url()
    async with aiohttp.ClientSession() as session, session.get(url) as landed:
        assert landed.status == 200  # followed the 302 to the CLI's 127.0.0.1 listener
    run = await login.finish()
    assert run.code == 0, run.err
    stored = load_credentials(path)
    assert stored is not None and stored.issuer == emulator.issuer
    assert stored.access_token not in run.out + run.err
    assert emulator.stats.oauth.registrations == 1 and emulator.stats.oauth.tokens_issued == 1
    async with m.AsyncMagisterium(base_url=emulator.base_url, credentials=path) as client:
        assert len(await client.search("grace")) > 0


async def test_cli_login_by_the_pasted_url(emulator: Emulator, tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    login = await LoginRun.start(emulator.base_url, path)
    location = await redirect_location(await login.url())
    run = await login.finish((location + "\n").encode())
    assert run.code == 0, run.err
    assert load_credentials(path) is not None


async def test_a_harvest_across_six_token_lifetimes(
    emulator: Emulator, clock: JumpClock, tmp_path: Path, refreshes: RefreshLog
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(emulator, path)
    queries = [f"topic{i}" for i in range(95)]
    step = LIFETIME / 100  # virtual seconds per document received
    async with m.AsyncMagisterium(
        base_url=emulator.base_url,
        credentials=path,
        rate_limits=m.RateLimits.unlimited(),
        clock=clock,
    ) as client:
        source = client.token_source
        assert isinstance(source, StoredToken)
        h = client.harvest(queries, state=tmp_path / "state.db", concurrency=2)
        started = clock.now()
        async with h:
            async for _ in h:
                clock.time += step
        lifetimes = (clock.now() - started) / LIFETIME
    assert lifetimes >= 6, f"only {lifetimes:.1f} lifetimes: too few documents"
    assert h.stats.failed == 0 and h.failures == []
    assert h.stats.yielded == h.stats.unique_ids
    oauth = emulator.stats.oauth
    # About one refresh per lifetime: each a little before expiry, none after a refusal.
    assert int(lifetimes) <= refreshes.count <= int(lifetimes) + 1
    assert oauth.refreshes == refreshes.count
    assert oauth.rejected_tokens == 0 and oauth.invalid_grants == 0


@pytest.mark.slow
async def test_four_processes_on_one_file_never_reuse_a_rotated_refresh_token(
    tmp_path: Path,
) -> None:
    lifetime = 2.0
    config = EmulatorConfig(rate_limits=None, token_lifetime=lifetime)
    async with Emulator(config) as emulator:
        path = tmp_path / "credentials.json"
        await sign_in(emulator, path)
        workers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(WORKER),
                emulator.base_url,
                str(path),
                "4",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=clean_env(),
            )
            for _ in range(4)
        ]
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
        outputs = [await asyncio.wait_for(w.communicate(), 120) for w in workers]
        oauth = emulator.stats.oauth
    assert [w.returncode for w in workers] == [0, 0, 0, 0], [err for _, err in outputs]
    reports = [json.loads(out) for out, _ in outputs]
    assert oauth.invalid_grants == 0 and oauth.refresh_reuses == 0
    assert [r["failed"] for r in reports] == [0, 0, 0, 0]
    assert all(len(r["seen"]) == 4 for r in reports)
    # Every refresh shared by all four: one per lifetime, not one per process.
    assert oauth.refreshes == sum(r["refreshes"] for r in reports)
    assert_one_refresh_per_lifetime([t for r in reports for t in r["refreshed_at"]], lifetime)


async def test_a_revoked_sign_in_asks_to_log_in_again(
    emulator: Emulator, clock: JumpClock, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(emulator, path)
    assert emulator.oauth.revoke_refresh_tokens() == 1
    clock.time += LIFETIME
    async with m.AsyncMagisterium(
        base_url=emulator.base_url, credentials=path, clock=clock
    ) as client:
        with pytest.raises(m.AuthenticationError) as caught:
            await client.search("grace")
    assert isinstance(caught.value, m.LoginRequiredError)
    assert f"sign in again with `magisterium-async login --credentials {path}`" in str(caught.value)
    assert emulator.stats.oauth.invalid_grants == 1


async def test_a_revoked_sign_in_exits_3(
    emulator: Emulator, clock: JumpClock, tmp_path: Path
) -> None:
    path = tmp_path / "credentials.json"
    await sign_in(emulator, path)
    emulator.oauth.revoke_tokens()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "magisterium_async",
        "search",
        "grace",
        "--base-url",
        emulator.base_url,
        "--credentials",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 3
    assert b"magisterium-async login" in err and out == b""


async def run_cli(*args: str) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "magisterium_async",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_a_cli_harvest_stopped_by_a_revoked_sign_in_resumes_after_login(
    emulator: Emulator, tmp_path: Path
) -> None:
    path, out = tmp_path / "credentials.json", tmp_path / "docs.jsonl"
    await sign_in(emulator, path)
    emulator.oauth.revoke_tokens()
    common = ["--base-url", emulator.base_url, "--quota", "unlimited", "--out", str(out)]
    common += ["--credentials", str(path)]
    code, _, err = await run_cli("harvest", "-q", "grace", "-q", "mercy", *common)
    assert code == 3, err
    assert b"magisterium-async login" in err
    await sign_in(emulator, path)
    code, _, err = await run_cli("harvest", "-q", "grace", "-q", "mercy", "--resume", *common)
    assert code == 0, err
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids and len(ids) == len(set(ids))
