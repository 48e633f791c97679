"""A harvest's state that is no whole database any more (cut short, overwritten): every
command that reads it refuses it the same way (exit 2), leaves it as it is, and says
what is left to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import cli

STATE = "docs.jsonl.state.sqlite"


@pytest.fixture
def damaged(tmp_path: Path) -> bytes:
    run = cli("harvest", "--emulator", "-q", "grace", "--out", "docs.jsonl", cwd=tmp_path)
    assert run.code == 0, run.err
    whole = (tmp_path / STATE).read_bytes()
    assert len(whole) > 8192  # more than one page: a cut keeps SQLite's header
    cut = whole[: len(whole) // 2]
    (tmp_path / STATE).write_bytes(cut)
    return cut


@pytest.mark.parametrize(
    "argv",
    [
        ("harvest", "--emulator", "-q", "grace", "--out", "docs.jsonl", "--resume"),
        ("rebuild", STATE),
        ("rebuild", STATE, "--out", "again.jsonl"),
    ],
    ids=["harvest --resume", "rebuild to stdout", "rebuild --out"],
)
def test_a_cut_state_is_refused_with_exit_2_and_left_as_it_is(
    tmp_path: Path, damaged: bytes, argv: tuple[str, ...]
) -> None:
    run = cli(*argv, cwd=tmp_path)
    assert run.code == 2, run.err
    assert f"harvest state {STATE}: " in run.err, run.err
    assert "it was left as it is: put back a copy from a backup" in run.err
    assert "Traceback" not in run.err and run.out == ""
    assert (tmp_path / STATE).read_bytes() == damaged
    assert not (tmp_path / "again.jsonl").exists()
