"""The ``emulator`` command's arguments: a bad one is refused before anything listens."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest

from magisterium_async._cli import build_parser, main
from magisterium_async._cli._emulator import _config, _quota
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._config import RateLimits, parse_quota
from magisterium_async.testing import EmulatorConfig
from tests.cli.helpers import TIMEOUT, clean_env


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bound as is, 99999 would listen on 34463 (the port modulo 65536) and say so.
    assert main(["emulator", "--port", port]) == 2
    assert f"must be a port from 0 to 65535, got {port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--default-limit", "-5"], "argument --default-limit: must be > 0, got -5"),
        (["--expensive-limit", "0"], "argument --expensive-limit: must be > 0, got 0"),
        (["--period", "nan"], "argument --period: must be > 0, got nan"),
        (["--token-lifetime", "-1"], "argument --token-lifetime: must be > 0, got -1"),
        (["--token", ""], "argument --token: must not be empty or blank"),
    ],
)
def test_a_bad_value_names_its_flag_and_exits_2(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["emulator", *flags]) == 2
    assert says in capsys.readouterr().err


def test_an_address_it_cannot_listen_on_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["emulator", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on --host 127.0.0.1 --port {port}: " in err


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


def _banner(*flags: str) -> str:
    """What ``magisterium-async emulator`` prints before it serves, then stopped by SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", "emulator", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdout is not None
    try:
        lines = []
        while (line := proc.stdout.readline()) and not line.startswith("Serving until"):
            lines.append(line)
            if flags and flags[-1] == "--json":
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0
    return "".join(lines)


def test_the_banner_says_which_faults_it_injects() -> None:
    assert "  faults: none\n" in _banner()
    shown = _banner("--error-rate", "0.1", "--drop-rate", "0.05", "--latency", "0.2", "--seed", "7")
    assert (
        "  faults: HTTP 502/503 on 10%, connections dropped on 5% of requests; "
        "0.2 s added to every answer (seed 7)\n"
    ) in shown
    record = json.loads(_banner("--rate-limit-rate", "0.5", "--json"))
    assert record["faults"]["rate_limit_rate"] == 0.5 and record["faults"]["seed"] == 0
    assert json.loads(_banner("--json"))["faults"] is None
