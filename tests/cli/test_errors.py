"""Exit codes, and every error as one line on stderr."""

from __future__ import annotations

import pytest

from magisterium_async import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    InvalidParamsError,
    MagisteriumError,
    PlanRequiredError,
    RateLimitError,
    TaskNotFoundError,
)
from magisterium_async._cli._errors import CliError, ExitCode, describe, exit_code_for


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
