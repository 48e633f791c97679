"""The ``emulator`` command's arguments: a bad one is refused before anything listens."""

from __future__ import annotations

import pytest

from magisterium_async._cli import build_parser, main
from magisterium_async._cli._emulator import _config, _quota
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._config import RateLimits, parse_quota
from magisterium_async.testing import EmulatorConfig


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bound as is, 99999 would listen on 34463 (the port modulo 65536) and say so.
    assert main(["emulator", "--port", port]) == 2
    assert f"must be a port from 0 to 65535, got {port}" in capsys.readouterr().err


def config_for(*flags: str) -> EmulatorConfig:
    return _config(build_parser().parse_args(["emulator", *flags]))


def test_no_limits_by_default_and_the_pro_quota_one_flag_away() -> None:
    assert config_for().rate_limits is None
    assert _quota(config_for()) == "unlimited"
    assert _quota(config_for("--no-limits")) == "unlimited"
    pro = config_for("--limits").rate_limits
    assert pro is not None and (pro.default, pro.expensive, pro.period) == (15, 2, 60)
    assert pro.algorithm == "sliding"
    assert _quota(config_for("--limits")) == "15/2/60"
    # A limit flag alone turns the limits on, the others keeping the Pro plan's numbers.
    assert _quota(config_for("--default-limit", "30")) == "30/2/60"
    assert _quota(config_for("--period", "10", "--window", "fixed")) == "15/2/10"
    # What it prints is what the client reads: the same limits on both sides.
    assert parse_quota(_quota(config_for("--limits"))) == RateLimits.pro()
    assert parse_quota(_quota(config_for())) == RateLimits.unlimited()


def test_no_limits_and_a_limit_flag_contradict() -> None:
    with pytest.raises(CliError, match="--no-limits contradicts") as caught:
        config_for("--no-limits", "--limits")
    assert caught.value.code == ExitCode.USAGE
