"""The one rule for files a user names (``magisterium_async._files``): what a path is,
decided before it is opened; text read alike whatever the editor; a FIFO that never gets a
writer still ended by a signal."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from magisterium_async import MagisteriumError
from magisterium_async._files import aread_text, kind_of

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")


def test_kinds(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert kind_of(tmp_path / "file") == "file"
    assert kind_of(tmp_path) == "directory"
    assert kind_of(fifo) == "fifo"
    assert kind_of("/dev/null") == "character device"
    assert kind_of(tmp_path / "nowhere") == "missing"
    assert kind_of(tmp_path / "dangling") == "missing"


@pytest.mark.parametrize(
    "raw",
    [b"\xef\xbb\xbfline one\r\nline two\r\n", b"line one\rline two\r", b"line one\nline two\n"],
    ids=["notepad: BOM and CRLF", "old Mac: CR", "unix"],
)
async def test_text_reads_alike_whatever_the_editor(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "queries.txt"
    path.write_bytes(raw)
    assert await aread_text(path, what="the queries file") == "line one\nline two\n"


@pytest.mark.parametrize("target", ["dir", "missing", "latin1"])
async def test_what_cannot_be_read_is_named(tmp_path: Path, target: str) -> None:
    path = {"dir": tmp_path, "missing": tmp_path / "gone", "latin1": tmp_path / "l1"}[target]
    if target == "latin1":
        path.write_bytes("café".encode("latin-1"))
    with pytest.raises(MagisteriumError) as caught:
        await aread_text(path, what="the token file")
    message = str(caught.value)
    assert f"the token file {path}" in message
    assert {"dir": "is a directory", "missing": "does not exist", "latin1": "not UTF-8"}[
        target
    ] in message
    assert "rm " not in message and "rmdir" not in message


async def test_a_fifo_is_read_in_the_loop_once_its_writer_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    reading = asyncio.ensure_future(aread_text(fifo, what="the token file"))
    await asyncio.sleep(0)  # the reader's thread is waiting for a writer; the loop is not
    assert not reading.done()
    # The writer comes (opening a FIFO for writing waits for its reader: a thread).
    await asyncio.to_thread(fifo.write_bytes, b"\xef\xbb\xbfsecret\r\n")
    assert await reading == "secret\n"


def test_a_fifo_without_a_writer_is_ended_by_ctrl_c(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    program = textwrap.dedent(
        f"""
        import asyncio, sys
        from magisterium_async._files import aread_text
        try:
            print("reading", flush=True)
            asyncio.run(aread_text({str(fifo)!r}, what="the token file"))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "reading\n"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert out == "interrupted\n"
