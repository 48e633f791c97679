"""The library's log: off until asked for, on stderr with ``$MAGISTERIUM_LOG`` (read once,
at import) or the command line's ``-v``, and never a secret in it, even at DEBUG."""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async import _config as _env
from magisterium_async import _events as _logs
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    Fault,
    MockRequest,
    MockResponse,
    MockTransport,
    VirtualClock,
)
from tests.cli.helpers import TIMEOUT, clean_env
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


def _tokens_in(path: Path) -> list[str]:
    """The tokens a stored sign-in holds (every string under a key naming a token)."""
    found: list[str] = []

    def walk(value: object, key: str = "") -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                walk(inner, name)
        elif isinstance(value, list):
            for inner in value:
                walk(inner, key)
        elif isinstance(value, str) and key.endswith("token"):
            found.append(value)

    walk(json.loads(path.read_text(encoding="utf-8")))
    return found


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
        first = _tokens_in(path)
        assert len(first) == 2  # the access token and the refresh token
        secrets += first
        assert emulator.oauth.expire_access_tokens() == 1  # the next call meets a 401
        async with m.AsyncMagisterium(
            base_url=emulator.base_url, credentials=path, rate_limits=m.RateLimits.unlimited()
        ) as client:
            assert await client.search("grace")
        second = _tokens_in(path)
        assert second and second != first
        secrets += second
    said = [r for r in caplog.records if r.name.startswith("magisterium_async")]
    assert any("retry 1 of" in r.getMessage() for r in said)  # the 502
    assert any("rate limited" in r.getMessage() for r in said)  # the 429
    assert any("refreshing the access token" in r.getMessage() for r in said)
    assert any(r.levelno == logging.DEBUG for r in said)
    for record in caplog.records:  # aiohttp's and asyncio's too
        text = f"{record.getMessage()} {record.__dict__}"
        for secret in secrets:
            assert secret not in text, (record.name, record.getMessage())


# One stream: the log is a subscriber, and nothing else logs ------------------------------

_PACKAGE = Path(m.__file__).parent
_LOG_SUBSCRIBER = _PACKAGE / "_events.py"


def _loggers(root: Path) -> list[str]:
    """The package's modules under ``root`` that use :mod:`logging` (an import of it or a
    ``getLogger``), but the log subscriber and the command line's own output."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(_PACKAGE)
        if path == _LOG_SUBSCRIBER or relative.parts[0] == "_cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "logging" or name.startswith("logging.") for name in names):
                found.append(str(relative))
                break
    return found


def test_no_module_but_the_log_subscriber_and_the_cli_calls_logging() -> None:
    assert _loggers(_PACKAGE) == []


async def test_an_on_event_callback_that_raises_is_logged_and_never_fails_a_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fails(event: m.PoolEvent) -> None:
        if event.kind == "call_started":
            raise RuntimeError("my metrics are down")

    async def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"}}
        )

    client = m.AsyncMagisterium(
        token="t", transport=MockTransport(answer), clock=VirtualClock(), on_event=fails
    )
    async with client:
        assert (await client.get_task("t")).id == "t"
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (
            "magisterium_async.ratelimit",
            logging.WARNING,
            "on_event callback failed on call_started event (RuntimeError: my metrics are "
            "down); ignored",
        )
    ]


async def test_an_on_event_callback_returning_a_coroutine_is_said_never_left_unawaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # ``async def`` itself is refused when the client is made; a lambda calling one is not.
    heard: list[str] = []

    async def record(event: m.PoolEvent) -> None:
        heard.append(event.kind)

    async def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(
            request, {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"}}
        )

    client = m.AsyncMagisterium(
        token="t",
        transport=MockTransport(answer),
        clock=VirtualClock(),
        on_event=lambda event: record(event),
    )
    async with client:
        assert (await client.get_task("t")).id == "t"
    said = {r.getMessage() for r in caplog.records}
    assert "on_event callback failed on call_started event (TypeError: it returned a " in (
        " ".join(said)
    )
    assert heard == []  # and no "coroutine was never awaited" (warnings are errors here)


async def test_a_subscriber_hears_every_kind_the_log_and_the_spans_report(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client's run with a retry, a 429, a long wait for quota, a kept answer, a shared
    call and a warning: ``on_event`` hears every kind the log says and the spans read,
    and the log written is exactly what its subscriber writes from those events alone."""
    caplog.set_level(logging.DEBUG, logger=_logs.LOGGER)
    clock = VirtualClock()
    statuses = iter([503, 429])
    card = {
        "name": "Magisterium AI",
        "version": "1.0",
        "supportedInterfaces": [
            {"url": "https://elsewhere.example/a2a", "protocolBinding": "JSONRPC",
             "protocolVersion": "1.0"},
        ],
    }  # fmt: skip

    async def answer(request: MockRequest) -> MockResponse:
        if request.method == "GET":
            return MockResponse(json=card)
        await clock.sleep(0.2)
        status = next(statuses, 200)
        if status == 503:
            return MockResponse(status=503, content=b"busy")
        if status == 429:
            return MockResponse.error(request, -32003, "limited", {"retryAfter": 3}, status=429)
        found = {"kind": "data", "data": {"results": [{"id": "1", "url": "u", "title": "T"}]}}
        artifacts = [{"artifactId": "a", "name": "search_results", "parts": [found]}]
        return MockResponse.result(
            request,
            {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"},
             "artifacts": artifacts},
        )  # fmt: skip

    heard: list[m.PoolEvent] = []
    client = m.AsyncMagisterium(
        token="t",
        base_url="https://a2a.example/api",
        transport=MockTransport(answer),
        rate_limits=m.RateLimits(2, 1, period=60.0),
        clock=clock,
        cache="memory",
        on_event=heard.append,
    )
    async with client:
        work = asyncio.gather(
            client.search("grace"),  # a 503, then a 429, then its answer
            client.search("grace"),  # shares it
            *(client.search(f"other {i}") for i in range(3)),  # waits for the quota
        )
        await clock.run_until_idle()
        await work
        assert await client.search("grace")  # kept
        await client.agent_card()  # offers an endpoint on another origin: a warning
    kinds = {event.kind for event in heard}
    spans_read = {"call_started", "call_ended", "sent", "answered", "retried"}
    logged = {"retried", "answered", "waiting", "notice"}
    assert spans_read | logged | {"rate_limited", "cache_hit", "coalesced"} <= kinds
    # (The engine's own records, until it is converted, are not the subscriber's.)
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.module == "_events"]
    assert {name for name, _, _ in said} >= {
        "magisterium_async.retry", "magisterium_async.transport", "magisterium_async.ratelimit",
    }  # fmt: skip
    caplog.clear()
    replay = _logs.EventLog(quiet_waits=True)  # the client's own: on_event is given
    for event in heard:
        replay(event)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == said
