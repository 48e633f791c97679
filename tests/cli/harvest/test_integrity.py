"""Nothing a user does to a harvest's files doubles or loses a document silently: the
user's steps, through the command line as users run it.

One harvest at a time per state and per output (a second is refused at once, naming the
first); an output deleted, cut, edited or added to is refused, left byte for byte; a
state the harvest did not create is refused, left byte for byte; the inputs are bounded
(``--concurrency``, queries files read a line at a time, messages quoting at most a couple
of hundred characters of an input).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.helpers import TIMEOUT, Run, clean_env, cli, jsonl

HARVEST = ("harvest", "--emulator")


@contextmanager
def running(cwd: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A harvest reading its queries from stdin, given its first one (a new harvest starts
    only once it has a query): it holds its files until stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", *HARVEST, "-", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=clean_env(),
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write("grace\n")
        proc.stdin.flush()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=TIMEOUT)


def holding(proc: subprocess.Popen[str], info: Path) -> None:
    """Wait until ``proc`` holds the lock whose holder is written at ``info``."""
    deadline = time.monotonic() + TIMEOUT  # a failure bound, never the condition
    while not (info.exists() and f'"pid": {proc.pid}' in info.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the harvest never took its lock"
        time.sleep(0.01)


def refused_and_winner(
    a: subprocess.Popen[str], b: subprocess.Popen[str]
) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
    """Of two harvests after one lock, the one that ended (refused) and the one that holds
    it, once one has ended."""
    deadline = time.monotonic() + TIMEOUT  # a failure bound, never the condition
    while a.poll() is None and b.poll() is None:
        assert time.monotonic() < deadline, "neither harvest was refused"
        time.sleep(0.01)
    return (a, b) if a.poll() is not None else (b, a)


def finish(proc: subprocess.Popen[str], queries: str = "grace\n") -> Run:
    out, err = proc.communicate(queries, timeout=TIMEOUT)
    return Run(proc.returncode, out, err)


def ids_in(path: Path) -> list[str]:
    return [str(record["id"]) for record in jsonl(path.read_text(encoding="utf-8"))]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".lock" in p.name)


# 1. Two harvests on one output ------------------------------------------------------


@pytest.mark.parametrize("second", [("--resume",), ()], ids=["resumed", "not resumed"])
def test_a_second_harvest_of_the_same_output_is_refused_naming_the_first(
    tmp_path: Path, second: tuple[str, ...]
) -> None:
    with running(tmp_path, "--out", "s2.jsonl") as first:
        holding(first, tmp_path / "s2.jsonl.lock.info")
        refused = cli(*HARVEST, "-q", "grace", "--out", "s2.jsonl", *second, cwd=tmp_path)
        done = finish(first)
    assert done.code == 0, done.err
    assert refused.code == 2, refused.err
    assert f"is in use by another harvest (pid {first.pid} on " in refused.err
    assert ", since 20" in refused.err and "killed holds nothing" in refused.err
    ids = ids_in(tmp_path / "s2.jsonl")
    assert ids and len(ids) == len(set(ids))
    again = cli(*HARVEST, "-q", "grace", "--out", "s2.jsonl", "--resume", cwd=tmp_path)
    assert again.code == 0, again.err  # the first harvest's files are whole: it resumes
    assert ids_in(tmp_path / "s2.jsonl") == ids
    assert leftovers(tmp_path) == []  # the lock files go with the harvest that held them


def test_two_harvests_started_at_once_one_runs_one_is_refused(tmp_path: Path) -> None:
    with running(tmp_path, "--out", "s2.jsonl") as a, running(tmp_path, "--out", "s2.jsonl") as b:
        # Each has its first query: whichever took the state's lock holds it while the
        # other is refused, at once, whatever either had checked before.
        refused, winner = refused_and_winner(a, b)
        lost = finish(refused, "")
        won = finish(winner)
    assert lost.code == 2, lost.err
    assert "in use by another harvest" in lost.err or "already exists" in lost.err
    assert won.code == 0, won.err
    ids = ids_in(tmp_path / "s2.jsonl")
    assert ids and len(ids) == len(set(ids))


def test_two_outputs_with_one_state_the_second_is_refused(tmp_path: Path) -> None:
    state = ("--state", "shared.sqlite")
    with running(tmp_path, "--out", "a.jsonl", *state) as first:
        holding(first, tmp_path / "shared.sqlite.lock.info")
        refused = cli(*HARVEST, "-q", "mary", "--out", "b.jsonl", *state, "--resume", cwd=tmp_path)
        assert finish(first).code == 0
    assert refused.code == 2 and f"(pid {first.pid} on " in refused.err
    assert not (tmp_path / "b.jsonl").exists()


def test_a_dry_run_of_a_state_a_harvest_holds_is_refused_naming_it(tmp_path: Path) -> None:
    with running(tmp_path, "--out", "d.jsonl") as first:
        holding(first, tmp_path / "d.jsonl.state.sqlite.lock.info")
        dry = cli(*HARVEST, "-q", "grace", "--out", "d.jsonl", "--dry-run", cwd=tmp_path)
        assert finish(first).code == 0
    assert dry.code == 2, (dry.out, dry.err)
    assert f"is in use by another harvest (pid {first.pid} on " in dry.err


def test_after_kill_9_two_resumes_at_once_one_runs_and_nothing_is_doubled(
    tmp_path: Path,
) -> None:
    with running(tmp_path, "--out", "k.jsonl") as victim:
        holding(victim, tmp_path / "k.jsonl.lock.info")
        assert victim.stdin is not None
        victim.stdin.write("grace\n")
        victim.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        while not (tmp_path / "k.jsonl").stat().st_size:  # a batch is on disk
            assert time.monotonic() < deadline
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=TIMEOUT)
    resume = ("--out", "k.jsonl", "--resume")
    with running(tmp_path, *resume) as a, running(tmp_path, *resume) as b:
        refused, winner = refused_and_winner(a, b)  # the killed one held nothing
        lost = finish(refused, "")
        won = finish(winner, "grace\nmary\n")
    assert lost.code == 2 and f"(pid {winner.pid} on " in lost.err, lost.err
    assert won.code == 0, won.err
    fresh = cli(*HARVEST, "-q", "grace", "-q", "mary")
    ids = ids_in(tmp_path / "k.jsonl")
    assert len(ids) == len(set(ids))  # 0 duplicated
    assert sorted(ids) == sorted(str(d["id"]) for d in jsonl(fresh.out))  # 0 lost
    assert leftovers(tmp_path) == []
    # The state rebuilds the file the killed and the resumed runs wrote, line for line.
    rebuilt = cli("rebuild", "k.jsonl.state.sqlite", cwd=tmp_path)
    assert rebuilt.code == 0 and rebuilt.out == (tmp_path / "k.jsonl").read_text("utf-8")


# 2. and 3. An output deleted, cut, edited or added to ---------------------------------


def harvested(tmp_path: Path, name: str = "ed3.jsonl") -> Path:
    first = cli(*HARVEST, "-q", "grace", "--out", name, cwd=tmp_path)
    assert first.code == 0, first.err
    return tmp_path / name


def resume(tmp_path: Path, name: str = "ed3.jsonl") -> Run:
    return cli(*HARVEST, "-q", "grace", "-q", "mary", "--out", name, "--resume", cwd=tmp_path)


def test_a_deleted_output_is_refused_saying_how_many_documents_it_held(tmp_path: Path) -> None:
    out = harvested(tmp_path)
    count = len(ids_in(out))
    state = (tmp_path / "ed3.jsonl.state.sqlite").read_bytes()
    out.unlink()
    refused = resume(tmp_path)
    assert refused.code == 2
    assert (
        f"ed3.jsonl is gone, but its harvest's state ed3.jsonl.state.sqlite records {count} "
        "documents written there"
    ) in refused.err
    assert "Put the file back" in refused.err and "remove ed3.jsonl.state.sqlite" in refused.err
    assert not out.exists() and (tmp_path / "ed3.jsonl.state.sqlite").read_bytes() == state


def test_a_deleted_output_run_again_as_at_first_says_what_resume_would(tmp_path: Path) -> None:
    # The README's command run again after deleting its output: the refusal names the
    # ways on that work, not an "add --resume" that only leads to the same refusal.
    out = harvested(tmp_path)
    count = len(ids_in(out))
    out.unlink()
    refused = cli(*HARVEST, "-q", "grace", "--out", "ed3.jsonl", cwd=tmp_path)
    assert refused.code == 2
    assert f"ed3.jsonl is gone, but its harvest's state ed3.jsonl.state.sqlite records {count}" in (
        refused.err
    )
    assert "add --resume" not in refused.err and not out.exists()
    assert "finished harvest" not in refused.err  # its output is gone: not said to be there


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda b: b + b'{"id":"mine","title":"my notes","text":"x"}\n', "line 3 (at byte"),
        (lambda b: b + b'{"id":"mine","ti', "ends in an incomplete line"),
        (lambda b: b[: len(b) // 2], "(it was cut short, or lines were removed from it)"),
        (lambda b: b.replace(b'"title":"', b'"title":"X', 1), "it was edited since"),
    ],
    ids=["a line added", "a partial line added", "cut in half", "edited in the middle"],
)
def test_an_edited_output_is_refused_and_left_byte_for_byte(
    tmp_path: Path, edit: object, says: str
) -> None:
    out = harvested(tmp_path)
    assert len(ids_in(out)) == 2  # the emulator's "grace": two documents, two lines
    edited = edit(out.read_bytes())  # type: ignore[operator]
    out.write_bytes(edited)
    refused = resume(tmp_path)
    assert refused.code == 2, refused.err
    assert says in refused.err and "left as it is" in refused.err
    # How to go on without spending the quota again, and what starting over costs.
    assert "To continue without spending the quota again, " in refused.err
    assert "put back the file as the harvest left it" in refused.err
    assert "(every document is then fetched again)" in refused.err
    assert (
        "Or rebuild it from the state, sending nothing: `magisterium-async rebuild "
        "ed3.jsonl.state.sqlite --out ed3.rebuilt.jsonl`"
    ) in refused.err
    assert out.read_bytes() == edited


def test_an_output_restored_byte_for_byte_from_a_backup_is_the_harvests_output(
    tmp_path: Path,
) -> None:
    argv = (*HARVEST, "-q", "grace", "-q", "hope", "--out", "d.jsonl")
    assert cli(*argv, cwd=tmp_path).code == 0
    out = tmp_path / "d.jsonl"
    backup = out.read_bytes()
    out.unlink()
    out.write_bytes(backup)  # a new inode, the bytes the harvest wrote
    again = cli(*argv, cwd=tmp_path)
    assert again.code == 0, again.err
    assert out.read_bytes() == backup  # nothing written twice
    more = cli(*argv, "-q", "mary", "--resume", cwd=tmp_path)
    assert more.code == 0, more.err
    ids = ids_in(out)
    assert out.read_bytes().startswith(backup) and len(ids) > len(jsonl(backup.decode()))
    assert len(ids) == len(set(ids))


def test_a_line_torn_by_a_killed_run_is_cut_with_a_word_and_written_again(
    tmp_path: Path,
) -> None:
    out = harvested(tmp_path)
    lines = out.read_bytes().splitlines(keepends=True)
    # As a run killed while writing its last record leaves things: that document fetched
    # and not delivered, the state's mark before its line, half the line on disk.
    last = json.loads(lines[-1])
    kept = b"".join(lines[:-1])
    out.write_bytes(kept + lines[-1][:20])
    stat = out.stat()
    mark = [stat.st_dev, stat.st_ino, len(kept), "sha256:" + hashlib.sha256(kept).hexdigest()]
    body = zlib.compress(lines[-1].rstrip(b"\n"))  # the record as the state keeps it
    db = sqlite3.connect(tmp_path / "ed3.jsonl.state.sqlite")
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'output'", (json.dumps(mark),))
        db.execute(
            "UPDATE documents SET status = 'fetched', body = ?, fetched_run = 1 WHERE id = ?",
            (body, last["id"]),
        )
    db.close()
    resumed = resume(tmp_path)
    assert resumed.code == 0, resumed.err
    # Said once, by the writer that cut it (a warning on the harvest's logger).
    said = f"ed3.jsonl: cut its incomplete last line (bytes {len(kept)} to {len(kept) + 20})"
    assert resumed.err.count(said) == 1 and "incomplete line" not in resumed.err.replace(said, "")
    ids = ids_in(out)
    assert ids.count(last["id"]) == 1 and len(ids) == len(set(ids))


# 4. A state the harvest did not create ------------------------------------------------


def user_database(path: Path) -> bytes:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
    db.close()
    return path.read_bytes()


def test_a_state_the_harvest_did_not_create_is_refused_and_left_byte_for_byte(
    tmp_path: Path,
) -> None:
    mine = user_database(tmp_path / "my.db")
    argv = (*HARVEST, "-q", "grace", "--out", "d.jsonl", "--state", "my.db")
    for resume in ((), ("--resume",)):  # no hint to --resume: it would be refused too
        refused = cli(*argv, *resume, cwd=tmp_path)
        assert refused.code == 2, refused.err
        assert "my.db is not a harvest state (an SQLite database the harvest did not create)" in (
            refused.err
        )
        assert "finished harvest" not in refused.err  # never said of what is none
    assert (tmp_path / "my.db").read_bytes() == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my.db"]  # no -wal, no d.jsonl


def test_a_foreign_file_at_the_default_state_path_is_refused_too(tmp_path: Path) -> None:
    mine = user_database(tmp_path / "d.jsonl.state.sqlite")
    refused = cli(*HARVEST, "-q", "grace", "--out", "d.jsonl", "--resume", cwd=tmp_path)
    assert refused.code == 2 and "is not a harvest state" in refused.err, refused.err
    assert (tmp_path / "d.jsonl.state.sqlite").read_bytes() == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl.state.sqlite"]


# 5., 9. and 11. Bounded inputs ---------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "1001", "99999999999", "many"])
def test_a_concurrency_out_of_range_is_refused_naming_the_option(value: str) -> None:
    run = cli(*HARVEST, "-q", "grace", "--concurrency", value)
    assert run.code == 2
    assert f"--concurrency: must be a whole number from 1 to 1000, got {value}" in run.err


def test_a_huge_query_is_quoted_in_a_couple_of_hundred_characters(tmp_path: Path) -> None:
    query = "__fail__: " + "x" * 60_000  # one line, within the bound; the emulator fails it
    (tmp_path / "q.txt").write_text(f"{query}\ngrace\n", encoding="utf-8")
    run = cli(*HARVEST, "q.txt", "--out", "d.jsonl", cwd=tmp_path)
    assert run.code == 7, run.err[:500]
    assert "first failure (search '__fail__: xxx" in run.err
    assert "… (60,010 characters))" in run.err
    assert len(run.err) < 2000


def test_a_queries_file_is_read_as_a_stream_and_a_decoding_error_names_file_and_line(
    tmp_path: Path,
) -> None:
    queries = tmp_path / "q.txt"
    # The bad byte some 5 MB in, on line 350,002: the message says the line, not where a
    # decoder's buffer happened to start.
    queries.write_bytes(b"grace\n" + b"mercy and love\n" * 350_000 + b"\xff\xfe bad\nmary\n")
    run = cli(*HARVEST, "q.txt", "--out", "d.jsonl", cwd=tmp_path)
    assert run.code == 2
    assert "q.txt, line 350002: not UTF-8 text (byte 0xff at byte 1 of the line)" in run.err
    assert "Traceback" not in run.err and not (tmp_path / "d.jsonl").exists()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_queries_file_without_line_ends_is_refused_not_read_whole() -> None:
    run = cli(*HARVEST, "/dev/zero")
    assert run.code == 2
    assert "/dev/zero, line 1: longer than 1,048,576 characters" in run.err


def test_an_output_cut_while_the_harvest_writes_it_is_said_in_the_summary(
    tmp_path: Path,
) -> None:
    out = tmp_path / "u.jsonl"
    with running(tmp_path, "--out", "u.jsonl") as proc:
        deadline = time.monotonic() + TIMEOUT  # a failure bound, never the condition
        while not out.exists() or not out.stat().st_size:  # the first batch is on disk
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out.write_bytes(b"")  # `: > u.jsonl` while it runs
        done = finish(proc, "mercy\n")
    assert done.code == 2, done.err
    assert "u.jsonl was changed while the harvest wrote it (it holds " in done.err
    assert "Nothing is lost: the state holds every document" in done.err
    assert "magisterium-async rebuild u.jsonl.state.sqlite --out u.rebuilt.jsonl" in done.err
    rebuilt = cli("rebuild", "u.jsonl.state.sqlite", cwd=tmp_path)
    assert rebuilt.code == 0 and len(jsonl(rebuilt.out)) > len(ids_in(out))
