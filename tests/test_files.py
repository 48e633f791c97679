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
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from magisterium_async import MagisteriumError
from magisterium_async._files import READ_AHEAD, aread_text, kind_of, read_in_thread

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


async def test_lines_read_ahead_wake_the_loop_once_not_once_a_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the loop is busy, the reading thread does not write to its self-pipe once a
    line: a full pipe loses the byte a signal writes there, and with it the Ctrl-C."""
    loop = asyncio.get_running_loop()
    wakeups = 0
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> asyncio.Handle:
        nonlocal wakeups
        wakeups += 1
        return call_soon_threadsafe(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    read_ahead = threading.Event()

    def read() -> Iterator[int]:
        for number in range(3 * READ_AHEAD):
            if number == READ_AHEAD:
                read_ahead.set()  # a thousand lines read while the loop is not waiting
            yield number

    lines = read_in_thread(read, "test-reader")
    assert await anext(lines) == 0  # the one line the loop waited for
    assert read_ahead.wait(60)  # the loop busy meanwhile (60 s: only against a hang)
    assert wakeups <= 1
    assert [0, *[number async for number in lines]] == list(range(3 * READ_AHEAD))


def test_a_ctrl_c_while_lines_are_read_ahead_is_not_lost() -> None:
    """The signal's byte on the loop's self-pipe is not crowded out by the reading
    thread's: the handler runs (it never did, the Ctrl-C lost, with a wakeup a line)."""
    program = textwrap.dedent(
        """
        import asyncio, os, signal, threading
        from magisterium_async._files import READ_AHEAD, read_in_thread

        async def main():
            loop = asyncio.get_running_loop()
            handled = loop.create_future()
            loop.add_signal_handler(signal.SIGINT, handled.set_result, "handled")
            read_ahead = threading.Event()

            def read():
                for number in range(3 * READ_AHEAD):
                    if number == READ_AHEAD:
                        read_ahead.set()
                    yield number

            lines = read_in_thread(read, "reader")
            await anext(lines)
            read_ahead.wait(60)  # the loop busy while the thread reads ahead
            os.kill(os.getpid(), signal.SIGINT)
            print(await asyncio.wait_for(handled, 60))  # 60 s: only against a hang

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "handled\n", done.stderr
    assert "wakeup fd" not in done.stderr


async def test_a_reading_error_comes_after_the_lines_read_before_it() -> None:
    def read() -> Iterator[str]:
        yield from ("one", "two")
        raise ValueError("line 3: not UTF-8")

    lines: list[str] = []
    with pytest.raises(ValueError, match="line 3: not UTF-8"):
        async for line in read_in_thread(read, "test-reader"):
            lines.append(line)
    assert lines == ["one", "two"]
