"""The harvest's arguments, checked before anything starts: one clear line for each mistake."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from magisterium_async._cli import build_parser
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli.harvest._plan import Plan, plan, query_of, unwritable
from tests.cli.helpers import cli


def _plan(tmp_path: Path, *argv: str) -> Plan:
    args = build_parser().parse_args(["harvest", *argv])
    where = plan(args)
    where.close()
    return where


def _refused(tmp_path: Path, *argv: str) -> str:
    args = build_parser().parse_args(["harvest", *argv])
    with pytest.raises(CliError) as caught:
        plan(args)
    assert caught.value.code == ExitCode.USAGE
    assert "\n" not in str(caught.value)
    return str(caught.value)


async def test_comments_and_blank_lines_of_a_queries_file_are_not_queries(
    tmp_path: Path,
) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("# saints\ngrace\n\n   \n  # an indented comment\nmercy and love  \n")
    where = _plan(tmp_path, str(queries), "-q", "#literal")
    assert where.total == 3
    where = plan(build_parser().parse_args(["harvest", str(queries), "-q", "#literal"]))
    try:
        assert [q async for q in where.lines()] == ["#literal", "grace", "mercy and love"]
    finally:
        where.close()
    assert [query_of(line) for line in ("#x", " # x", "", "a # b")] == [None, None, None, "a # b"]


def test_a_blank_query_is_refused(tmp_path: Path) -> None:
    assert _refused(tmp_path, "-q", "grace", "-q", "  ") == "--query must not be blank"
    assert not list(tmp_path.iterdir())


def test_a_directory_as_out_or_state_is_named_as_such(tmp_path: Path) -> None:
    message = _refused(tmp_path, "-q", "grace", "--out", str(tmp_path))
    assert message == (
        f"--out {tmp_path} is a directory: give a file in it, such as {tmp_path}/docs.jsonl"
    )
    assert "--resume" not in message
    message = _refused(tmp_path, "-q", "grace", "--state", str(tmp_path), "--resume")
    assert message.startswith(f"--state {tmp_path} is a directory")


def test_an_unwritable_out_is_refused_before_the_harvest(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "docs.jsonl"
    assert _refused(tmp_path, "-q", "grace", "--out", str(missing)) == (
        f"cannot write --out {missing}: the directory {missing.parent} does not exist"
    )
    afile = tmp_path / "afile"
    afile.write_text("")
    message = _refused(tmp_path, "-q", "grace", "--out", str(afile / "docs.jsonl"))
    assert message == f"cannot write --out {afile}/docs.jsonl: a part of {afile} is not a directory"
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def test_a_writable_out_is_tried_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    where = _plan(tmp_path, "-q", "grace", "--out", str(out))
    assert (where.out, where.state) == (str(out), f"{out}.state.sqlite")
    assert not out.exists() and not Path(f"{out}.state.sqlite").exists()


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "the file system is read-only"),
        (errno.ENOSPC, "the disk is full"),
        (errno.EIO, "input/output error"),
    ],
)
def test_why_a_path_cannot_be_written_is_said_in_words(code: int, why: str) -> None:
    error = unwritable("--out", "/data/docs.jsonl", OSError(code, os.strerror(code)))
    assert str(error) == f"cannot write --out /data/docs.jsonl: {why}"
    assert error.code == ExitCode.USAGE


def test_a_refused_path_in_a_directory_that_exists_is_not_called_missing(tmp_path: Path) -> None:
    # /proc/x answers ENOENT though /proc exists: say what the system said, not a wrong why.
    path = str(tmp_path / "docs.jsonl")
    error = unwritable("--out", path, OSError(errno.ENOENT, os.strerror(errno.ENOENT)))
    assert str(error) == f"cannot write --out {path}: no such file or directory"


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
    assert "nothing to harvest: stdin held no query" in refused.err
    assert list(tmp_path.iterdir()) == []
    dry = cli(
        "harvest", "--emulator", "-", "-o", "docs.jsonl", "--dry-run", stdin=text, cwd=tmp_path
    )
    assert dry.code == 2 and "nothing to harvest: stdin held no query" in dry.err
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harvest - --out docs.jsonl <&-`: Python leaves ``sys.stdin`` None; no traceback."""
    monkeypatch.setattr("sys.stdin", None)
    out = str(tmp_path / "docs.jsonl")
    assert _refused(tmp_path, "-", "--out", out) == "cannot read stdin: it is closed"
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


def test_a_query_past_the_bound_is_refused_before_the_harvest(tmp_path: Path) -> None:
    """The bound every skill method checks, checked up front: nothing sent, nothing made."""
    queries = tmp_path / "queries.txt"
    queries.write_text("grace\n" + "x" * 70_000 + "\n", encoding="utf-8")
    message = _refused(tmp_path, str(queries), "--out", str(tmp_path / "d.jsonl"))
    assert message.startswith(f"{queries}, line 2: query is 70,000 bytes long, more than the ")
    message = _refused(tmp_path, "-q", "y" * 70_000)
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
