"""The command line's pieces, in process: rendering, JSON, exit codes, the harvest's ETA."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from magisterium_async import (
    Answer,
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    Citation,
    InvalidParamsError,
    MagisteriumError,
    PlanRequiredError,
    RateLimitError,
    RateLimits,
    SearchResult,
    Task,
    TaskNotFoundError,
    TaskStatus,
)
from magisterium_async._cli import _quota, build_parser
from magisterium_async._cli_errors import CliError, ExitCode, describe, exit_code_for
from magisterium_async._cli_harvest import _Status
from magisterium_async._cli_output import print_json, show_answer, show_results
from magisterium_async._harvest import HarvestFailure, HarvestStats


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _answer() -> Answer:
    return Answer(
        text="Grace is a participation in the life of God. [1]",
        citations=[
            Citation(
                document_title="Catechism",
                document_author="Church",
                document_year=1992,
                document_reference="CCC 1997",
                source_url="https://example.org/ccc",
            ),
            Citation(cited_text="no title here"),
        ],
        related_questions=["What is sanctifying grace?"],
        context_id="ctx-1",
        task=Task(id="task-1", context_id="ctx-1", status=TaskStatus(state="completed")),
    )


def test_an_answer_lists_its_sources_and_keeps_brackets_literal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    show_answer(_answer())
    out = capsys.readouterr().out
    assert "life of God. [1]" in out  # not swallowed as rich markup
    assert "[1] Catechism — Church, 1992, CCC 1997" in out
    assert "https://example.org/ccc" in out
    assert "[2] (untitled source)" in out
    assert "• What is sanctifying grace?" in out
    assert "context ctx-1" in out and "task task-1" in out


def test_json_of_an_answer_includes_its_task(capsys: pytest.CaptureFixture[str]) -> None:
    print_json(_answer())
    body = json.loads(capsys.readouterr().out)
    assert body["citations"][0]["document_year"] == 1992
    # The task as on the wire: camelCase, empty fields left out.
    assert body["task"] == {
        "kind": "task",
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {"state": "completed"},
    }


def test_no_search_results_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    show_results("nothing", [])
    assert "No documents found for 'nothing'." in capsys.readouterr().out
    show_results("x", [SearchResult(id="7", url="https://e.org/7", title="Seven")])
    assert "Seven" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (AuthenticationError("Unauthorized"), ExitCode.AUTH),
        (PlanRequiredError("Paid plan required"), ExitCode.AUTH),
        (RateLimitError("Rate limit exceeded", data={"retryAfter": 7}), ExitCode.RATE_LIMITED),
        (APIConnectionError("refused"), ExitCode.CONNECTION),
        (APITimeoutError("slow"), ExitCode.CONNECTION),
        (TaskNotFoundError("Task not found"), ExitCode.NOT_FOUND),
        (InvalidParamsError("Invalid state transition"), ExitCode.ERROR),
        (MagisteriumError("other"), ExitCode.ERROR),
        (ValueError("query must not be blank"), ExitCode.USAGE),
        (CliError("gone", ExitCode.NOT_FOUND), ExitCode.NOT_FOUND),
    ],
)
def test_exit_codes(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code
    assert "\n" not in describe(error)


def test_describe_gives_the_wait_of_a_rate_limit() -> None:
    message = describe(RateLimitError("Rate limit exceeded", data={"retryAfter": 7}))
    assert "wait 7 s" in message


def test_quota_parsing() -> None:
    assert _quota("15/2") == RateLimits(15, 2)
    assert _quota("30/4/10") == RateLimits(30, 4, period=10)
    assert math.isinf(_quota("unlimited").default)
    with pytest.raises(argparse.ArgumentTypeError):
        _quota("fast")


def test_common_options_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--emulator", "search", "grace"])
    after = parser.parse_args(["search", "grace", "--json", "--emulator"])
    neither = parser.parse_args(["search", "grace"])
    assert before.json and before.emulator and after.json and after.emulator
    assert not neither.json and not neither.emulator


@dataclass
class _Run:
    stats: HarvestStats
    failures: list[HarvestFailure] = field(default_factory=list)


@dataclass
class _Sink:
    written: int = 0
    skipped: int = 0


def _status(stats: HarvestStats, total: int | None, quota: RateLimits) -> _Status:
    run: Any = _Run(stats)
    sink: Any = _Sink(written=stats.fetched)
    return _Status(run, sink, total, quota)


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
