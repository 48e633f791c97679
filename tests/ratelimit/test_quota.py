"""What a user configures to share a quota: :class:`SharedQuota`, checked as it is made."""

from __future__ import annotations

import math

import pytest

from magisterium_async._errors import SharedQuotaError
from magisterium_async._ratelimit import SharedQuota


def test_shared_quota_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAGISTERIUM_REDIS_URL", raising=False)
    with pytest.raises(SharedQuotaError, match="MAGISTERIUM_REDIS_URL"):
        SharedQuota()
    with pytest.raises(ValueError):
        SharedQuota("redis://x", workers=0)


def test_the_url_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGISTERIUM_REDIS_URL", "redis://from-env:6379/2")
    assert SharedQuota().url == "redis://from-env:6379/2"
    assert SharedQuota("redis://given/0").url == "redis://given/0"  # given beats the variable


def test_the_defaults_bound_every_redis_call() -> None:
    quota = SharedQuota("redis://x")
    assert (quota.workers, quota.timeout, quota.retry_interval) == (1, 0.5, 1.0)
    assert quota.prefix == "magisterium"


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("workers", 0, ValueError),
        ("workers", 2.5, TypeError),
        ("workers", True, TypeError),
        ("timeout", 0, ValueError),
        ("timeout", -1.0, ValueError),
        ("timeout", math.nan, ValueError),
        ("timeout", math.inf, ValueError),  # a Redis call must be bounded
        ("timeout", "1", TypeError),
        ("retry_interval", 0.0, ValueError),
        ("retry_interval", None, TypeError),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(field: str, value: object, error: type) -> None:
    with pytest.raises(error, match=field):
        SharedQuota("redis://x", **{field: value})  # type: ignore[arg-type]


def test_of_takes_a_url_or_the_object_itself() -> None:
    quota = SharedQuota("redis://x", workers=4)
    assert SharedQuota.of(quota) is quota
    assert SharedQuota.of("redis://y/1") == SharedQuota("redis://y/1")


@pytest.mark.parametrize("value", [42, b"redis://x", {"url": "redis://x"}])
def test_of_refuses_anything_else_naming_the_argument(value: object) -> None:
    with pytest.raises(TypeError, match="shared_quota must be a Redis URL or SharedQuota"):
        SharedQuota.of(value)  # type: ignore[arg-type]


def test_the_quota_is_immutable() -> None:
    quota = SharedQuota("redis://x")
    with pytest.raises(AttributeError):
        quota.workers = 2  # type: ignore[misc]
