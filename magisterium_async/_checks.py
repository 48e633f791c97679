"""Checks of the numbers a user passes in: each returns the value, or raises naming it.

One home for "is this a usable number?", so every setting of the library refuses a bad
value the same way: :class:`TypeError` when it is not a number at all (``True`` is not
one, though Python counts it as an ``int``), :class:`ValueError` when it is out of range
(NaN always is), the message naming the argument and echoing the value.
"""

from __future__ import annotations

import math

__all__ = ["fraction", "non_negative_number", "number", "positive_number", "whole_number"]


def number(name: str, value: object) -> float:
    """``value`` as a float if it is an int or a float (not a bool), else ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


def positive_number(name: str, value: object, *, infinite: bool = False) -> float:
    """``value`` if it is a number above 0 (``math.inf`` only when ``infinite``)."""
    checked = number(name, value)
    if math.isnan(checked) or checked <= 0 or (math.isinf(checked) and not infinite):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return checked


def non_negative_number(name: str, value: object, *, infinite: bool = False) -> float:
    """``value`` if it is a number of at least 0 (``math.inf`` only when ``infinite``)."""
    checked = number(name, value)
    if math.isnan(checked) or checked < 0 or (math.isinf(checked) and not infinite):
        finite = "" if infinite else " and finite"
        raise ValueError(f"{name} must be a number >= 0{finite}, got {value!r}")
    return checked


def fraction(name: str, value: object) -> float:
    """``value`` if it is a number from 0 to 1, both included (a probability, a share)."""
    checked = number(name, value)
    if not 0.0 <= checked <= 1.0:  # NaN compares false, so it is refused too
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
    return checked


def whole_number(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value
