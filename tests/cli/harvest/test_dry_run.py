"""``harvest --dry-run``: the searches a harvest would send and the time they take at the
quota, against the emulator with its limits on; nothing arrives there, no file is made."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from magisterium_async.testing import Emulator, EmulatorConfig, RateLimitConfig
from tests.cli.helpers import cli


async def test_a_dry_run_prints_the_searches_and_their_time_and_sends_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "queries.txt").write_text("\ufeffgrace\n# a comment\n\nmercy\n", "utf-8")
    limits = RateLimitConfig(default=2, expensive=1, period=60.0)
    async with Emulator(EmulatorConfig(rate_limits=limits)) as emulator:
        env = {
            "MAGISTERIUM_TOKEN": emulator.token,
            "MAGISTERIUM_BASE_URL": emulator.base_url,
            "MAGISTERIUM_QUOTA": "2/1",  # the emulator's, as `emulator --limits` prints it
        }
        argv = ["harvest", "queries.txt", "-q", "hope", "--out", "docs.jsonl", "--dry-run"]
        shown = await asyncio.to_thread(cli, *argv, cwd=tmp_path, env=env)
        machine = await asyncio.to_thread(cli, *argv, "--json", cwd=tmp_path, env=env)
        assert emulator.stats.total == 0  # nothing was sent
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert (
        lines[0] == "Dry run: 3 searches would be sent first, from the default pool at 2 per 60 s:"
    )
    assert lines[1:4] == ["  search 'hope'", "  search 'grace'", "  search 'mercy'"]
    # Two at once, the third once the window (60 s) and its margin (1 s) have passed.
    assert "The searches alone take 1m01s at this quota" in shown.out
    assert "unknown until they answer" in shown.out and "30.5s of quota" in shown.out
    assert machine.code == 0, machine.err
    record = json.loads(machine.out)
    assert record["searches"] == ["hope", "grace", "mercy"] and record["fetches"] is None
    assert (record["searches_take"], record["per_document"], record["sent"]) == (61.0, 30.5, 0)
    made = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.iterdir()))
    assert made == ["queries.txt"]  # no file was made


def test_a_dry_run_refuses_what_the_harvest_would(tmp_path: Path) -> None:
    (tmp_path / "docs.jsonl").write_text("mine\n")
    run = cli(
        "harvest", "--emulator", "-q", "grace", "--out", "docs.jsonl", "--dry-run", cwd=tmp_path
    )
    assert run.code == 2 and "docs.jsonl exists and this harvest did not write it" in run.err
    assert (tmp_path / "docs.jsonl").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


def test_a_dry_run_counts_the_searches_the_harvest_sends(tmp_path: Path) -> None:
    """A repeated query is searched once by the harvest: the dry run counts it once too,
    and says so."""
    (tmp_path / "queries.txt").write_text("grace\nmercy\n  grace \n")
    run = cli(
        "harvest", "--emulator", "queries.txt", "--out", "docs.jsonl", "--dry-run", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.err
    record = json.loads(run.out)
    assert record["searches"] == ["grace", "mercy"] and record["repeated"] == 1
    shown = cli(
        "harvest", "--emulator", "-q", "grace", "-q", "mercy", "-q", " grace",
        "--out", "docs.jsonl", "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert shown.out.startswith("Dry run: 2 searches would be sent first")
    assert "(1 query repeated in the input would not be searched again.)" in shown.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries.txt"]


def test_a_dry_run_of_a_harvest_to_continue_counts_what_a_real_run_sends(tmp_path: Path) -> None:
    """The state read (and left byte for byte): the queries it answered are not counted."""
    (tmp_path / "q.txt").write_text("grace\nhope\nmercy\nmary\nlove\n")
    argv = ("harvest", "--emulator", "q.txt", "--out", "b.jsonl")
    assert cli(*argv, cwd=tmp_path).code == 0
    state = (tmp_path / "b.jsonl.state.sqlite").read_bytes()
    made = sorted(p.name for p in tmp_path.iterdir())
    for resume in ((), ("--resume",)):  # finished: continued with or without it
        shown = cli(*argv, *resume, "--dry-run", cwd=tmp_path)
        assert shown.code == 0, shown.err
        assert shown.out.startswith("Dry run: no search would be sent.")
        assert "(5 queries answered before, as the state b.jsonl.state.sqlite records" in (
            shown.out
        )
        assert "a run now would send no request" in shown.out
    record = json.loads(cli(*argv, "-q", "peace", "--dry-run", "--json", cwd=tmp_path).out)
    assert (record["searches"], record["answered"], record["found_to_fetch"]) == (["peace"], 5, 0)
    assert (tmp_path / "b.jsonl.state.sqlite").read_bytes() == state
    assert sorted(p.name for p in tmp_path.iterdir()) == made
    real = cli(*argv, cwd=tmp_path)
    assert "searched 0 (skipped 5 searched before)" in real.err  # as the dry run said
