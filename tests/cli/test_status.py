"""The status line of a command that waits: on a terminal it says what for; on a pipe,
nothing."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from magisterium_async import (
    AsyncMagisterium,
    PoolEvent,
    RetryEvent,
    RetryPolicy,
    Timeouts,
)
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._status import Watch, status_line
from magisterium_async.testing import Emulator, EmulatorConfig, Fault, VirtualClock

from .helpers import TIMEOUT, clean_env, cli


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


# What a call waits for, in words ----------------------------------------------------------

NOON = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))


class _Client:
    """What a :class:`Watch` reads of its client: the timeout, the retries."""

    def __init__(self) -> None:
        self.timeouts = Timeouts.of(30)
        self.retry_policy = RetryPolicy(max_retries=2)


def _watch() -> tuple[Watch, _Client, VirtualClock]:
    clock = VirtualClock(start=100.0)
    watch = Watch("searching", "default", clock=clock, wall=lambda: NOON)
    client = _Client()
    watch.attach(cast(AsyncMagisterium, client))
    return watch, client, clock


def retried(
    clock: VirtualClock,
    delay: float,
    message: str = "",
    *,
    retry: int = 0,
    retry_after: float | None = None,
) -> RetryEvent:
    """The event of a retry in ``delay`` seconds: after a failure (``retry``, its number)
    or a 429 (``retry=0``)."""
    reason = "APITimeoutError" if retry else "rate_limited"
    return RetryEvent(
        "retried", "default", clock.now(), delay, "message/send", reason, message, retry, 2,
        retry_after,
    )  # fmt: skip


async def test_in_flight_it_says_the_attempt_and_when_it_times_out() -> None:
    watch, _, clock = _watch()
    assert watch.text() == "searching…"
    watch.on_event(PoolEvent("sent", "default", clock.now(), 0.0))
    assert watch.changed.is_set() and watch.attempts == 1
    await clock.advance(12)
    assert watch.text() == "searching… 12s, attempt 1 of 3, times out at 12:00:18"


async def test_before_a_retry_it_says_which_when_and_what_failed() -> None:
    watch, _, clock = _watch()
    watch.on_event(PoolEvent("sent", "default", clock.now(), 0.0))
    watch.changed.clear()
    watch.on_event(retried(clock, 4.0, "message/send timed out after 30 s", retry=1))
    assert watch.changed.is_set()
    assert watch.text() == (
        "searching: retry 1 of 2 at 12:00:04 (in 4s), after: timed out after 30 s"
    )
    await clock.advance(5)  # the retry is due: in flight again once sent
    watch.on_event(PoolEvent("sent", "default", clock.now(), 0.0))
    assert watch.text().startswith("searching… 0s, attempt 2 of 3, times out at ")


async def test_after_a_429_it_says_the_wait_the_service_asked_for() -> None:
    watch, _, clock = _watch()
    watch.on_event(retried(clock, 120.0, retry_after=3600.0))
    assert watch.text() == (
        "searching: next try at 12:02:00 (in 2m00s), "
        "after: rate limited by the service (HTTP 429; it asks to wait 1h00m)"
    )


async def test_waiting_for_quota_after_a_failure_says_both() -> None:
    watch, _, clock = _watch()
    watch.on_event(retried(clock, 0.5, "message/send failed: connection refused", retry=1))
    await clock.advance(1)
    watch.on_event(PoolEvent("waiting", "default", clock.now(), 56.0))
    assert watch.text() == (
        "searching: waiting for quota: next request in 56s (at 12:00:56), after: connection refused"
    )


async def test_the_wait_for_quota_names_its_end_in_clock_time() -> None:
    watch, _, clock = _watch()
    watch.on_event(PoolEvent("waiting", "expensive", clock.now(), 30.0))  # not this call's
    assert watch.text() == "searching…"
    watch.on_event(PoolEvent("waiting", "default", clock.now(), 57.2))
    assert watch.text() == "searching: waiting for quota: next request in 57s (at 12:00:57)"
    await clock.advance(57)
    assert watch.text().startswith("searching: waiting for quota: next request in 1s")
    watch.on_event(PoolEvent("sent", "default", clock.now(), 57.2))
    assert watch.text().startswith("searching… 0s, attempt 1 of 3")  # over once it is sent


async def test_an_end_a_day_away_or_past_any_clock_is_said_so() -> None:
    watch, client, clock = _watch()
    watch.on_event(PoolEvent("sent", "default", clock.now(), 0.0))
    client.timeouts = Timeouts.of(2 * 86400)
    assert watch.text().endswith("times out at 2026-12-03 12:00:00")
    client.timeouts = Timeouts.of(1e300)  # --timeout 1e300: as good as none
    assert watch.text().endswith("times out at never")


# Through the command line ------------------------------------------------------------------


def _on_a_terminal(*args: str, env: dict[str, str], until: bytes | None = None) -> tuple[int, str]:
    """The command with stderr on a terminal: its exit code and what the terminal showed;
    ``until``: Ctrl-C once the terminal shows it."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", *args],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=clean_env(**env),
    )
    os.close(follower)
    shown = b""
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], TIMEOUT)
            if not ready:
                pytest.fail(f"nothing shown for {TIMEOUT} s: {shown[-2000:]!r}")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            shown += chunk
            if until is not None and until in shown:
                proc.send_signal(signal.SIGINT)
                until = None
    finally:
        os.close(leader)
        code = proc.wait(TIMEOUT)
    return code, shown.decode()


def _frames(shown: str) -> list[str]:
    """The status lines one after the other, repaints of the same line once."""
    return [frame for frame in dict.fromkeys(shown.split("\r\x1b[2K")) if frame]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A base URL whose server accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/a2a"
    finally:
        server.close()


