"""Exit codes, and every error as one line on stderr: through the command line against
the emulator's faults, and the table itself for what no emulator makes in a test's time
(a 429 after the client's 15 minutes of waits)."""

from __future__ import annotations

import asyncio

import pytest

from magisterium_async import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    InternalServerError,
    InvalidParamsError,
    MagisteriumError,
    PlanRequiredError,
    RateLimitError,
    ResponseTooLargeError,
    TaskNotFoundError,
)
from magisterium_async._cli._errors import CliError, ExitCode, cli_words, describe, exit_code_for
from magisterium_async.testing import Emulator, EmulatorConfig, Fault

from .helpers import cli


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (AuthenticationError("Unauthorized"), ExitCode.AUTH),
        (PlanRequiredError("Paid plan required"), ExitCode.AUTH),
        (RateLimitError("Rate limit exceeded", data={"retryAfter": 7}), ExitCode.RATE_LIMITED),
        (APIConnectionError("refused"), ExitCode.CONNECTION),
        (APITimeoutError("slow"), ExitCode.CONNECTION),
        (TaskNotFoundError("Task not found"), ExitCode.NOT_FOUND),
        (InvalidParamsError("Invalid state transition"), ExitCode.ERROR),
        (MagisteriumError("other"), ExitCode.ERROR),
        (ValueError("query must not be blank"), ExitCode.USAGE),
        (CliError("gone", ExitCode.NOT_FOUND), ExitCode.NOT_FOUND),
    ],
)
def test_exit_codes(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code
    assert "\n" not in describe(error)


def test_describe_gives_the_wait_of_a_rate_limit() -> None:
    message = describe(RateLimitError("Rate limit exceeded", data={"retryAfter": 7}))
    assert "wait 7 s" in message


@pytest.mark.parametrize(
    ("library", "cli"),
    [
        (
            "base_url must not carry credentials; pass token= instead",
            "--base-url (or $MAGISTERIUM_BASE_URL) must not carry credentials; give the token "
            "by --token-file or $MAGISTERIUM_TOKEN",
        ),
        (
            "base_url must be an http(s) URL with a host, got 'ftp://x'",
            "--base-url (or $MAGISTERIUM_BASE_URL) must be an http(s) URL with a host, got "
            "'ftp://x'",
        ),
        (
            "proxy 'socks5://h:1': give an http:// proxy",
            "--proxy 'socks5://h:1': give an http:// proxy",
        ),
        (
            "no API token: pass token=, set the MAGISTERIUM_TOKEN environment variable",
            "no API token: pass --token-file PATH, set the MAGISTERIUM_TOKEN environment variable",
        ),
        ("max_retries must be >= 0, got -1", "--max-retries must be >= 0, got -1"),
        ("no credentials file at /x (credentials=)", "no credentials file at /x (--credentials)"),
        ("document_id must not be empty", "the document id must not be empty"),
        ("task_id must not be empty", "the task id must not be empty"),
        ("context_id must not be empty", "--context-id must not be empty"),
    ],
)
def test_library_words_become_the_command_lines(library: str, cli: str) -> None:
    assert cli_words(library) == cli
    assert describe(ValueError(library)) == cli


def test_an_answer_too_large_names_no_constructor_argument() -> None:
    error = ResponseTooLargeError(
        "message/send: the response is larger than max_response_bytes (67108864 bytes); "
        "reading stopped there. Pass a larger max_response_bytes= if answers this big are "
        "expected",
        limit=64 << 20,
    )
    text = describe(error)
    assert text.startswith("message/send: the answer is larger than 64 MiB")
    assert "max_response_bytes" not in text and "Pass" not in text


def test_after_retries_the_attempts_are_said() -> None:
    timeout = APITimeoutError("message/send timed out after 30 s")
    assert describe(timeout) == (
        "timed out: message/send timed out after 30 s; raise the timeout with --timeout SECONDS"
    )
    assert describe(timeout, 3) == (
        "timed out: message/send timed out after 30 s (after 3 attempts); raise the timeout "
        "with --timeout SECONDS"
    )
    assert describe(APIConnectionError("refused"), 2).endswith("refused (after 2 attempts)")
    assert describe(InternalServerError("Internal error"), 3).endswith("(after 3 attempts)")
    # A refusal is not retried: no count to give.
    assert "attempts" not in describe(InvalidParamsError("bad"), 2)


async def test_what_the_service_answers_becomes_one_line_and_its_exit_code() -> None:
    config = EmulatorConfig(rate_limits=None, tokens={"sk-pro": "pro", "sk-free": "free"})
    async with Emulator(config) as emulator:
        base = {"MAGISTERIUM_BASE_URL": emulator.base_url, "MAGISTERIUM_TOKEN": "sk-pro"}

        async def run(*argv: str, **env: str) -> tuple[int, str]:
            done = await asyncio.to_thread(cli, *argv, env={**base, **env})
            assert done.out == "" and len(done.err.splitlines()) == 1, done.err
            return done.code, done.err.removeprefix("magisterium-async: error: ")

        secret = "sk-wrong-1234567890"
        code, said = await run("search", "grace", MAGISTERIUM_TOKEN=secret)
        assert code == 3 and "the token was refused" in said and secret not in said
        code, said = await run("search", "grace", MAGISTERIUM_TOKEN="sk-free")
        assert code == 3 and "needs a Pro, Organization or Enterprise plan" in said
        emulator.script(*[Fault.internal_error()] * 3, skill="document_search")
        code, said = await run("search", "grace", "--max-retries", "2")
        assert code == 1 and said.startswith("Internal error") and "(after 3 attempts)" in said
        emulator.script(Fault.malformed(body=b"x" * (65 << 20)), skill="document_search")
        code, said = await run("search", "grace")
        assert code == 1 and said.startswith("message/send: the answer is larger than 64 MiB")
        code, said = await run("search", "  ")
        assert code == 2 and "query" in said
