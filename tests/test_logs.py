"""The library's log: off until asked for, on stderr with ``$MAGISTERIUM_LOG`` (read once,
at import) or the command line's ``-v``, and never a secret in it, even at DEBUG."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async import _config as _env
from magisterium_async import _events as _logs
from magisterium_async.testing import Emulator, EmulatorConfig, Fault
from tests.cli.helpers import TIMEOUT, clean_env
from tests.helpers.credentials import load_credentials
from tests.helpers.oauth_fake import sign_in

# A record at each level, from the loggers users meet.
_SCRIPT = (
    "import logging, magisterium_async; "
    "logging.getLogger('magisterium_async.retry').info('a retry'); "
    "logging.getLogger('magisterium_async.transport').debug('a request')"
)


def _python(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        env=clean_env(**env),
        timeout=TIMEOUT,
    )


def test_nothing_is_shown_unless_asked_for() -> None:
    run = _python({})
    assert run.returncode == 0 and run.stderr == ""


@pytest.mark.parametrize(
    ("value", "shown"),
    [("info", ["a retry"]), ("INFO", ["a retry"]), ("debug", ["a retry", "a request"])],
)
def test_the_variable_turns_the_log_on_without_code(value: str, shown: list[str]) -> None:
    run = _python({_env.LOG_ENV: value})
    assert run.returncode == 0
    lines = run.stderr.splitlines()
    assert [line.partition(": ")[2] for line in lines] == shown
    assert lines[0].split()[1:3] == ["INFO", "magisterium_async.retry:"]


def test_a_value_it_does_not_know_is_said_and_ignored() -> None:
    run = _python({_env.LOG_ENV: "loud"})
    assert run.returncode == 0
    assert run.stderr.splitlines() == ["$MAGISTERIUM_LOG='loud': expected info or debug; ignored"]


@pytest.fixture
def library_log() -> Iterator[logging.Logger]:
    """The package's logger, its handlers and level put back after the test."""
    logger = logging.getLogger(_logs.LOGGER)
    handlers, level = list(logger.handlers), logger.level
    try:
        yield logger
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)


def test_asking_twice_keeps_one_handler_and_the_more_verbose_level(
    library_log: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    _logs.log_to_stderr(logging.DEBUG)
    _logs.log_to_stderr(logging.INFO)  # -v after $MAGISTERIUM_LOG=debug: still debug
    assert len(library_log.handlers) == 1 and library_log.level == logging.DEBUG
    logging.getLogger("magisterium_async.transport").debug("a request")
    assert capsys.readouterr().err.endswith("DEBUG magisterium_async.transport: a request\n")


async def test_no_secret_is_logged_at_debug_through_calls_retries_and_refreshes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every record of every logger, at DEBUG, through a call with a fixed token (a 502
    retried, a 429 waited out) and one with a stored sign-in refreshed after a 401."""
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "credentials.json"
    config = EmulatorConfig(rate_limits=None, token_lifetime=3600)
    async with Emulator(config) as emulator:
        secrets = [emulator.token]
        emulator.script(Fault.http_502(), Fault.rate_limit(retry_after=0))
        async with m.AsyncMagisterium(
            emulator.token, base_url=emulator.base_url, rate_limits=m.RateLimits.unlimited()
        ) as client:
            assert await client.search("grace")
        await sign_in(emulator, path)
        first = load_credentials(path)
        assert first is not None and first.refresh_token is not None
        secrets += [first.access_token, first.refresh_token]
        assert emulator.oauth.expire_access_tokens() == 1  # the next call meets a 401
        async with m.AsyncMagisterium(
            base_url=emulator.base_url, credentials=path, rate_limits=m.RateLimits.unlimited()
        ) as client:
            assert await client.search("grace")
        second = load_credentials(path)
        assert second is not None and second.access_token != first.access_token
        secrets += [second.access_token, str(second.refresh_token)]
    said = [r for r in caplog.records if r.name.startswith("magisterium_async")]
    assert any("retry 1 of" in r.getMessage() for r in said)  # the 502
    assert any("rate limited" in r.getMessage() for r in said)  # the 429
    assert any("refreshing the access token" in r.getMessage() for r in said)
    assert any(r.levelno == logging.DEBUG for r in said)
    for record in caplog.records:  # aiohttp's and asyncio's too
        text = f"{record.getMessage()} {record.__dict__}"
        for secret in secrets:
            assert secret not in text, (record.name, record.getMessage())