def test_a_server_that_never_answers_is_waited_for_in_words(silent_server: str) -> None:
    """The user's case: a blank screen, then "timed out" with three attempts unmentioned."""
    args = ["search", "grace", "--base-url", silent_server, "--timeout", "1", "--max-retries", "1"]
    code, shown = _on_a_terminal(*args, env={"MAGISTERIUM_TOKEN": "sk-test"})
    assert code == ExitCode.CONNECTION
    frames = _frames(shown)
    said = "\n".join(frames)
    assert re.search(r"searching… \ds, attempt 1 of 2, times out at \d\d:\d\d:\d\d", said)
    retry = r"searching: retry 1 of 1 at \d\d:\d\d:\d\d \(in \ds\), after: timed out after 1 s"
    assert re.search(retry, said), frames
    assert re.search(r"searching… \ds, attempt 2 of 2, times out at", said), frames
    assert frames[-1].startswith("magisterium-async: error: timed out: ")
    assert "(after 2 attempts); raise the timeout with --timeout SECONDS" in frames[-1]


async def test_a_429_with_a_long_retry_after_says_the_wait_and_its_end(tmp_path: Path) -> None:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        emulator.script(Fault.rate_limit(retry_after=3600), skill="document_search")
        args = ["search", "grace", "--base-url", emulator.base_url, "-v"]
        env = {"MAGISTERIUM_TOKEN": emulator.token}
        asked = b"(HTTP 429; it asks to wait 1h00m)"
        code, shown = await asyncio.to_thread(_on_a_terminal, *args, env=env, until=asked)
    assert code == ExitCode.INTERRUPTED
    said = "\n".join(_frames(shown))
    # -v: the log says the same wait, from the same event.
    assert re.search(
        r"INFO magisterium_async\.retry: message/send: rate limited \(HTTP 429; the service "
        r"asks to wait 1h00m\); retrying in 2m00s",
        said,
    ), said
    # The client waits at most RetryPolicy.max_retry_after (120 s) for a 429, then tries again.
    assert re.search(
        r"searching: next try at \d\d:\d\d:\d\d \(in 2m00s\), after: rate limited by the "
        r"service \(HTTP 429; it asks to wait 1h00m\)",
        said,
    ), said


def test_verbose_on_a_pipe_says_each_retry_and_the_attempts(silent_server: str) -> None:
    token = "sk-never-logged-1234"
    run = cli(
        "search", "grace", "--base-url", silent_server, "--timeout", "0.25", "--max-retries", "1",
        "-v", env={"MAGISTERIUM_TOKEN": token},
    )  # fmt: skip
    assert run.code == ExitCode.CONNECTION
    lines = run.err.splitlines()
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d INFO magisterium_async\.retry: message/send timed out after 0\.25 s; "
        r"retry 1 of 1 in [0-9.]+s",
        lines[0],
    ), lines
    assert lines[-1].endswith("(after 2 attempts); raise the timeout with --timeout SECONDS")
    assert token not in run.err
    quiet = cli("search", "grace", "--base-url", silent_server, "--timeout", "0.25",
                "--max-retries", "0", env={"MAGISTERIUM_TOKEN": token})  # fmt: skip
    assert quiet.code == ExitCode.CONNECTION and len(quiet.err.splitlines()) == 1
    assert "attempts" not in quiet.err


def test_very_verbose_shows_each_request_and_no_token(silent_server: str) -> None:
    token = "sk-never-logged-5678"
    run = cli(
        "search", "grace", "--base-url", silent_server, "--timeout", "0.25", "--max-retries", "0",
        "-vv", env={"MAGISTERIUM_TOKEN": token},
    )  # fmt: skip
    assert "DEBUG magisterium_async.transport: message/send: error after" in run.err
    assert token not in run.err


async def test_before_the_request_it_says_the_sign_in_it_waits_for() -> None:
    watch, _, clock = _watch()
    watch.on_event(PoolEvent("refreshing", "", clock.now(), 15.0))
    assert watch.text() == "searching: refreshing the sign-in, until 12:00:15 at the latest"
    watch.on_event(PoolEvent("sent", "default", clock.now(), 0.0))  # then the request
    assert watch.text().startswith("searching… 0s, attempt 1 of 3")


async def test_a_429_without_a_usable_wait_says_no_wait() -> None:
    watch, _, clock = _watch()
    for told in (None, float("inf"), float("nan")):
        watch.on_event(retried(clock, 5.0, retry_after=told))
        assert watch.text() == (
            "searching: next try at 12:00:05 (in 5s), after: rate limited by the service (HTTP 429)"
        )


async def test_the_line_is_as_wide_as_the_terminal_it_is_written_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """stdout may be a pipe (piped to a file, 80 columns by default) while stderr, where
    the line goes, is a wide terminal."""
    monkeypatch.delenv("COLUMNS", raising=False)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
    label = "searching: " + "x" * 150
    with os.fdopen(follower, "w", closefd=True) as stream:
        async with status_line(lambda: label, stream=stream):
            # Painted as soon as the line's task runs: the terminal has something to read.
            await asyncio.to_thread(select.select, [leader], [], [], TIMEOUT)
    shown = b""
    while select.select([leader], [], [], 0)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert label in shown.decode()


def test_an_absurd_timeout_on_a_terminal_is_waited_for_without_a_traceback() -> None:
    """``--timeout 1e300``: its end is past any clock (the line said it with a traceback)."""
    args = ["ask", "--emulator", "--timeout", "1e300", "what is grace?"]
    code, shown = _on_a_terminal(*args, env={})
    assert code == 0, shown
    assert "Traceback" not in shown and shown.endswith("\r\x1b[2K")
