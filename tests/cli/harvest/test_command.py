"""The ``harvest`` command in one process: JSONL once, resume, stdin and stdout, Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from magisterium_async.testing import Emulator, EmulatorConfig, Fault
from tests.cli.helpers import TIMEOUT, clean_env, cli, jsonl


def test_harvest_writes_jsonl_once_and_resume_adds_nothing(tmp_path: Path) -> None:
    args = ("harvest", "--emulator", "--query", "grace", "--query", "Eucharist")
    first = cli(*args, "--out", "docs.jsonl", cwd=tmp_path)
    assert first.code == 0, first.err
    lines = jsonl((tmp_path / "docs.jsonl").read_text())
    ids = [line["id"] for line in lines]
    assert ids and len(ids) == len(set(ids))
    assert all({"id", "title", "author", "ref", "text"} <= line.keys() for line in lines)
    assert f"Harvested {len(ids)} documents from 2 queries" in first.err
    assert (tmp_path / "docs.jsonl.state.sqlite").exists()

    # The same command run again (the README's first one): the finished harvest is
    # continued, nothing searched or written again.
    again = cli(*args, "--out", "docs.jsonl", cwd=tmp_path)
    assert again.code == 0, again.err
    assert "hold a finished harvest: continuing it as --resume does" in again.err
    assert "searched 0 (skipped 2" in again.err and "Harvested 0 documents" in again.err
    assert jsonl((tmp_path / "docs.jsonl").read_text()) == lines

    resumed = cli(*args, "--out", "docs.jsonl", "--resume", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert jsonl((tmp_path / "docs.jsonl").read_text()) == lines
    assert "Harvested 0 documents" in resumed.err
    # All runs counted: the queries searched before and the documents already in the file.
    assert f"all runs: 2 of 2 queries done · {len(ids)} documents in docs.jsonl" in resumed.err

    # A finished harvest given a new query, without --resume: only the new one is searched,
    # its new documents appended, as the docs say.
    grown = cli(*args, "-q", "mercy", "--out", "docs.jsonl", cwd=tmp_path)
    assert grown.code == 0, grown.err
    assert "hold a finished harvest: continuing it" in grown.err and "searched 1 " in grown.err
    records = jsonl((tmp_path / "docs.jsonl").read_text())
    assert records[: len(lines)] == lines and len(records) > len(lines)
    assert len({record["id"] for record in records}) == len(records)


async def test_an_unfinished_harvest_run_again_without_resume_is_refused(
    tmp_path: Path,
) -> None:
    """Only a finished harvest is continued as it was run: one with a failed search needs
    --resume, said so, and its files are left as they are."""
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        emulator.script(Fault.task_failed(), skill="document_search")
        argv = ["harvest", "-q", "grace", "-q", "mercy", "--max-retries", "0"]
        argv += ["--base-url", emulator.base_url, "--out", "d.jsonl"]
        env = {"MAGISTERIUM_TOKEN": emulator.token}
        first = await asyncio.to_thread(cli, *argv, cwd=tmp_path, env=env)
        assert first.code == 7, first.err
        before = (tmp_path / "d.jsonl").read_bytes()
        again = await asyncio.to_thread(cli, *argv, cwd=tmp_path, env=env)
    assert again.code == 2, again.err
    assert "d.jsonl already exists: add --resume" in again.err
    assert (tmp_path / "d.jsonl").read_bytes() == before


def test_harvest_reads_stdin_and_writes_stdout() -> None:
    queries = "grace\n\nmercy and love\n"
    run = cli("harvest", "--emulator", "--synthetic", "1000", "--json", "-", stdin=queries)
    assert run.code == 0, run.err
    ids = [line["id"] for line in jsonl(run.out)]
    assert ids and len(ids) == len(set(ids))
    summary = json.loads(run.err)
    assert summary["queries"] == 2 and summary["written"] == len(ids)


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_harvest_stopped_by_a_signal_sums_up_and_resume_completes_it(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    """Ctrl-C, and SIGTERM as timeout, systemd or Kubernetes send it, stop a harvest
    cleanly: a summary, the --resume hint, the state closed (no -wal or -shm left)."""
    state = str(tmp_path / "state.sqlite")
    command = [sys.executable, "-m", "magisterium_async", "harvest", "--emulator", "-"]
    proc = subprocess.Popen(
        [*command, "--state", state],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("grace\n")
        proc.stdin.flush()
        # The first document out: the harvest is under way (stdin still open).
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert ready, "no document within the timeout"
        first = [json.loads(proc.stdout.readline())]
        proc.send_signal(signum)  # while stdin stays open, as at a terminal
        # Read through the same buffered pipes as readline() above (communicate() would
        # read the raw descriptors and miss what the buffer already holds).
        out = proc.stdout.read()
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == code, err
    assert "Interrupted after" in err and "--resume" in err
    # The figures count what they say: documents written, apart from those found.
    written = len(first) + len(jsonl(out))
    assert f"Interrupted after {written} document" in err
    assert "· found " in err and " new · fetched " in err
    assert "error" not in err  # the summary says it all, once
    assert not Path(f"{state}-wal").exists() and not Path(f"{state}-shm").exists()
    first += jsonl(out)

    rest = cli("harvest", "--emulator", "--state", state, "--resume", "-", stdin="grace\n")
    assert rest.code == 0, rest.err
    fresh = cli("harvest", "--emulator", "-", stdin="grace\n")
    ids = [str(d["id"]) for d in first + jsonl(rest.out)]
    assert sorted(ids) == sorted(str(d["id"]) for d in jsonl(fresh.out))


def test_harvest_skips_comments_and_refuses_a_blank_query(tmp_path: Path) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("# Marian dogmas\ngrace\n\n")
    run = cli("harvest", "--emulator", "--json", str(queries))
    assert run.code == 0, run.err
    assert json.loads(run.err)["queries"] == 1
    blank = cli("harvest", "--emulator", "-q", "", "--out", "docs.jsonl", cwd=tmp_path)
    assert blank.code == 2
    said = "magisterium-async: error: --query: query must not be empty or blank"
    assert blank.err.strip() == said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries.txt"]


def test_resume_leaves_a_file_it_did_not_write_byte_for_byte(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    text = b"shopping\nthe last line has no newline"
    notes.write_bytes(text)
    run = cli(
        "harvest", "--emulator", "-q", "grace", "--out", "notes.txt", "--resume", cwd=tmp_path
    )
    assert run.code == 2
    assert "notes.txt exists and this harvest did not write it" in run.err
    assert "another --out" in run.err and "Traceback" not in run.err
    assert notes.read_bytes() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_output_whose_state_is_gone_is_refused_with_ways_that_work(tmp_path: Path) -> None:
    argv = ("harvest", "--emulator", "-q", "grace", "--out", "b.jsonl")
    assert cli(*argv, cwd=tmp_path).code == 0
    (tmp_path / "b.jsonl.state.sqlite").unlink()
    kept = (tmp_path / "b.jsonl").read_bytes()
    # With --resume or without, the same refusal: no hint that leads to another one.
    for resume in ((), ("--resume",)):
        refused = cli(*argv, *resume, cwd=tmp_path)
        assert refused.code == 2, refused.err
        assert "b.jsonl exists and this harvest did not write it (there is no harvest " in (
            refused.err
        )
        assert "not a harvest's output that can be continued: give another --out" in refused.err
        assert "magisterium-async rebuild STATE --out NEW" in refused.err
        assert "add --resume" not in refused.err
    assert (tmp_path / "b.jsonl").read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.jsonl"]


def test_resume_appends_to_its_own_output_and_refuses_a_replaced_one(tmp_path: Path) -> None:
    out = tmp_path / "docs.jsonl"
    first = cli("harvest", "--emulator", "-q", "grace", "--out", "docs.jsonl", cwd=tmp_path)
    assert first.code == 0, first.err
    whole = out.read_bytes()
    more = ("harvest", "--emulator", "-q", "grace", "-q", "Eucharist", "--out", "docs.jsonl")
    resumed = cli(*more, "--resume", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    records = jsonl(out.read_text())
    assert out.read_bytes().startswith(whole) and len(records) > len(jsonl(whole.decode()))
    ids = [record["id"] for record in records]
    assert len(ids) == len(set(ids))

    # Other bytes in another file put in its place are not the harvest's output.
    kept = out.read_bytes()
    other = kept.replace(b'"title":"', b'"title":"X', 1)
    (tmp_path / "elsewhere").write_bytes(other)  # made while the original holds its inode
    (tmp_path / "elsewhere").replace(out)
    refused = cli(*more, "-q", "mercy", "--resume", cwd=tmp_path)
    assert refused.code == 2, refused.err
    assert "another file is in its place, and its bytes differ" in refused.err
    assert out.read_bytes() == other


def _limit_memory() -> None:
    import resource

    limit = 1536 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_device_output_is_never_read_and_a_full_one_ends_with_a_message(
    tmp_path: Path,
) -> None:
    state = str(tmp_path / "s.sqlite")
    accepted = cli("harvest", "--emulator", "-q", "grace", "--out", "/dev/null", "--state", state)
    assert accepted.code == 0, accepted.err
    argv = ["harvest", "--emulator", "-q", "grace", "-q", "mercy"]
    argv += ["--out", "/dev/full", "--state", state, "--resume"]
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", *argv],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot write --out /dev/full: the disk is full" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


def _harvest_to(stdout: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magisterium_async", "harvest", "--emulator", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
    )


def test_a_stdout_that_cannot_be_written_is_named_stdout(tmp_path: Path) -> None:
    """No --out was given: the message names stdout, for a full disk or a reader gone."""
    read, write = os.pipe()
    os.close(read)  # the reader gone before the first line (`| head -c 10`, later)
    try:
        broken = _harvest_to(write, "-q", "grace")
    finally:
        os.close(write)
    assert broken.returncode == 2, broken.stderr
    assert "error: cannot write stdout: broken pipe" in broken.stderr
    assert "--out" not in broken.stderr
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            filled = _harvest_to(full.fileno(), "-q", "grace")
        assert filled.returncode == 2, filled.stderr
        assert "error: cannot write stdout: the disk is full" in filled.stderr


@pytest.mark.parametrize(
    "fault", [Fault.task_failed(), Fault.drop()], ids=["task failed", "connection dropped"]
)
async def test_a_harvest_with_failures_exits_7_whatever_failed_first(
    tmp_path: Path, fault: Fault
) -> None:
    async with Emulator(EmulatorConfig(rate_limits=None)) as emulator:
        emulator.script(fault, skill="document_search")
        argv = ["harvest", "-q", "grace", "-q", "mercy", "--max-retries", "0"]
        argv += ["--base-url", emulator.base_url, "--out", str(tmp_path / "d.jsonl")]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "magisterium_async",
            *argv,
            env=clean_env(MAGISTERIUM_TOKEN=emulator.token),
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 7, err.decode()
    assert "first failure (search" in err.decode() and "--resume" in err.decode()
