"""The standalone ``emulator`` command, for tests that need a server outliving one command."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .helpers import TIMEOUT, clean_env


@dataclass
class Served:
    base_url: str
    token: str
    card_url: str
    """Where the banner says the agent card is."""


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """The standalone ``emulator`` command on a free port, told apart by its printed line."""
    yield from _serve()


@pytest.fixture(scope="module")
def served_v1() -> Iterator[Served]:
    """The same, speaking A2A 1.0 (``emulator --protocol 1.0``)."""
    yield from _serve("--protocol", "1.0")


def _serve(*flags: str) -> Iterator[Served]:
    command = ["emulator", "--port", "0", *flags]
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        card_url = ""
        for line in proc.stdout:
            if line.strip().startswith("protocol: "):  # "protocol: A2A 1.0 (agent card: URL)"
                card_url = line.rsplit("agent card: ", 1)[1].strip().rstrip(")")
            if line.strip().startswith("export "):
                values = dict(item.split("=", 1) for item in line.split()[1:])
                break
        else:
            pytest.fail(f"the emulator printed no export line: {proc.stderr.read()}")
        assert values["MAGISTERIUM_QUOTA"] == "unlimited"  # no limits unless --limits
        yield Served(values["MAGISTERIUM_BASE_URL"], values["MAGISTERIUM_TOKEN"], card_url)
    finally:
        proc.terminate()
        assert proc.wait(timeout=TIMEOUT) == 0  # SIGTERM stops it cleanly
        proc.stdout.close()
        proc.stderr.close()
