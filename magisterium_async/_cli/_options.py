"""The options the commands share, each declared once, and the one rule for numbers.

:func:`add_common_options` holds what every command takes, :func:`add_connection_options`
what every command that talks to the service takes. Both go on the main parser (real
defaults) and on each command (defaults ``SUPPRESS``), so an option works before or
after the command's name: a value given after it wins, else the main parser's stands.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from magisterium_async._config import MAX_RETRIES_CEILING, RateLimits, parse_quota

__all__ = ["add_common_options", "add_connection_options", "add_redis_option", "number"]


def number(
    kind: type[int] | type[float] = float,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    above: bool = False,
) -> Callable[[str], Any]:
    """An argument type: a finite number of ``kind`` from ``low`` to ``high`` (more than
    ``low`` when ``above``); argparse prefixes its refusal with the flag's name."""

    def parse(text: str) -> int | float:
        shown = text if len(text) <= 50 else f"{text[:50]}… ({len(text):,} characters)"
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {shown}")
        if value < low or value > high or (above and value == low):
            if math.isfinite(low) and math.isfinite(high):
                bound = f"from {low:g} to {high:g}"
            elif value > high:
                bound = f"<= {high:g}"
            else:
                bound = f"{'>' if above else '>='} {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {shown}")
        return value

    return parse


def _quota(text: str) -> RateLimits:
    """``--quota``: ``DEFAULT/EXPENSIVE[/PERIOD]`` or ``unlimited``."""
    try:
        return parse_quota(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _defaults(suppress: bool) -> Callable[[object], object]:
    return lambda value: argparse.SUPPRESS if suppress else value


def add_common_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options of every command."""
    default = _defaults(suppress)
    parser.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine output: JSON (results on stdout, summaries on stderr)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="say retries, rate limits, sign-in refreshes and waits on stderr (-vv: "
        "every request too); $MAGISTERIUM_LOG=info|debug does the same",
    )
    parser.add_argument(
        "--credentials",
        metavar="PATH|URL",
        default=default(None),
        help="where `login` keeps the sign-in: a file, or a Redis URL (redis://, rediss://, "
        "unix://, redis+cluster://, redis+sentinel://) shared by many hosts "
        "(default: $MAGISTERIUM_CREDENTIALS, then the user config dir)",
    )


def add_connection_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options of every command that talks to the service (or to ``--emulator``)."""
    default = _defaults(suppress)
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--token-file",
        metavar="PATH",
        default=default(None),
        help="read the token from PATH instead of $MAGISTERIUM_TOKEN",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        default=default(None),
        help="the A2A endpoint (default: $MAGISTERIUM_BASE_URL, then the service)",
    )
    group.add_argument(
        "--proxy",
        metavar="URL",
        default=default(None),
        help="send every request through this http(s):// proxy (default: $HTTPS_PROXY / "
        "$HTTP_PROXY, except hosts in $NO_PROXY); put a proxy's password in those "
        "variables rather than here, where other users can see it",
    )
    group.add_argument(
        "--quota",
        type=_quota,
        metavar="D/E[/PERIOD]",
        default=default(None),
        help="requests per period (60 s) the client allows itself in the default and the "
        "expensive pool, or 'unlimited' (default: $MAGISTERIUM_QUOTA, then the Pro plan, 15/2)",
    )
    group.add_argument(
        "--cache",
        metavar="memory|PATH|URL",
        default=default(None),
        help="keep answers (documents, searches, readings, lookups; not ask): 'memory', a "
        "file kept between runs, or a Redis URL (redis://, rediss://, unix://, "
        "redis+cluster://, redis+sentinel://) shared by every process naming it "
        "(default: $MAGISTERIUM_CACHE, then none)",
    )
    group.add_argument(
        "--timeout",
        type=number(float, 0, above=True),
        metavar="SECONDS",
        default=default(None),
        help="per request (default: 30, and 300 for ask)",
    )
    group.add_argument(
        "--max-retries",
        type=number(int, 0, MAX_RETRIES_CEILING),
        metavar="N",
        default=default(2),
        help="retries of transient failures per call (default: 2)",
    )
    group.add_argument(
        "--protocol",
        choices=("auto", "0.3", "1.0"),
        default=default("auto"),
        help="the A2A dialect to speak: auto (default: the service's, and A2A 1.0 where "
        "the agent card offers it), or 0.3 or 1.0 alone",
    )
    offline = parser.add_argument_group("offline")
    offline.add_argument(
        "--emulator",
        action="store_true",
        default=default(False),
        help="run against an in-process emulator: no token, no network, limits lifted",
    )
    offline.add_argument(
        "--emulator-limits",
        action="store_true",
        default=default(False),
        help="with --emulator: enforce the Pro plan's quota (15/2 a minute), client and server",
    )
    offline.add_argument(
        "--synthetic",
        type=number(int, 0, above=True),
        metavar="N",
        default=default(None),
        help="with --emulator: serve N synthetic documents instead of the bundled corpus",
    )


def add_redis_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--redis URL``: the Redis through which processes share the token's quota (``what``
    the command does with it)."""
    parser.add_argument(
        "--redis",
        metavar="URL",
        help=f"{what} (default: $MAGISTERIUM_REDIS_URL; needs pip install "
        "'magisterium-async[redis]')",
    )
