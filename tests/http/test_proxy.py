"""Proxies: the environment's by default, ``proxy=`` / ``--proxy``, ``trust_env=False``,
through a forward proxy on loopback, for the library and the command line."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

import pytest

import magisterium_async as m
from magisterium_async._errors import masked_url
from magisterium_async._http import Proxies
from magisterium_async.testing import Emulator, EmulatorConfig
from tests.conftest import PROXY_VARIABLES
from tests.helpers.forward_proxy import ForwardProxy

SCRIPT = """
import asyncio, magisterium_async as m

async def main():
    async with m.AsyncMagisterium(rate_limits=m.RateLimits.unlimited()) as client:
        print(len(await client.search("grace")))

asyncio.run(main())
"""


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        yield emu


@pytest.fixture
async def proxy() -> AsyncIterator[ForwardProxy]:
    async with ForwardProxy() as running:
        yield running


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in PROXY_VARIABLES and not k.startswith("MAGISTERIUM_")
    }
    env.update(extra)
    return env


async def _run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _posts(proxy: ForwardProxy, emulator: Emulator) -> list[str]:
    return [s.target for s in proxy.seen if s.method == "POST" and s.target == emulator.base_url]


async def test_with_only_http_proxy_set_a_library_script_goes_through_it(
    emulator: Emulator, proxy: ForwardProxy
) -> None:
    env = _env(
        HTTP_PROXY=proxy.url,
        MAGISTERIUM_TOKEN=emulator.token,
        MAGISTERIUM_BASE_URL=emulator.base_url,
    )
    code, out, err = await _run("-c", SCRIPT, env=env)
    assert code == 0, err
    assert int(out) > 0
    assert _posts(proxy, emulator) == [emulator.base_url]


@pytest.mark.parametrize("how", ["environment", "--proxy"])
async def test_the_command_line_goes_through_the_proxy(
    emulator: Emulator, proxy: ForwardProxy, how: str
) -> None:
    env = _env(MAGISTERIUM_TOKEN=emulator.token)
    argv = ["-m", "magisterium_async", "search", "grace", "--json"]
    argv += ["--base-url", emulator.base_url]
    if how == "environment":
        env["HTTP_PROXY"] = proxy.url
    else:
        argv += ["--proxy", proxy.url]
    code, out, err = await _run(*argv, env=env)
    assert code == 0, err
    assert out.startswith("[{")
    assert _posts(proxy, emulator) == [emulator.base_url]


async def test_no_proxy_and_trust_env_false_go_straight_there(
    emulator: Emulator, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    async with m.AsyncMagisterium(
        emulator.token, base_url=emulator.base_url, trust_env=False
    ) as client:
        assert await client.search("grace")
    host = emulator.base_url.split("//")[1].split(":")[0]
    monkeypatch.setenv("no_proxy", f"example.org,{host}")
    async with m.AsyncMagisterium(emulator.token, base_url=emulator.base_url) as client:
        assert await client.search("grace")
    assert proxy.seen == []
    monkeypatch.delenv("no_proxy")
    async with m.AsyncMagisterium(emulator.token, base_url=emulator.base_url) as client:
        assert await client.search("grace")
    assert _posts(proxy, emulator) == [emulator.base_url]


async def test_the_proxy_credentials_go_to_the_proxy_and_are_never_shown(
    emulator: Emulator,
) -> None:
    async with ForwardProxy(credentials=("alice", "s3cr:et")) as proxy:
        host = proxy.url.split("//")[1]
        good = f"http://alice:s3cr%3Aet@{host}"
        async with m.AsyncMagisterium(
            emulator.token, base_url=emulator.base_url, proxy=good
        ) as client:
            assert "s3cr" not in repr(client) and host in repr(client)
            assert await client.search("grace")
        assert proxy.seen[-1].proxy_authorization is not None
        bad = f"http://alice:wrong-s3cret@{host}"
        async with m.AsyncMagisterium(
            emulator.token, base_url=emulator.base_url, proxy=bad, max_retries=0
        ) as client:
            with pytest.raises(
                m.UnexpectedStatusError, match="proxy asks for credentials"
            ) as raised:
                await client.search("grace")
        assert raised.value.status_code == 407
        assert "s3cret" not in str(raised.value) and raised.value.__context__ is None


async def test_an_https_target_is_tunnelled_with_connect(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    client = m.AsyncMagisterium("t", base_url="https://magisterium.invalid/a2a", max_retries=0)
    async with client:
        with pytest.raises(m.APIConnectionError):
            await client.search("grace")
    assert [(s.method, s.target) for s in proxy.seen] == [("CONNECT", "magisterium.invalid:443")]


def test_the_environment_is_read_as_requests_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://upper:1")
    monkeypatch.setenv("https_proxy", "proxy.corp:3128")  # lower case wins; no scheme: http
    monkeypatch.setenv("NO_PROXY", ".internal,10.0.0.1")
    proxies = Proxies()
    assert proxies.for_url("https://api.example.com/a2a") == "http://proxy.corp:3128"
    assert proxies.for_url("http://api.example.com/a2a") is None  # no HTTP_PROXY
    assert proxies.for_url("https://svc.internal/a2a") is None
    assert proxies.for_url("https://10.0.0.1:8443/") is None
    assert Proxies(trust_env=False).for_url("https://api.example.com/") is None
    explicit = Proxies("http://p:8080").for_url("https://svc.internal/")
    assert explicit == "http://p:8080"  # proxy= applies to all


def test_a_proxy_that_is_not_http_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://bob:pw123@proxy:1080")
    with pytest.raises(ValueError, match=r"\$HTTPS_PROXY .*SOCKS") as raised:
        m.AsyncMagisterium("t")
    assert "pw123" not in str(raised.value)
    with pytest.raises(ValueError, match=r"^proxy "):
        m.AsyncMagisterium("t", trust_env=False, proxy="ftp://proxy")
    assert masked_url("http://u:p@h:1/x") == "http://u:***@h:1/x"
