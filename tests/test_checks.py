"""The number checks every setting goes through: the value back, or an error naming it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from magisterium_async._checks import (
    fraction,
    non_negative_number,
    number,
    positive_number,
    whole_number,
)


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
