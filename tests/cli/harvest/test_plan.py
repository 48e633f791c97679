"""The harvest's arguments, checked before anything starts: one clear line for each
mistake, and no file made. Run in this process as users run it (``main``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from magisterium_async._cli import main
from tests.cli.helpers import cli


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line ``harvest ARGV`` is refused with (exit 2, nothing on stdout)."""
    code = main(["harvest", "--emulator", *argv])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and err.count("\n") == 1, err
    return err.removeprefix("magisterium-async: error: ").rstrip("\n")


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_comments_and_blank_lines_of_a_queries_file_are_not_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], end: str
) -> None:
    """Whatever the line ends (Unix, Windows, old Mac) and a byte order mark (Notepad)."""
    queries = tmp_path / "queries.txt"
    lines = ["\ufeff# saints", "grace", "", "   ", "  # an indented comment", "mercy and love  "]
    queries.write_bytes(end.join([*lines, "a # b", ""]).encode())
    argv = [str(queries), "-q", "#literal", "--dry-run", "--json"]
    assert main(["harvest", "--emulator", *argv]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["searches"] == ["#literal", "grace", "mercy and love", "a # b"]


def test_a_blank_query_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused = _refused(capsys, "-q", "grace", "-q", "  ")
    assert refused == "--query: query must not be empty or blank"
    assert not list(tmp_path.iterdir())


def test_a_directory_as_out_or_state_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(capsys, "-q", "grace", "--out", str(tmp_path))
    assert message == (
        f"--out {tmp_path} is a directory: give a file in it, such as {tmp_path}/docs.jsonl"
    )
    assert "--resume" not in message
    message = _refused(capsys, "-q", "grace", "--state", str(tmp_path), "--resume")
    assert message.startswith(f"--state {tmp_path} is a directory")
    if os.path.exists("/dev/null"):  # a device: fine as --out, never as a state
        message = _refused(capsys, "-q", "grace", "--state", "/dev/null")
        assert message == "--state /dev/null is a character device, not a file"


def test_an_unwritable_out_is_refused_before_the_harvest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such" / "docs.jsonl"
    assert _refused(capsys, "-q", "grace", "--out", str(missing)) == (
        f"cannot write --out {missing}: the directory {missing.parent} does not exist"
    )
    afile = tmp_path / "afile"
    afile.write_text("")
    message = _refused(capsys, "-q", "grace", "--out", str(afile / "docs.jsonl"))
    assert message == f"cannot write --out {afile}/docs.jsonl: a part of {afile} is not a directory"
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def test_a_writable_out_is_tried_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "docs.jsonl"
    assert main(["harvest", "--emulator", "-q", "grace", "--out", str(out), "--dry-run"]) == 0
    assert f"Documents would go to {out} (state {out}.state.sqlite)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["", "\n  \n", "# saints\n\n  # more\n", "\ufeff\n"])
def test_a_harvest_of_nothing_is_refused_and_writes_nothing(tmp_path: Path, text: str) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text(text, encoding="utf-8")
    refused = cli(
        "harvest", "--emulator", "--json", str(queries), "--out", "docs.jsonl", cwd=tmp_path
    )
    assert refused.code == 2, refused.err
    assert "nothing to harvest: " in refused.err and "holds no query" in refused.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries.txt"]


@pytest.mark.parametrize("text", ["", "# saints\n\n"])
def test_stdin_that_holds_no_query_is_refused_and_writes_nothing(tmp_path: Path, text: str) -> None:
    """`harvest - --out docs.jsonl < /dev/null`: stdin can be counted only by reading it."""
    refused = cli("harvest", "--emulator", "-", "--out", "docs.jsonl", stdin=text, cwd=tmp_path)
    assert refused.code == 2, refused.err
    assert "nothing to harvest: stdin holds no query" in refused.err
    assert list(tmp_path.iterdir()) == []
    dry = cli(
        "harvest", "--emulator", "-", "-o", "docs.jsonl", "--dry-run", stdin=text, cwd=tmp_path
    )
    assert dry.code == 2 and "nothing to harvest: stdin holds no query" in dry.err
    # One query on stdin is a harvest, the query read once.
    done = cli(
        "harvest",
        "--emulator",
        "--json",
        "-",
        "--out",
        "docs.jsonl",
        stdin="\ngrace\n",
        cwd=tmp_path,
    )
    assert done.code == 0, done.err
    assert json.loads(done.err)["queries"] == 1 and (tmp_path / "docs.jsonl").read_text()


def test_a_closed_stdin_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`harvest - --out docs.jsonl <&-`: Python leaves ``sys.stdin`` None; no traceback."""
    monkeypatch.setattr("sys.stdin", None)
    out = str(tmp_path / "docs.jsonl")
    assert _refused(capsys, "-", "--out", out) == "cannot read stdin: it is closed"
    assert list(tmp_path.iterdir()) == []


def test_resume_where_no_state_exists_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    refused = cli(
        "harvest", "--emulator", "-q", "grace", "--out", "docs.jsonl", "--resume", cwd=tmp_path
    )
    assert refused.code == 2, refused.err
    assert "there is no harvest state at docs.jsonl.state.sqlite to continue" in refused.err
    assert "run without --resume" in refused.err
    assert list(tmp_path.iterdir()) == []


def test_a_bom_and_surrounding_whitespace_are_not_part_of_a_query(tmp_path: Path) -> None:
    """A file saved by Notepad starts with a BOM: its first query is the same as a -q one,
    searched once."""
    queries = tmp_path / "queries.txt"
    queries.write_bytes("\ufeffgrace\r\n  mercy \t\n".encode())
    done = cli(
        "harvest",
        "--emulator",
        "--json",
        str(queries),
        "-q",
        " grace ",
        "--out",
        "d.jsonl",
        cwd=tmp_path,
    )
    assert done.code == 0, done.err
    summary = json.loads(done.err.strip().splitlines()[-1])
    assert (summary["searched"], summary["skipped_queries"]) == (2, 1), summary


def test_a_query_past_the_bound_is_refused_before_the_harvest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bound every skill method checks, checked up front: nothing sent, nothing made."""
    queries = tmp_path / "queries.txt"
    queries.write_text("grace\n" + "x" * 70_000 + "\n", encoding="utf-8")
    message = _refused(capsys, str(queries), "--out", str(tmp_path / "d.jsonl"))
    assert message.startswith(f"{queries}, line 2: query is 70,000 bytes long, more than the ")
    message = _refused(capsys, "-q", "y" * 70_000)
    assert message.startswith("--query: query is 70,000 bytes long")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries.txt"]


@pytest.mark.parametrize("state", ["same.jsonl", "./same.jsonl", "link.sqlite"])
def test_out_and_state_naming_one_file_are_refused_and_nothing_is_made(
    tmp_path: Path, state: str
) -> None:
    (tmp_path / "link.sqlite").symlink_to("same.jsonl")  # two names of one file
    refused = cli(
        "harvest", "--emulator", "-q", "grace", "--out", "same.jsonl", "--state", state,
        cwd=tmp_path,
    )  # fmt: skip
    assert refused.code == 2, refused.err
    assert "--out and --state name the same file" in refused.err
    assert "in use by another harvest" not in refused.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.sqlite"]


@pytest.mark.parametrize("option", ["--out", "--state"])
def test_an_output_or_state_that_is_the_queries_file_is_refused(
    tmp_path: Path, option: str
) -> None:
    (tmp_path / "q.txt").write_text("grace\nhope\n")
    other = ("--out", "x.jsonl") if option == "--state" else ()
    for resume in ((), ("--resume",)):
        refused = cli(
            "harvest", "--emulator", "q.txt", *other, option, "q.txt", *resume, cwd=tmp_path
        )
        assert refused.code == 2, refused.err
        assert f"{option} q.txt is the queries file q.txt" in refused.err
        assert "--resume" not in refused.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.txt"]
    assert (tmp_path / "q.txt").read_text() == "grace\nhope\n"


@pytest.mark.parametrize("option", ["--out", "--state"])
def test_an_empty_out_or_state_is_refused(tmp_path: Path, option: str) -> None:
    other = ("--out", "z.jsonl") if option == "--state" else ()
    refused = cli("harvest", "--emulator", "-q", "grace", *other, option, "", cwd=tmp_path)
    assert refused.code == 2, refused.err
    assert f"{option}: must name a file, not be empty" in refused.err
    assert list(tmp_path.iterdir()) == []
