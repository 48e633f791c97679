"""A wait the service gave, read in one place: ``retryAfter`` in a JSON-RPC error's
``data`` first, then the ``Retry-After`` header.

:func:`parse_seconds` turns what was sent into seconds, or ``None`` for no usable wait; it
never raises. :class:`~._errors.RateLimitError` reads its ``retry_after`` with
:func:`retry_after_from`; the retry loop caps what it reads (``RetryPolicy.max_retry_after``).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["parse_seconds", "retry_after_from"]


def retry_after_from(data: Any, headers: Any = None) -> float | None:
    """The one reading of a 429's wait: ``data.retryAfter`` first, then ``Retry-After``."""
    seconds = parse_seconds(data.get("retryAfter")) if isinstance(data, dict) else None
    if seconds is None and headers is not None:
        try:
            seconds = parse_seconds(headers.get("Retry-After"))
        except Exception:  # a headers object that cannot be read is a header not given
            seconds = None
    return seconds


def parse_seconds(value: object) -> float | None:
    """A wait the service gave (``retryAfter``, ``Retry-After``), in seconds; never raises.

    A number, or a string of digits holding one: ``-0.0`` is ``0.0``; a number too large
    to hold in a float (a 400-digit integer, ``1e999``, which JSON decodes to ``inf``) is
    ``inf``, for the caller to cap. ``None`` for what is no usable wait: ``nan``, a
    negative number, a bool, anything else, a string that is no number (``"soon"``,
    ``"inf"``, an HTTP date).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, int):
        if value < 0:
            return None
        try:
            return float(value)
        except OverflowError:
            return math.inf
    if isinstance(value, str) and any(word in value.lower() for word in ("inf", "nan")):
        return None  # a word, not a number of seconds
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds + 0.0  # -0.0 becomes 0.0
