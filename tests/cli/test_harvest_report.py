"""The harvest's live status line: its figures and its ETA."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from magisterium_async import RateLimits
from magisterium_async._cli._harvest_report import Status
from magisterium_async._harvest import HarvestFailure, HarvestStats


@dataclass
class _Run:
    stats: HarvestStats
    failures: list[HarvestFailure] = field(default_factory=list)


@dataclass
class _Sink:
    written: int = 0
    skipped: int = 0


def _status(stats: HarvestStats, total: int | None, quota: RateLimits) -> Status:
    run: Any = _Run(stats)
    sink: Any = _Sink(written=stats.fetched)
    return Status(run, sink, total, quota)


def test_the_eta_divides_the_requests_left_by_the_quota() -> None:
    # 10 of 100 queries searched, 40 ids found, 20 fetched: 90 searches left, 20 fetches
    # pending and 90 * 4 to come; 470 requests at 15 a minute.
    stats = HarvestStats(queries=100, searched=10, unique_ids=40, fetched=20)
    status = _status(stats, 100, RateLimits(15, 2))
    assert status.eta() == pytest.approx(470 / 0.25)
    assert "queries 10/100" in status.line() and "ETA 31m20s" in status.line()


def test_the_eta_is_unknown_without_a_total_or_a_first_search() -> None:
    assert _status(HarvestStats(searched=3), None, RateLimits(15, 2)).eta() is None
    assert _status(HarvestStats(), 10, RateLimits(15, 2)).eta() is None
    assert "ETA ?" in _status(HarvestStats(), 10, RateLimits(15, 2)).line()


def test_the_eta_uses_the_observed_rate_when_the_quota_is_lifted() -> None:
    stats = HarvestStats(searched=10, unique_ids=10, fetched=10, started=0.0, finished=10.0)
    # 2 requests a second so far; 10 searches and 10 fetches left.
    assert _status(stats, 20, RateLimits.unlimited()).eta() == pytest.approx(10.0)
