"""One harvest process, run in this process: documents out once each as JSON Lines, a
summary, a refused token that stops everything at once, and files refused up front.

(The same command run as users run it, with signals and --resume, is in test_harvest.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from magisterium_async._cli import main
from tests.cli.conftest import Served


def test_documents_go_to_stdout_once_each_and_the_summary_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["harvest", "--emulator", "--synthetic", "300", "--json"]
    code = main([*argv, "--query", "grace", "--query", "mercy", "--query", "grace"])
    out, err = capsys.readouterr()
    assert code == 0, err
    documents = [json.loads(line) for line in out.splitlines()]
    ids = [document["id"] for document in documents]
    assert ids and len(ids) == len(set(ids))
    summary = json.loads(err)
    assert summary["ending"] == "done"
    assert summary["written"] == len(ids)


def test_documents_go_to_the_out_file_and_its_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "docs.jsonl"
    code = main(["harvest", "--emulator", "--json", "--query", "grace", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines and json.loads(err)["written"] == len(lines)
    assert (tmp_path / "docs.jsonl.state.sqlite").exists()


def test_a_refused_token_stops_the_harvest_at_once(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MAGISTERIUM_TOKEN", "sk-wrong-0123456789")
    queries = [word for n in range(50) for word in ("--query", f"q{n}")]
    code = main(["harvest", "--base-url", served.base_url, "--json", *queries])
    out, err = capsys.readouterr()
    assert code == 3
    assert out == ""
    assert "sk-wrong" not in err
    summary = json.loads(err.splitlines()[0])
    assert summary["ending"] == "stopped"
    assert summary["queries"] < 50  # not one refusal per query


def test_an_out_file_that_cannot_be_written_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "docs.jsonl"
    code = main(["harvest", "--emulator", "--query", "grace", "--out", str(out)])
    assert code == 2
    assert f"cannot write --out {out}: the directory" in capsys.readouterr().err


def test_a_state_that_is_not_a_harvest_state_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.sqlite"
    state.write_bytes(b"this is not sqlite" * 100)
    code = main(["harvest", "--emulator", "--query", "grace", "--state", str(state), "--resume"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{state} is not a harvest state (not an SQLite database)" in err
    assert state.read_bytes() == b"this is not sqlite" * 100  # not ours: left as it was
