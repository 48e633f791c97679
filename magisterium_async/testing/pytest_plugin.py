"""pytest plugin: fixtures that start the emulator and a client pointed at it.

Registered through the ``pytest11`` entry point, so installing ``magisterium_async`` makes
these fixtures available to every test suite:

- ``magisterium_emulator_config``: the :class:`~magisterium_async.testing.EmulatorConfig`
  to use; the default lifts rate limits. Override it in a ``conftest.py`` or test module.
- ``magisterium_emulator``: a running :class:`~magisterium_async.testing.Emulator` on a
  free 127.0.0.1 port, stopped after the test.
- ``magisterium_client``: an ``AsyncMagisterium`` for that emulator with client-side rate
  limits lifted, closed after the test.

The last two are async fixtures and need pytest-asyncio; without it this module still
imports, and using them fails with a message saying to install it. Nothing heavy is
imported until a fixture is used.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from magisterium_async.testing import Emulator, EmulatorConfig

try:
    import pytest_asyncio

    HAS_PYTEST_ASYNCIO = True
except ImportError:  # pytest-asyncio is a test extra, not a runtime dependency
    HAS_PYTEST_ASYNCIO = False

__all__ = [
    "HAS_PYTEST_ASYNCIO",
    "magisterium_client",
    "magisterium_emulator",
    "magisterium_emulator_config",
]

_NEEDS_ASYNCIO = (
    "the magisterium_emulator and magisterium_client fixtures need pytest-asyncio: "
    "pip install pytest-asyncio"
)


@pytest.fixture
def magisterium_emulator_config() -> EmulatorConfig:
    """The emulator's configuration: the defaults with rate limits lifted."""
    from magisterium_async.testing import EmulatorConfig

    return EmulatorConfig(rate_limits=None)


if HAS_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def magisterium_emulator(
        magisterium_emulator_config: EmulatorConfig,
    ) -> AsyncIterator[Emulator]:
        """A running emulator on a free 127.0.0.1 port."""
        from magisterium_async.testing import Emulator

        async with Emulator(magisterium_emulator_config, host="127.0.0.1", port=0) as emulator:
            yield emulator

    @pytest_asyncio.fixture
    async def magisterium_client(magisterium_emulator: Emulator) -> AsyncIterator[Any]:
        """An ``AsyncMagisterium`` talking to :func:`magisterium_emulator`, limits lifted."""
        # Looked up at run time: the client may not exist yet when this plugin loads.
        sdk: Any = importlib.import_module("magisterium_async")
        async with sdk.AsyncMagisterium(
            token=magisterium_emulator.token,
            base_url=magisterium_emulator.base_url,
            rate_limits=sdk.RateLimits.unlimited(),
        ) as client:
            yield client

else:

    @pytest.fixture
    def magisterium_emulator() -> Any:
        """Unavailable: needs pytest-asyncio."""
        pytest.fail(_NEEDS_ASYNCIO, pytrace=False)

    @pytest.fixture
    def magisterium_client() -> Any:
        """Unavailable: needs pytest-asyncio."""
        pytest.fail(_NEEDS_ASYNCIO, pytrace=False)
