"""The ``emulator`` command's arguments: a bad one is refused before anything listens."""

from __future__ import annotations

import pytest

from magisterium_async._cli import build_parser


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bound as is, 99999 would listen on 34463 (the port modulo 65536) and say so.
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["emulator", "--port", port])
    assert exit.value.code == 2
    assert f"must be a port from 0 to 65535, got {port}" in capsys.readouterr().err
