"""Worker processes for the multi-process quota benchmarks (``bench_shared_adaptive``,
``bench_priority``): ``python -m benchmarks._quota_worker``, driven by :class:`Workers`.

A worker reads one JSON job a line on stdin. For each it opens its client, prints
``READY``, waits for a line (``go``: every worker starts together, right after the
server's reset), runs the job and prints one JSON line with its result; a ``bulk`` job
also runs until a ``stop`` line. It ends when stdin closes. Jobs (``task``):

- ``calls``: ``n`` calls of ``skill`` (``search`` or ``fetch``) all at once with one
  ``client``: ``magisterium`` (``AsyncMagisterium``, through Redis when ``redis_url`` is
  given), ``botocore`` (botocore's adaptive limiter, one per process) or ``naive`` (the
  retry-after loop); the last two are ``bench_quota``'s drivers.
  ``{"wall", "errors", "stopped"}``.
- ``interactive``: a single ``search`` every ``every`` seconds, ``count`` of them, not
  waiting for one to end before the next. ``{"latencies", "ends", "errors", "unfinished"}``
  (``ends`` on ``time.monotonic()``, the clock the window server reports too).
- ``bulk``: ``search_many`` over endless queries with ``concurrency`` in flight, until
  ``stop``. ``{"done", "errors"}``.

The single calls and ``search_many`` are written as an application writes them: no
priority is named, so each gets its default (single calls interactive, batches bulk).
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from magisterium_async import AsyncMagisterium

__all__ = ["Workers", "bulk_calls", "interactive_calls", "make_client"]


def make_client(job: dict[str, Any]) -> AsyncMagisterium:
    """The job's ``AsyncMagisterium``: ``RateLimits(default, expensive, period)``,
    ``max_concurrency``, and with a ``redis_url`` ``SharedQuota(redis_url, workers=workers)``
    (``workers`` ``None``: the URL alone, as most users write it)."""
    from magisterium_async import AsyncMagisterium, RateLimits, SharedQuota

    redis_url = job.get("redis_url")
    workers = job.get("workers")
    shared = None
    if redis_url:
        shared = SharedQuota(redis_url) if workers is None else SharedQuota(redis_url, workers)
    return AsyncMagisterium(
        token=job["token"],
        base_url=job["base_url"],
        rate_limits=RateLimits(job["default"], job["expensive"], period=job["period"]),
        max_concurrency=job["max_concurrency"],
        shared_quota=shared,
    )


async def interactive_calls(
    client: AsyncMagisterium, every: float, count: int, limit: float
) -> dict[str, Any]:
    """``count`` single searches, one every ``every`` s (the first after ``every``), each
    on its own; waits at most ``limit`` s after the last for them to end."""
    latencies: list[float] = []
    ends: list[float] = []
    errors = 0

    async def one(index: int) -> None:
        nonlocal errors
        started = time.monotonic()
        try:
            await client.search(f"interactive question {index}")
        except Exception:
            errors += 1
            return
        now = time.monotonic()
        latencies.append(now - started)
        ends.append(now)

    tasks = []
    t0 = time.monotonic()
    for index in range(count):
        await asyncio.sleep(max(0.0, t0 + (index + 1) * every - time.monotonic()))
        tasks.append(asyncio.create_task(one(index)))
    _, pending = await asyncio.wait(tasks, timeout=limit)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    unfinished = len(pending)
    return {
        "latencies": latencies,
        "ends": ends,
        "errors": errors,
        "unfinished": unfinished,
        "count": count,
    }


def _queries() -> Iterator[str]:
    index = 0
    while True:
        yield f"bulk query {index}"
        index += 1


async def bulk_calls(
    client: AsyncMagisterium, concurrency: int, stop: asyncio.Event
) -> dict[str, Any]:
    """``search_many`` with ``concurrency`` in flight until ``stop`` is set."""
    counts = {"done": 0, "errors": 0}

    async def consume() -> None:
        async with client.search_many(_queries(), concurrency=concurrency) as items:
            async for item in items:
                counts["errors" if item.error is not None else "done"] += 1

    task = asyncio.create_task(consume())
    await stop.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return counts


# The worker process ---------------------------------------------------------------------


async def _line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def _ready_go() -> None:
    print("READY", flush=True)
    if not await _line():  # the bench closed our stdin instead of saying go
        raise EOFError("stopped before the start")


async def _calls(job: dict[str, Any]) -> dict[str, Any]:
    from .bench_quota import BotocoreAdaptive, botocore_delay, drive_loop

    n, skill, limit = job["n"], job["skill"], job["limit"]
    went = asyncio.Event()

    async def go() -> None:
        await _ready_go()
        went.set()

    if job["client"] == "magisterium":
        errors = 0
        client = make_client(job)

        async def one(index: int) -> None:
            nonlocal errors
            try:
                if skill == "fetch":
                    await client.fetch(str(index))
                else:
                    await client.search(f"grace {index}")
            except Exception:
                errors += 1

        async def ours() -> int:
            async with client:
                await go()
                await asyncio.gather(*(one(i) for i in range(n)))
            return errors

        work = asyncio.create_task(ours())
    else:
        adaptive = BotocoreAdaptive() if job["client"] == "botocore" else None
        work = asyncio.create_task(
            drive_loop(
                job["base_url"],
                job["token"],
                n,
                before=adaptive.before_send if adaptive else None,
                after=adaptive.after_response if adaptive else None,
                delay=botocore_delay() if adaptive else (lambda _, wait: wait),
                started=go,
                skill=skill,
            )
        )
    cue = asyncio.create_task(went.wait())
    await asyncio.wait({work, cue}, return_when=asyncio.FIRST_COMPLETED)
    cue.cancel()
    started = time.monotonic()
    try:
        errors = await asyncio.wait_for(work, limit)
    except asyncio.TimeoutError:
        return {"wall": time.monotonic() - started, "errors": 0, "stopped": True}
    return {"wall": time.monotonic() - started, "errors": errors, "stopped": False}


async def _interactive(job: dict[str, Any]) -> dict[str, Any]:
    async with make_client(job) as client:
        await _ready_go()
        return await interactive_calls(client, job["every"], job["count"], job["limit"])


async def _bulk(job: dict[str, Any]) -> dict[str, Any]:
    async with make_client(job) as client:
        await _ready_go()
        stop = asyncio.Event()
        task = asyncio.create_task(bulk_calls(client, job["concurrency"], stop))
        await _line()  # "stop"
        stop.set()
        return await task


_TASKS = {"calls": _calls, "interactive": _interactive, "bulk": _bulk}


def main() -> None:
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        job = json.loads(line)
        try:
            result = asyncio.run(_TASKS[job["task"]](job))
        except Exception as exc:  # reported to the bench, which fails our benchmark
            result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        print(json.dumps(result), flush=True)


# The bench side -------------------------------------------------------------------------


class Workers:
    """``count`` worker processes, kept for a whole benchmark (a Python start costs more
    than a short run); ``with Workers(4) as workers:``. Every read is bounded in time."""

    def __init__(self, count: int, *, cwd: str | os.PathLike[str]) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.buffers: list[bytes] = []
        for _ in range(count):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "benchmarks._quota_worker"],
                    cwd=cwd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    bufsize=0,
                )
            )
            self.buffers.append(b"")

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def send(self, index: int, line: str) -> None:
        stdin = self.procs[index].stdin
        assert stdin is not None
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def read(self, index: int, timeout: float) -> str:
        """Worker ``index``'s next line; ``RuntimeError`` if none within ``timeout`` s."""
        proc = self.procs[index]
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffers[index]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"worker {index} said nothing within {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"worker {index} exited (code {proc.wait()})")
                self.buffers[index] += chunk
        line, _, self.buffers[index] = self.buffers[index].partition(b"\n")
        return line.decode().strip()

    def result(self, index: int, timeout: float) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(self.read(index, timeout))
        if "error" in answer:
            raise RuntimeError(f"worker {index}: {answer['error']}")
        return answer

    def start(self, jobs: dict[int, dict[str, Any]], timeout: float = 60.0) -> None:
        """Give each worker its job and wait until every one is ready."""
        for index, job in jobs.items():
            self.send(index, json.dumps(job))
        for index in jobs:
            line = self.read(index, timeout)
            if line != "READY":
                raise RuntimeError(f"worker {index} did not start: {line[:300]}")

    def go(self, indexes: list[int]) -> None:
        for index in indexes:
            self.send(index, "go")

    def stop(self) -> None:
        """Close every stdin (the workers' cue to end), then kill what is left."""
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs = []


if __name__ == "__main__":
    main()
