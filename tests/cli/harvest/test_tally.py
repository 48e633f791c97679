"""A harvest's figures: requests left and the ETA from the quota (or the pace the pool
keeps), what an earlier run left, failed searches, and what the state held before."""

from __future__ import annotations

import pytest

from magisterium_async import APIConnectionError, RateLimits
from magisterium_async._cli.harvest._summary import Status
from magisterium_async._cli.harvest._tally import Before
from magisterium_async._harvest import HarvestFailure, HarvestStats, StateSummary
from tests.helpers.tally_fakes import pool_at, tally_of


def test_the_eta_divides_the_requests_left_by_the_quota() -> None:
    # 10 of 100 queries searched, 40 ids found, 20 fetched: 90 searches left, 20 fetches
    # pending and 90 * 4 to come; 470 requests at 15 a minute.
    stats = HarvestStats(queries=100, searched=10, unique_ids=40, fetched=20)
    tally = tally_of(stats, 100)
    assert tally.requests_left() == 470
    assert tally.eta() == pytest.approx(470 / 0.25)
    assert "queries 10/100" in Status(tally).line() and "ETA 31m20s" in Status(tally).line()


def test_the_eta_counts_the_fetches_an_earlier_run_left() -> None:
    # Resumed: every query was searched before, 10 ids are still to fetch and 4 of them
    # are done. The ETA is the 6 fetches left at 15 a minute, not 0.
    before = Before(queries_searched=30, documents_found=26, documents_to_fetch=10)
    stats = HarvestStats(queries=30, skipped_queries=30, fetched=4)
    tally = tally_of(stats, 30, before=before)
    assert tally.requests_left() == 6
    assert tally.eta() == pytest.approx(24.0)
    # With searches left and none made by this run, the state's ids per search stand in.
    stats = HarvestStats(queries=30, skipped_queries=20)
    before = Before(queries_searched=20, documents_found=40)
    assert tally_of(stats, 30, before=before).requests_left() == 10 + 10 * 2


def test_the_eta_follows_the_pace_the_pool_keeps_after_a_429() -> None:
    stats = HarvestStats(queries=10, searched=5, unique_ids=5, fetched=5)
    assert tally_of(stats, 10).eta() == pytest.approx(10 / 0.25)
    slowed = tally_of(stats, 10, pool=lambda: pool_at(7.5))  # halved by the adaptive limiter
    assert slowed.eta() == pytest.approx(10 / 0.125)


def test_the_eta_is_zero_when_nothing_is_left_and_unknown_without_a_total() -> None:
    done = HarvestStats(queries=3, searched=3, unique_ids=2, fetched=2)
    assert tally_of(done, 3).eta() == 0.0
    assert tally_of(HarvestStats(searched=3), None).eta() is None
    assert tally_of(HarvestStats(), 10).eta() is None  # no search yet: how many ids to come?
    assert "ETA ?" in Status(tally_of(HarvestStats(), 10)).line()


def test_a_failed_search_is_not_done_and_not_left_for_this_run() -> None:
    failure = HarvestFailure("search", "grace", APIConnectionError("down"))
    stats = HarvestStats(queries=2, searched=1, unique_ids=1, fetched=1, failed=1)
    tally = tally_of(stats, 2, failures=[failure])
    assert tally.queries_done == 1 and tally.requests_left() == 0
    assert "queries 1/2 · docs 1 ·" in Status(tally).line()


def test_the_eta_uses_the_observed_pace_when_the_quota_is_lifted() -> None:
    stats = HarvestStats(searched=10, unique_ids=10, fetched=10, started=0.0, finished=10.0)
    # 2 requests a second so far; 10 searches and 10 fetches left.
    assert tally_of(stats, 20, RateLimits.unlimited()).eta() == pytest.approx(10.0)


def test_before_reads_a_state_summary() -> None:
    state = StateSummary(
        queries={"searched": 20, "failed": 1},
        documents={"delivered": 30, "pending": 4, "failed": 1, "not_found": 2, "fetched": 3},
        runs=2,
    )
    assert Before.of(state) == Before(
        queries_searched=20, documents_found=40, documents_delivered=30, documents_to_fetch=5
    )
