"""The ``emulator`` command's arguments: a bad one is refused before anything listens."""

from __future__ import annotations

import pytest

from magisterium_async._cli import main


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bound as is, 99999 would listen on 34463 (the port modulo 65536) and say so.
    assert main(["emulator", "--port", port]) == 2
    assert f"must be a port from 0 to 65535, got {port}" in capsys.readouterr().err
