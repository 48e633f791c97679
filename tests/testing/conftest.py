"""Fixtures for the emulator's tests: emulators on free ports and an HTTP session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from magisterium_async.testing import Emulator, EmulatorConfig

from .helpers import Wire

StartWire = Callable[..., Awaitable[Wire]]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain client session, closed after the test."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def start_wire(http: aiohttp.ClientSession) -> AsyncIterator[StartWire]:
    """Start an emulator with a given config (keyword arguments of EmulatorConfig)."""
    emulators: list[Emulator] = []

    async def start(config: EmulatorConfig | None = None, **fields: Any) -> Wire:
        if config is None:
            fields.setdefault("rate_limits", None)
            config = EmulatorConfig(**fields)
        emulator = await Emulator(config).start()
        emulators.append(emulator)
        return Wire(http, emulator)

    yield start
    for emulator in emulators:
        await emulator.stop()


@pytest.fixture
async def wire(start_wire: StartWire) -> Wire:
    """An emulator with default config, rate limits lifted."""
    return await start_wire()
