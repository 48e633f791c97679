"""Fixtures of the rate-limit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from magisterium_async.testing import Emulator
from tests.helpers.quota import quota_config


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    """The emulator at :data:`~tests.helpers.quota.LIMIT` per
    :data:`~tests.helpers.quota.PERIOD` (a sliding window)."""
    async with Emulator(quota_config()) as emu:
        yield emu
