"""The ``emulator`` command: what it serves and says; an address it cannot have refused.

(Its flags' bad values are in ``test_parser.py``, with every other flag's.)
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest

from magisterium_async._cli import main
from tests.cli.helpers import TIMEOUT, clean_env


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


@pytest.mark.parametrize(
    ("flags", "quota"),
    [
        ((), "unlimited"),
        (("--limits",), "15/2/60"),
        # A limit flag alone turns the limits on, the others keeping the Pro plan's numbers.
        (("--default-limit", "30"), "30/2/60"),
        (("--period", "10", "--window", "fixed"), "15/2/10"),
    ],
)
def test_no_limits_by_default_and_the_quota_it_prints_is_the_one_it_keeps(
    flags: tuple[str, ...], quota: str
) -> None:
    """What it prints is what the client reads: the same limits on both sides."""
    assert json.loads(_banner(*flags, "--json"))["quota"] == quota


def test_the_banner_says_its_limits_and_which_faults_it_injects() -> None:
    plain = _banner()
    assert "  faults: none\n" in plain and "  rate limits: none (" in plain
    assert "restart with --limits" in plain and "MAGISTERIUM_QUOTA=unlimited" in plain
    limited = _banner("--limits", "--window", "fixed")
    assert "  rate limits: 15 default / 2 expensive requests per 60 s (fixed window)\n" in limited
    shown = _banner("--error-rate", "0.1", "--drop-rate", "0.05", "--latency", "0.2", "--seed", "7")
    assert (
        "  faults: HTTP 502/503 on 10%, connections dropped on 5% of requests; "
        "0.2 s added to every answer (seed 7)\n"
    ) in shown
    record = json.loads(_banner("--rate-limit-rate", "0.5", "--json"))
    assert record["faults"]["rate_limit_rate"] == 0.5 and record["faults"]["seed"] == 0
    assert json.loads(_banner("--json"))["faults"] is None
