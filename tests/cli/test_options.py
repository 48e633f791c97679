"""The shared options: parsed once, given before or after the command."""

from __future__ import annotations

import argparse
import math

import pytest

from magisterium_async import RateLimits
from magisterium_async._cli import build_parser
from magisterium_async._cli._options import quota


def test_quota_parsing() -> None:
    assert quota("15/2") == RateLimits(15, 2)
    assert quota("30/4/10") == RateLimits(30, 4, period=10)
    assert math.isinf(quota("unlimited").default)
    with pytest.raises(argparse.ArgumentTypeError):
        quota("fast")


def test_common_options_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--emulator", "search", "grace"])
    after = parser.parse_args(["search", "grace", "--json", "--emulator"])
    neither = parser.parse_args(["search", "grace"])
    assert before.json and before.emulator and after.json and after.emulator
    assert not neither.json and not neither.emulator
