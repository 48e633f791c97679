"""The configuration value objects: their presets, what they compute, and the errors a bad
value gets (each naming the argument).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async import _config as _env
from magisterium_async._config import (
    DEFAULT_BASE_URL,
    DEFAULT_RETRY_POLICY,
    DEFAULT_TIMEOUTS,
    fraction,
    non_negative_number,
    number,
    parse_quota,
    positive_number,
    whole_number,
)


def test_the_plans_are_15_and_2_a_minute_with_no_cap_but_the_rate() -> None:
    for limits in (m.RateLimits.pro(), m.RateLimits.organization()):
        assert (limits.default, limits.expensive, limits.period) == (15.0, 2.0, 60.0)
        # The service documents a rate, not a cap on calls in flight (issue 22).
        assert (limits.concurrency_for("default"), limits.concurrency_for("expensive")) == (
            None,
            None,
        )
        assert limits.adaptive


def test_unlimited_lifts_rates_and_optionally_caps_concurrency() -> None:
    limits = m.RateLimits.unlimited()
    assert limits.limit_for("default") == limits.limit_for("expensive") == math.inf
    assert limits.window_for("expensive") == (0, 60.0)
    assert limits.concurrency_for("expensive") is None and not limits.adaptive
    assert m.RateLimits.unlimited(concurrency=3).concurrency_for("default") == 3


def test_a_limit_becomes_whole_starts_per_window() -> None:
    limits = m.RateLimits(15.5, 0.5, period=60)
    assert limits.window_for("default") == (15, 60.0)
    assert limits.window_for("expensive") == (1, 120.0)  # 0.5 a minute: 1 per 2 minutes


def test_the_safety_margin_defaults_to_2_percent_of_the_period_up_to_1_s() -> None:
    assert m.RateLimits(15, 2, period=10).margin == pytest.approx(0.2)
    assert m.RateLimits(15, 2, period=3600).margin == 1.0
    assert m.RateLimits(15, 2, safety_margin=0).margin == 0.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"default": 0}, ValueError, "default must be a positive number, got 0"),
        ({"expensive": math.nan}, ValueError, "expensive must be a positive number, got nan"),
        ({"default": "15"}, TypeError, "default must be a number, not str"),
        ({"default": True}, TypeError, "default must be a number, not bool"),
        ({"period": math.inf}, ValueError, "period must be a positive number, got inf"),
        ({"period": 10**400}, ValueError, "period must be a number a float can hold"),
        ({"default_concurrency": 0}, ValueError, "default_concurrency must be >= 1, got 0"),
        ({"expensive_concurrency": 1.5}, TypeError, "expensive_concurrency must be an int"),
        ({"safety_margin": -1}, ValueError, "safety_margin must be a number >= 0 and finite"),
        ({"safety_margin": math.inf}, ValueError, "safety_margin must be a number >= 0"),
        ({"safety_margin": "1"}, TypeError, "safety_margin must be a number, not str"),
    ],
)
def test_bad_rate_limits_are_refused_by_name(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"default": 15, "expensive": 2, **kwargs}
    with pytest.raises(error, match=message):
        m.RateLimits(**arguments)


def test_rate_limits_are_immutable_values() -> None:
    limits = m.RateLimits(15, 2)
    assert limits == m.RateLimits.pro() and hash(limits) == hash(m.RateLimits.pro())
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.default = 30  # type: ignore[misc]


def test_one_timeout_number_applies_to_every_call() -> None:
    assert m.Timeouts(default=30.0, expensive=300.0, connect=10.0) == DEFAULT_TIMEOUTS
    assert m.Timeouts.of(5) == m.Timeouts(default=5.0, expensive=5.0, connect=5.0)
    assert m.Timeouts.of(60).connect == 10.0  # connecting is bounded on its own
    given = m.Timeouts(default=1.0)
    assert m.Timeouts.of(given) is given
    assert (given.for_pool("expensive"), given.for_pool("default"), given.for_pool(None)) == (
        300.0,
        1.0,
        1.0,
    )


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: m.Timeouts.of(0), ValueError, "timeout must be a positive number, got 0"),
        (lambda: m.Timeouts.of(math.inf), ValueError, "timeout must be a positive number"),
        (lambda: m.Timeouts(connect=-1), ValueError, "connect must be a positive number"),
        (lambda: m.Timeouts(expensive="5"), TypeError, "expensive must be a number, not str"),
    ],
)
def test_bad_timeouts_are_refused_by_name(make: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it() -> None:
    policy = DEFAULT_RETRY_POLICY
    assert [policy.backoff(n, 0.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert policy.backoff(1, 0.999) == pytest.approx(0.75, abs=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_retries": -1}, ValueError, "max_retries must be >= 0, got -1"),
        ({"max_retries": 101}, ValueError, "max_retries must be <= 100, got 101"),
        ({"max_retries": 2.0}, TypeError, "max_retries must be an int, not float"),
        ({"initial_backoff": 0}, ValueError, "initial_backoff must be a positive number"),
        ({"max_backoff": math.inf}, ValueError, "max_backoff must be a positive number"),
        ({"fallback_retry_after": None}, TypeError, "fallback_retry_after must be a number"),
        ({"rate_limit_budget": -5}, ValueError, "rate_limit_budget must be a positive number"),
        ({"total_timeout": 0}, ValueError, "total_timeout must be a positive number"),
        ({"min_retry_after": 5, "max_retry_after": 1}, ValueError, "must not exceed"),
    ],
)
def test_bad_retry_policies_are_refused_by_name(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        m.RetryPolicy(**kwargs)


def test_unbounded_budgets_and_deadlines_are_allowed() -> None:
    policy = m.RetryPolicy(rate_limit_budget=math.inf, total_timeout=math.inf, max_retries=0)
    assert policy.rate_limit_budget == policy.total_timeout == math.inf


def test_a_quota_in_the_command_lines_words() -> None:
    assert parse_quota("15/2") == m.RateLimits.pro()
    assert parse_quota(" 30/4/10 ") == m.RateLimits(30, 4, period=10)
    assert parse_quota("Unlimited") == m.RateLimits.unlimited()
    for bad in ("fast", "15", "15/2/60/1", "0/2", "15/-1", "a/b", ""):
        with pytest.raises(ValueError, match=r"DEFAULT/EXPENSIVE\[/PERIOD\]"):
            parse_quota(bad)


def test_a_quota_of_infinite_requests_is_refused_not_taken_for_unlimited() -> None:
    """`--quota 1e309/2`: float() reads infinity; "unlimited" is the one word for it."""
    for bad in ("inf/2", "15/Infinity", "1e309/2", "15/2/inf"):
        with pytest.raises(ValueError, match=r"DEFAULT/EXPENSIVE\[/PERIOD\]"):
            parse_quota(bad)


def test_the_client_reads_its_quota_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert m.AsyncMagisterium(token="t").rate_limits == m.RateLimits.pro()
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "unlimited")
    assert m.AsyncMagisterium(token="t").rate_limits == m.RateLimits.unlimited()
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "30/4/10")
    assert m.AsyncMagisterium(token="t").rate_limits == m.RateLimits(30, 4, period=10)
    given = m.RateLimits(5, 1)
    assert m.AsyncMagisterium(token="t", rate_limits=given).rate_limits is given
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "  ")
    assert m.AsyncMagisterium(token="t").rate_limits == m.RateLimits.pro()


def test_a_bad_quota_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "15 a minute")
    with pytest.raises(ValueError, match=r"\$MAGISTERIUM_QUOTA is not a quota: .*'15 a minute'"):
        m.AsyncMagisterium(token="t")
    # A quota given in code does not read the variable at all.
    m.AsyncMagisterium(token="t", rate_limits=m.RateLimits.pro())


# The number checks every setting goes through: the value back, or an error naming it
# --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["1", None, True, [1], 1j])
def test_what_is_not_a_number_is_a_type_error_naming_the_argument(bad: Any) -> None:
    for check in (number, positive_number, non_negative_number, fraction):
        with pytest.raises(TypeError, match=f"^period must be a number, not {type(bad).__name__}$"):
            check("period", bad)


def test_numbers_come_back_as_floats() -> None:
    assert number("x", 3) == 3.0 and isinstance(number("x", 3), float)
    assert positive_number("x", 0.5) == 0.5
    assert non_negative_number("x", 0) == 0.0
    assert fraction("x", 1) == 1.0


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, -math.inf])
def test_positive_numbers(bad: float) -> None:
    with pytest.raises(ValueError, match=f"^timeout must be a positive number, got {bad!r}$"):
        positive_number("timeout", bad)


def test_infinity_only_where_it_means_no_bound() -> None:
    assert positive_number("budget", math.inf, infinite=True) == math.inf
    assert non_negative_number("latency", math.inf, infinite=True) == math.inf
    with pytest.raises(ValueError, match="budget must be a positive number, got nan"):
        positive_number("budget", math.nan, infinite=True)
    with pytest.raises(ValueError, match=r"^latency must be a number >= 0, got -1$"):
        non_negative_number("latency", -1, infinite=True)


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_non_negative_numbers(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^max_delay must be a number >= 0 and finite, got"):
        non_negative_number("max_delay", bad)


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf])
def test_fractions(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^error_rate must be between 0 and 1, got"):
        fraction("error_rate", bad)


def test_whole_numbers() -> None:
    assert whole_number("workers", 1) == 1
    assert whole_number("retries", 0, minimum=0) == 0
    with pytest.raises(ValueError, match=r"^workers must be >= 1, got 0$"):
        whole_number("workers", 0)
    for bad in (1.0, "1", True, None):
        with pytest.raises(TypeError, match=f"^workers must be an int, not {type(bad).__name__}$"):
            whole_number("workers", bad)


# The environment variables and their order: what is given wins, then the variable, then
# --------------------------------------------------------------------------------


def test_the_names_are_the_documented_ones() -> None:
    assert (_env.TOKEN_ENV, _env.CREDENTIALS_ENV, _env.BASE_URL_ENV, _env.REDIS_URL_ENV) == (
        "MAGISTERIUM_TOKEN",
        "MAGISTERIUM_CREDENTIALS",
        "MAGISTERIUM_BASE_URL",
        "MAGISTERIUM_REDIS_URL",
    )


def test_the_base_url_is_given_then_the_variable_then_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from magisterium_async._http import endpoint

    monkeypatch.delenv(_env.BASE_URL_ENV, raising=False)
    assert endpoint(None) == DEFAULT_BASE_URL
    monkeypatch.setenv(_env.BASE_URL_ENV, "")
    assert endpoint(None) == DEFAULT_BASE_URL
    monkeypatch.setenv(_env.BASE_URL_ENV, "http://127.0.0.1:8765/api/v1/a2a")
    assert endpoint(None) == "http://127.0.0.1:8765/api/v1/a2a"
    assert endpoint("https://other.example/a2a") == "https://other.example/a2a"


def test_the_redis_url_is_given_then_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.REDIS_URL_ENV, "redis://127.0.0.1:6379/0")
    assert m.SharedQuota().url == "redis://127.0.0.1:6379/0"
    assert m.SharedQuota("redis://elsewhere/1").url == "redis://elsewhere/1"


def test_a_variable_is_read_stripped_and_a_blank_one_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (_env.CACHE_ENV, _env.TOKEN_ENV) == ("MAGISTERIUM_CACHE", "MAGISTERIUM_TOKEN")
    for name in (_env.CACHE_ENV, _env.TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)
        assert _env.from_env(name) is None
        monkeypatch.setenv(name, " \t\n")
        assert _env.from_env(name) is None
        monkeypatch.setenv(name, " redis://cache:6379/0\n")
        assert _env.from_env(name) == "redis://cache:6379/0"


# One rule for the environment: a bad value is refused naming the variable ------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MAGISTERIUM_TOKEN", "two\twords"),
        ("MAGISTERIUM_BASE_URL", "http://example.com/a2a"),  # the token would go in clear
        ("MAGISTERIUM_BASE_URL", "not a url"),
        ("MAGISTERIUM_QUOTA", "fifteen a minute"),
    ],
)
def test_a_bad_variable_is_refused_at_construction_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("MAGISTERIUM_TOKEN", "a-token")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=rf"^\${variable}\b") as raised:
        m.AsyncMagisterium()
    assert "a-token" not in str(raised.value)


def test_a_bad_argument_is_named_as_the_argument_not_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAGISTERIUM_BASE_URL", "https://fine.example/a2a")
    with pytest.raises(ValueError, match=r"^base_url"):
        m.AsyncMagisterium("t", base_url="not a url")


@pytest.mark.parametrize(
    "make",
    [
        lambda: m.RateLimits(15, 2, adaptive="no"),
        lambda: m.RetryPolicy(retry_expensive_timeouts="no"),
        lambda: m.RetryPolicy(retry_expensive_timeouts=1),
    ],
)
def test_a_flag_is_a_bool_never_a_truthy_word(make: Any) -> None:
    with pytest.raises(TypeError, match="must be True or False"):
        make()
