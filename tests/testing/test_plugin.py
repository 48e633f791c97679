"""The pytest plugin's fixtures, used here exactly as a user's test suite would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from magisterium_async import AsyncMagisterium
from magisterium_async.testing import Emulator, EmulatorConfig
from magisterium_async.testing import pytest_plugin as plugin


def test_the_plugin_is_registered(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("magisterium_async")
    assert plugin.HAS_PYTEST_ASYNCIO


async def test_emulator_fixture_has_limits_lifted(magisterium_emulator: Emulator) -> None:
    assert magisterium_emulator.config.rate_limits is None
    assert magisterium_emulator.base_url.startswith("http://127.0.0.1:")
    async with (
        aiohttp.ClientSession() as session,
        session.get(magisterium_emulator.card_url) as response,
    ):
        assert response.status == 200


class TestConfigOverride:
    @pytest.fixture
    def magisterium_emulator_config(self) -> EmulatorConfig:
        return EmulatorConfig(tokens={"custom": "enterprise"}, max_results=2)

    async def test_the_override_is_used(self, magisterium_emulator: Emulator) -> None:
        assert magisterium_emulator.token == "custom"
        assert magisterium_emulator.config.max_results == 2


class TestA2A10:
    # A suite runs against the emulator speaking A2A 1.0 by overriding the config: the
    # client fixture, made as always, finds the dialect itself.
    @pytest.fixture
    def magisterium_emulator_config(self) -> EmulatorConfig:
        return EmulatorConfig(rate_limits=None, protocol="1.0")

    async def test_the_client_speaks_it(
        self, magisterium_client: AsyncMagisterium, magisterium_emulator: Emulator
    ) -> None:
        assert (await magisterium_client.search("Lumen Gentium"))[0].id == "10234"
        assert magisterium_client.protocol == "1.0"
        page = await magisterium_client.list_tasks()
        assert len(page.tasks) == 1


async def test_client_fixture_talks_to_the_emulator(
    magisterium_client: AsyncMagisterium, magisterium_emulator: Emulator
) -> None:
    results = await magisterium_client.search("Lumen Gentium")
    assert results[0].id == "10234"
    document = await magisterium_client.fetch("10234")
    assert document is not None
    assert document.title == "Lumen Gentium"
    assert await magisterium_client.fetch("1") is None
    assert magisterium_emulator.stats.count(skill="document_fetch", outcome="ok") == 2


_CONFTEST = """
import sys

sys.modules["pytest_asyncio"] = None  # as if it were not installed
pytest_plugins = ["magisterium_async.testing.pytest_plugin"]
"""

_TESTS = """
from magisterium_async.testing import pytest_plugin


def test_flag():
    assert pytest_plugin.HAS_PYTEST_ASYNCIO is False


def test_config(magisterium_emulator_config):
    assert magisterium_emulator_config.rate_limits is None


def test_emulator(magisterium_emulator):
    pass


def test_client(magisterium_client):
    pass
"""


def test_without_pytest_asyncio_the_fixtures_explain_themselves(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "test_user.py").write_text(_TESTS)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:asyncio",
            "-p",
            "no:magisterium_async",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "-p",
            "no:anyio",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "2 passed" in result.stdout, result.stdout + result.stderr
    assert "2 error" in result.stdout or "2 failed" in result.stdout, result.stdout
    assert result.stdout.count("need pytest-asyncio: pip install pytest-asyncio") >= 2
