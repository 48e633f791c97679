"""The status line of a command that waits: on a terminal it says what for; on a pipe,
nothing."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from magisterium_async._cli._status import waiting_text

from .helpers import TIMEOUT, clean_env


def test_ask_on_a_terminal_shows_that_it_waits_and_clears_the_line() -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "magisterium_async", "ask", "--emulator", "what is grace?"],
            stdout=subprocess.PIPE,
            stderr=follower,
            env=clean_env(),
            timeout=TIMEOUT,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert proc.returncode == 0
    text = shown.decode()
    assert "asking catholic_qa…" in text
    assert text.endswith("\r\x1b[2K")  # cleared: the answer is not printed after it
    assert b"Sources" in proc.stdout and b"\x1b" not in proc.stdout


def test_ask_on_a_pipe_writes_no_status() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", "ask", "--emulator", "what is grace?"],
        capture_output=True,
        env=clean_env(),
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0 and proc.stderr == b""


def test_the_wait_for_quota_names_its_end_in_clock_time() -> None:
    noon = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    assert waiting_text(57.2, lambda: noon) == (
        "waiting for quota: next request in 57s (at 12:00:57)"
    )
    assert waiting_text(0.2, lambda: noon).startswith("waiting for quota: next request in 1s")
