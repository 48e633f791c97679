"""What a harvest tells its user, computed in one place: the figures (this run's, all
runs', the ETA from the quota or the pace kept), the status line and the summary that say
them the same way. Pure rules, tested directly; the same words through the command line
are in the other tests of this folder."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from magisterium_async import APIConnectionError, RateLimits
from magisterium_async._cli._output import Output
from magisterium_async._cli.harvest._run import Tally, status, summary
from magisterium_async._harvest import HarvestFailure, HarvestStats, StateSummary
from magisterium_async._ratelimit import PoolStats
from tests.cli.helpers import cli

PRO = RateLimits(15, 2)


@dataclass
class _Run:
    stats: HarvestStats
    failures: list[HarvestFailure] = field(default_factory=list)


@dataclass
class _Sink:
    written: int = 0
    skipped: int = 0
    existing: int = 0
    changed: str | None = None


def tally_of(
    stats: HarvestStats,
    total: int | None,
    quota: RateLimits = PRO,
    *,
    written: int | None = None,
    existing: int = 0,
    failures: list[HarvestFailure] | None = None,
    before: StateSummary | None = None,
    **extra: Any,
) -> Tally:
    run: Any = _Run(stats, failures or [])
    sink = _Sink(written=stats.fetched if written is None else written, existing=existing)
    return Tally(run, sink, total=total, quota=quota, before=before, **extra)


def held(searched: int, documents: dict[str, int]) -> StateSummary:
    """What a state held before a run: ``searched`` queries answered, ``documents``."""
    return StateSummary({"searched": searched}, documents, None)


def pool_at(current_rate: float) -> PoolStats:
    return PoolStats("default", 0, 0, 0, 0.0, current_rate, 15.0, 0, 0)


def test_the_eta_divides_the_requests_left_by_the_quota() -> None:
    # 10 of 100 queries searched, 40 ids found, 20 fetched: 90 searches left, 20 fetches
    # pending and 90 * 4 to come; 470 requests at 15 a minute.
    stats = HarvestStats(queries=100, searched=10, unique_ids=40, fetched=20)
    tally = tally_of(stats, 100)
    assert tally.eta() == pytest.approx(470 / 0.25)
    assert "queries 10/100" in status(tally) and "ETA 31m20s" in status(tally)


def test_the_eta_counts_the_fetches_an_earlier_run_left() -> None:
    # Resumed: every query was searched before, 10 ids are still to fetch and 4 of them
    # are done. The ETA is the 6 fetches left at 15 a minute, not 0.
    before = held(searched=30, documents={"pending": 10, "delivered": 16})
    stats = HarvestStats(queries=30, skipped_queries=30, fetched=4)
    tally = tally_of(stats, 30, before=before)
    assert tally.eta() == pytest.approx(6 / 0.25)
    # With searches left and none made by this run, the state's ids per search stand in.
    stats = HarvestStats(queries=30, skipped_queries=20)
    before = held(searched=20, documents={"delivered": 40})
    assert tally_of(stats, 30, before=before).eta() == pytest.approx((10 + 10 * 2) / 0.25)


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
    assert "ETA ?" in status(tally_of(HarvestStats(), 10))


def test_a_failed_search_is_not_done_and_not_left_for_this_run() -> None:
    failure = HarvestFailure("search", "grace", APIConnectionError("down"))
    stats = HarvestStats(queries=2, searched=1, unique_ids=1, fetched=1, failed=1)
    tally = tally_of(stats, 2, failures=[failure])
    assert tally.queries_done == 1 and tally.eta() == 0.0
    assert "queries 1/2 · docs 1 ·" in status(tally)


def test_the_eta_uses_the_observed_pace_when_the_quota_is_lifted() -> None:
    stats = HarvestStats(searched=10, unique_ids=10, fetched=10, started=0.0, finished=10.0)
    # 2 requests a second so far; 10 searches and 10 fetches left.
    assert tally_of(stats, 20, RateLimits.unlimited()).eta() == pytest.approx(10.0)


def test_the_status_line_counts_all_runs_and_this_run_in_documents_a_minute() -> None:
    stats = HarvestStats(
        queries=30, searched=12, skipped_queries=11, unique_ids=30, fetched=22, started=0.0
    )
    stats.finished = 60.0
    tally = tally_of(stats, 30, existing=11)
    line = status(tally)
    assert line.startswith("queries 23/30 (12 this run) · docs 33 (22 this run) · 22.0 docs/min")
    # Half a minute into a 15-a-minute quota: the rate is over the quota's minute, not the
    # burst of its first seconds.
    fresh = tally_of(HarvestStats(queries=2, searched=2, fetched=3, started=0.0, finished=30.0), 2)
    assert status(fresh).startswith("queries 2/2 · docs 3 · 3.0 docs/min")
    burst = HarvestStats(queries=300, searched=10, fetched=300, started=0.0, finished=3.6)
    assert tally_of(burst, 300, RateLimits(300, 2)).per_minute == 300.0  # not 5000
    # No quota: the pace kept, once the run is long enough to have one.
    assert tally_of(burst, 300, RateLimits.unlimited()).per_minute is None  # 3.6 s
    assert "docs/min" not in status(tally_of(burst, 300, RateLimits.unlimited()))
    long = HarvestStats(queries=300, searched=10, fetched=1000, started=0.0, finished=12.0)
    assert tally_of(long, 300, RateLimits.unlimited()).per_minute == pytest.approx(5000.0)


def test_the_status_line_says_it_waits_for_quota_and_until_when() -> None:
    stats = HarvestStats(queries=40, searched=15, unique_ids=15, fetched=0, started=0.0)
    waiting = PoolStats("default", 15, 0, 0, 0.0, 15.0, 15.0, 0, 4, next_start_in=42.0)
    tally = tally_of(stats, 40, pool=lambda: waiting)
    noon = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    line = status(tally, wall=lambda: noon)
    assert "waiting for quota: next request in 42s (at 12:00:42)" in line
    # 25 searches and 15 fetches + 25 to come: the first at the quota's word, the rest
    # at 15 a minute; the ETA counts down while the wait lasts.
    assert tally.eta() == pytest.approx(42 + 64 / 0.25)
    later = PoolStats("default", 15, 0, 0, 0.0, 15.0, 15.0, 0, 4, next_start_in=12.0)
    assert tally_of(stats, 40, pool=lambda: later).eta() == pytest.approx(12 + 64 / 0.25)
    idle = PoolStats("default", 15, 0, 0, 0.0, 15.0, 15.0, 2, 0)
    assert "waiting" not in status(tally_of(stats, 40, pool=lambda: idle))


def _summary_lines(tally: Tally, ending: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    summary(Output(), tally, ending=ending, out="docs.jsonl", state="s.sqlite", emulator=False)
    return capsys.readouterr().err.splitlines()


def test_the_summary_names_the_queries_searched_and_both_counts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 30 queries read, 23 searched, 22 documents written: the numbers the summary gives.
    stats = HarvestStats(queries=30, searched=23, unique_ids=40, fetched=22, results=80)
    stats.started, stats.finished = 0.0, 60.0
    lines = _summary_lines(tally_of(stats, 30), "interrupted", capsys)
    assert lines[0] == "Interrupted after 22 documents from 23 queries in 1m00s → docs.jsonl"
    # Found, fetched and written said apart: 40 ids found, 22 fetched and written.
    assert lines[1].startswith("  this run: searched 23 · results 80 · found 40 new · fetched 22")
    assert lines[1].endswith("· 22.0 documents/min")
    assert lines[2] == "  all runs: 23 of 30 queries done · 22 documents in docs.jsonl"
    assert "--resume" in lines[-1]

    resumed = HarvestStats(queries=30, skipped_queries=30, fetched=5, started=0.0, finished=6.0)
    tally = tally_of(resumed, 30, existing=20)
    lines = _summary_lines(tally, "done", capsys)
    assert lines[0].startswith("Harvested 5 documents, from earlier searches in")
    assert lines[2] == "  all runs: 30 of 30 queries done · 25 documents in docs.jsonl"

    one = HarvestStats(queries=1, searched=1, fetched=1, started=0.0, finished=1.0)
    lines = _summary_lines(tally_of(one, 1), "done", capsys)
    assert lines[2] == "  all runs: 1 of 1 query done · 1 document in docs.jsonl"


def test_the_json_summary_has_the_same_figures(capsys: pytest.CaptureFixture[str]) -> None:
    stats = HarvestStats(queries=3, searched=2, skipped_queries=1, fetched=4)
    stats.started, stats.finished = 0.0, 120.0
    tally = tally_of(stats, 3, existing=6)
    summary(Output(json=True), tally, ending="done", out="d", state="s", emulator=False)
    record = json.loads(capsys.readouterr().err)
    assert record["queries_total"] == 3 and record["queries_done"] == 3
    assert record["written"] == 4 and record["documents_total"] == 10
    assert record["documents_per_minute"] == 2.0


def test_a_finished_harvest_with_failures_says_resume_retries_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failure = HarvestFailure("fetch", "10234", APIConnectionError("down"))
    stats = HarvestStats(queries=2, searched=2, unique_ids=3, fetched=2, failed=1)
    lines = _summary_lines(tally_of(stats, 2, failures=[failure]), "done", capsys)
    assert lines[-2].startswith("  first failure (fetch '10234'):")
    assert lines[-1] == "  run the same command with --resume to continue (state: s.sqlite)"
    clean = HarvestStats(queries=2, searched=2, unique_ids=2, fetched=2)
    assert not [
        line for line in _summary_lines(tally_of(clean, 2), "done", capsys) if "--resume" in line
    ]


def test_the_summary_counts_distinct_queries_when_the_input_repeats_them(tmp_path: Path) -> None:
    """A queries file twice and stdin that repeats it: each figure counts a query once."""
    (tmp_path / "bom.txt").write_bytes("\ufeffgrace\nhope\nmercy\n".encode())
    stdin = "grace\nhope\nmary\n"  # 4 distinct queries in all, 5 lines repeat them
    first = cli("harvest", "--emulator", "bom.txt", "bom.txt", "-", "--out", "v.jsonl",
                stdin=stdin, cwd=tmp_path)  # fmt: skip
    assert first.code == 0, first.err
    lines = first.err.splitlines()
    assert " from 4 queries in " in lines[0]
    assert lines[1].startswith("  this run: searched 4 (5 repeated in the input, counted once) ")
    assert lines[2].startswith("  all runs: 4 queries done · ")
    # Run again with a new query: the answered ones are skipped once each, the repeats said
    # apart, and the done figure is out of the distinct total.
    again = cli("harvest", "--emulator", "--json", "bom.txt", "bom.txt", "-q", "saints",
                "--out", "v.jsonl", cwd=tmp_path)  # fmt: skip
    assert again.code == 0, again.err
    record = json.loads(again.err.splitlines()[-1])
    assert (record["searched"], record["skipped_queries"], record["repeated_queries"]) == (1, 6, 3)
    assert (record["queries_done"], record["queries_total"]) == (4, 4)
    shown = cli("harvest", "--emulator", "bom.txt", "bom.txt", "-q", "saints", "-q", "love",
                "--out", "v.jsonl", cwd=tmp_path)  # fmt: skip
    lines = shown.err.splitlines()
    assert " from 1 query in " in lines[1]
    assert (
        "searched 1 (skipped 4 searched before; 3 repeated in the input, counted once)"
        in (lines[2])
    )
    assert lines[3].startswith("  all runs: 5 of 5 queries done · ")
