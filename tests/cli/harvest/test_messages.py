"""Every message says what happened: the files the rebuild and the harvest were given
named by what they are, an output the state never wrote told from one that is gone, a
terminal told it is read, and figures that count what they say."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import TIMEOUT, clean_env, cli, jsonl

HARVEST = ("harvest", "--emulator")
STATE = "a.jsonl.state.sqlite"


def harvested(tmp_path: Path) -> list[dict[str, object]]:
    run = cli(*HARVEST, "-q", "grace", "-q", "mercy", "--out", "a.jsonl", cwd=tmp_path)
    assert run.code == 0, run.err
    return jsonl((tmp_path / "a.jsonl").read_text(encoding="utf-8"))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_rebuild_to_a_device_is_written_as_a_stream(tmp_path: Path) -> None:
    records = harvested(tmp_path)
    full = cli("rebuild", STATE, "--out", "/dev/full", cwd=tmp_path)
    assert full.code == 2
    assert (
        full.err.strip()
        == "magisterium-async: error: cannot write --out /dev/full: the disk is full"
    )
    null = cli("rebuild", STATE, "--out", "/dev/null", cwd=tmp_path)
    assert null.code == 0, null.err
    assert f"Rebuilt {len(records)} documents from {STATE} → /dev/null" in null.err
    assert "is now this harvest's output" not in null.err  # a stream is no one's output
    for existing, what in (("a.jsonl", "a file"), (".", "a directory")):
        refused = cli("rebuild", STATE, "--out", existing, cwd=tmp_path)
        assert refused.code == 2
        assert f"--out {existing} exists ({what}): the rebuild writes only a new file" in (
            refused.err
        )


def test_an_out_its_state_never_wrote_is_not_called_gone(tmp_path: Path) -> None:
    records = harvested(tmp_path)
    state = (tmp_path / STATE).read_bytes()
    argv = (*HARVEST, "-q", "grace", "--out", "other.jsonl", "--state", STATE)
    refused = cli(*argv, "--resume", cwd=tmp_path)
    assert refused.code == 2, refused.err
    said = refused.err
    assert "is gone" not in said
    assert (
        f"{STATE} is the state of a harvest into {tmp_path / 'a.jsonl'} "
        f"({len(records)} documents written there), not into other.jsonl, which does not exist"
    ) in said
    assert f"`magisterium-async rebuild {STATE} --out other.jsonl`" in said
    assert not (tmp_path / "other.jsonl").exists() and (tmp_path / STATE).read_bytes() == state
    # Without --resume: the same refusal, never an "add --resume" that leads to it.
    again = cli(*argv, cwd=tmp_path)
    assert again.code == 2 and "add --resume" not in again.err
    assert f"{STATE} is the state of a harvest into {tmp_path / 'a.jsonl'}" in again.err
    # As the message says: rebuilt there, the harvest continues into it.
    assert cli("rebuild", STATE, "--out", "other.jsonl", cwd=tmp_path).code == 0
    more = cli(*argv, "-q", "hope", "--resume", cwd=tmp_path)
    assert more.code == 0, more.err
    ids = [r["id"] for r in jsonl((tmp_path / "other.jsonl").read_text(encoding="utf-8"))]
    assert ids[: len(records)] == [r["id"] for r in records] and len(ids) == len(set(ids))
    # The output really gone: said so, with the count, and the way to rebuild it.
    (tmp_path / "other.jsonl").unlink()
    gone = cli(*argv, "--resume", cwd=tmp_path)
    assert gone.code == 2
    assert f"other.jsonl is gone, but its harvest's state {STATE} records {len(ids)} documents" in (
        gone.err
    )


def test_stdin_on_a_terminal_is_told_it_is_read(tmp_path: Path) -> None:
    main, terminal = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", *HARVEST, "-", "--out", "d.jsonl"],
        stdin=terminal,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(),
        text=True,
    )
    os.close(terminal)
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], TIMEOUT)  # a failure bound
        assert ready, "nothing said on stderr"
        said = proc.stderr.readline()  # before any query is typed
        assert "reading queries from the terminal, one a line; end them with Ctrl-D" in said
        os.write(main, b"grace\n\x04")  # a query, then Ctrl-D
        rest = proc.stderr.read()
        assert proc.wait(timeout=TIMEOUT) == 0, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
        if proc.stderr is not None:
            proc.stderr.close()
    assert "Harvested" in rest and (tmp_path / "d.jsonl").read_text()
    piped = cli(*HARVEST, "-", "--out", "p.jsonl", stdin="grace\n", cwd=tmp_path)
    assert piped.code == 0 and "reading queries" not in piped.err  # a pipe is not told
