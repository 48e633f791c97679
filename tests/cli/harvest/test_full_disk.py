"""A harvest on a full disk, its state's or its output's: one path. It stops with exit 2,
after the summary and the --resume hint; nothing half-made is left that a later run
refuses; with room made, --resume completes it, every document once. The disk is a real
one: a tmpfs of a few hundred KiB, mounted in a mount namespace of the test's own
(``unshare``; skipped where the system allows none)."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import TIMEOUT, clean_env, cli, jsonl

HARVEST = f"{sys.executable} -m magisterium_async harvest --emulator --synthetic 3000"
QUERIES = [f"word{n}" for n in range(40)]  # 275 documents, 159 KB of JSON Lines
ARGS = " ".join(f"-q {query}" for query in QUERIES)


@functools.cache
def _can_mount() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run(
            [unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
            capture_output=True,
            timeout=TIMEOUT,
        )
    except OSError:
        return False
    return done.returncode == 0


needs_a_small_disk = pytest.mark.skipif(
    not _can_mount(), reason="needs unshare and a mount namespace (a tmpfs of our own)"
)


def on_a_small_disk(tmp_path: Path, size: str, *steps: str) -> list[tuple[int, str]]:
    """Run each of ``steps`` (shell commands) where ``full/`` is a tmpfs of ``size``, gone
    with the namespace once they end; ``GROW`` in a step makes it 20 MiB first. Returns
    each step's exit code and stderr."""
    (tmp_path / "full").mkdir()
    script = [f"mount -t tmpfs -o size={size} tmpfs full || exit 99"]
    for n, step in enumerate(steps):
        step = step.replace("GROW", "mount -o remount,size=20m full &&")
        script.append(f"{step} 2> err{n}; echo $? > code{n}")
    subprocess.run(
        ["unshare", "-rm", "sh", "-c", "\n".join(script)],
        cwd=tmp_path,
        env=clean_env(),
        timeout=4 * TIMEOUT,
        check=True,
    )
    return [
        (int((tmp_path / f"code{n}").read_text()), (tmp_path / f"err{n}").read_text())
        for n in range(len(steps))
    ]


def every_document() -> list[str]:
    fresh = cli("harvest", "--emulator", "--synthetic", "3000", *ARGS.split())
    assert fresh.code == 0, fresh.err
    return sorted(str(record["id"]) for record in jsonl(fresh.out))


def ids_in(path: Path) -> list[str]:
    return sorted(str(record["id"]) for record in jsonl(path.read_text(encoding="utf-8")))


@needs_a_small_disk
def test_a_state_on_a_full_disk_stops_with_exit_2_and_resumes_once_there_is_room(
    tmp_path: Path,
) -> None:
    run = f"{HARVEST} {ARGS} --state full/s.sqlite --out d.jsonl"
    (full, _), (again, refused), (resumed, done) = on_a_small_disk(
        tmp_path, "256k", run, f"GROW {run}", f"{run} --resume"
    )
    err = (tmp_path / "err0").read_text()
    assert full == 2, err
    assert "Stopped after" in err and "run the same command with --resume" in err
    assert "error: cannot write the harvest state full/s.sqlite: the disk is full" in err
    # What it left is a state a later run continues: never 'not a harvest state'.
    assert again == 2 and "already exists: add --resume" in refused, refused
    assert resumed == 0, done
    assert ids_in(tmp_path / "d.jsonl") == every_document()  # none lost, none twice


@needs_a_small_disk
def test_a_state_that_cannot_be_made_leaves_nothing_behind(tmp_path: Path) -> None:
    run = f"{HARVEST} {ARGS} --state full/s.sqlite --out d.jsonl"
    listed = "ls -A full > made; ls d.jsonl >> made"
    (full, err), _, (again, done) = on_a_small_disk(tmp_path, "8k", run, listed, f"GROW {run}")
    assert full == 2, err
    assert "error: cannot make the harvest state full/s.sqlite: the disk is full" in err
    assert "nothing was made there" in err and "Traceback" not in err
    assert (tmp_path / "made").read_text() == ""  # no state, no output
    assert again == 0, done  # nothing half-made to refuse: the same command just runs


@needs_a_small_disk
def test_an_output_on_a_full_disk_stops_with_exit_2_and_leaves_only_whole_lines(
    tmp_path: Path,
) -> None:
    run = f"{HARVEST} {ARGS} --state s.sqlite --out full/d.jsonl"
    keep = "cp full/d.jsonl cut.jsonl && cp full/d.jsonl d.jsonl"
    (full, err), _, (resumed, done), _ = on_a_small_disk(
        tmp_path, "64k", run, keep, f"GROW {run} --resume", "cp full/d.jsonl d.jsonl"
    )
    assert full == 2, err
    assert "Stopped after" in err and "run the same command with --resume" in err
    assert "error: cannot write --out full/d.jsonl: the disk is full" in err
    cut = (tmp_path / "cut.jsonl").read_bytes()
    assert cut and cut.endswith(b"\n")  # the batch that did not fit is cut off whole
    assert 0 < len(jsonl(cut.decode())) < len(every_document())
    assert resumed == 0, done
    assert "incomplete line" not in done  # nothing was torn: nothing to cut, no note
    assert ids_in(tmp_path / "d.jsonl") == every_document()


LIBRARY = """
import asyncio, sys
from magisterium_async import Document, JsonlWriter, MagisteriumError, OutputFileError

async def main():
    async with JsonlWriter("full/d.jsonl", batch_size=1) as out:
        try:
            for n in range(100):
                await out.write(Document(id=str(n), title=None, author=None, ref=None,
                                         text="x" * 1000))
        except OutputFileError as exc:
            assert isinstance(exc, MagisteriumError) and isinstance(exc.__cause__, OSError)
            print(out.mark.offset, out.written, exc)

asyncio.run(main())
"""


@needs_a_small_disk
def test_the_writer_raises_a_magisterium_error_and_keeps_its_file_whole(tmp_path: Path) -> None:
    (tmp_path / "w.py").write_text(LIBRARY)
    keep = "cp full/d.jsonl kept.jsonl"
    [(code, err), _] = on_a_small_disk(tmp_path, "8k", f"{sys.executable} w.py > said", keep)
    assert code == 0, err
    offset, written, message = (tmp_path / "said").read_text().split(" ", 2)
    assert message.startswith("cannot write full/d.jsonl: the disk is full")
    kept = (tmp_path / "kept.jsonl").read_bytes()
    assert len(kept) == int(offset) and kept.count(b"\n") == int(written) > 0
    assert [json.loads(line)["id"] for line in kept.splitlines()] == [
        str(n) for n in range(int(written))
    ]
