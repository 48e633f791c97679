"""The ``harvest`` command: queries in, every document they find out, as JSON Lines.

Documents go to ``--out`` through :class:`JsonlWriter` (written, flushed and fsync'd in
small batches; the harvest's state learns a document was delivered only once it is on
disk), so an interrupted harvest loses at most the lines in progress and ``--resume``
writes every document exactly once. A live status line goes to stderr when it is a
terminal, and a summary when the harvest ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol

import msgspec

from ._cli_client import ClientOptions, open_client
from ._cli_errors import CliError, ExitCode, describe, exit_code_for
from ._config import RateLimits
from ._errors import (
    AuthenticationError,
    MagisteriumError,
    PlanRequiredError,
    RateLimitError,
    SharedStateError,
    StateError,
)
from ._harvest import Harvest, harvest
from ._jsonl import JsonlWriter
from ._models import Document, SearchResult
from ._scheduler import SchedulerStats

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.spinner import Spinner

    from ._client import AsyncMagisterium
    from ._redis_harvest import CoordinatedClient, Coordinator

__all__ = ["run_harvest"]

# SharedStateError: the harvest's Redis failed or lost its claims (--redis).
_FATAL = (AuthenticationError, PlanRequiredError, RateLimitError, SharedStateError)
_ENCODER = msgspec.json.Encoder()


class _StopHarvest(Exception):
    """A failure every later request would meet too: it ends the harvest."""

    def __init__(self, error: MagisteriumError) -> None:
        super().__init__(str(error))
        self.error = error


class _FailFast:
    """The client, but a refused token, a missing plan or an exhausted quota stops the
    harvest instead of being recorded once per query."""

    def __init__(self, client: AsyncMagisterium | CoordinatedClient) -> None:
        self._client = client

    @property
    def stats(self) -> SchedulerStats:
        return self._client.stats

    async def search(self, query: str) -> list[SearchResult]:
        try:
            return await self._client.search(query)
        except _FATAL as exc:
            raise _StopHarvest(exc) from exc

    async def fetch(self, document_id: str) -> Document | None:
        try:
            return await self._client.fetch(document_id)
        except _FATAL as exc:
            raise _StopHarvest(exc) from exc


class _Sink(Protocol):
    written: int
    skipped: int

    async def write(self, document: Document) -> bool: ...

    async def aclose(self) -> None: ...


class _StdoutSink:
    """JSON Lines on stdout, flushed line by line (a pipe cannot be fsync'd)."""

    def __init__(self, on_durable: Callable[[list[str]], object]) -> None:
        self.on_durable = on_durable
        self.written = 0
        self.skipped = 0

    async def write(self, document: Document) -> bool:
        sys.stdout.buffer.write(_ENCODER.encode(document) + b"\n")
        sys.stdout.buffer.flush()
        self.written += 1
        self.on_durable([document.id])
        return True

    async def aclose(self) -> None:
        pass


@dataclass
class _Plan:
    """Where the queries come from and where documents and state go, checked up front."""

    queries: list[str]
    files: list[IO[str]]
    out: str | None
    state: str | None
    total: int | None

    async def lines(self) -> AsyncIterator[str]:
        for query in self.queries:
            yield query
        for file in self.files:
            async for line in _read_lines(file):
                if line.strip():
                    yield line.strip()

    def close(self) -> None:
        for file in self.files:
            if file is not sys.stdin:
                file.close()


async def _read_lines(file: IO[str]) -> AsyncIterator[str]:
    """The lines of ``file``, read by a daemon thread.

    Not a worker thread of the event loop: a read blocked on a pipe or a terminal could
    not be cancelled, and would keep the process alive after Ctrl-C until the input ends.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | Exception | None] = asyncio.Queue()
    room = threading.Semaphore(1024)  # lines read ahead of the harvest, at most

    def pump() -> None:
        item: str | Exception | None = None
        try:
            for line in file:
                room.acquire()
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except Exception as exc:
            item = exc
        with contextlib.suppress(RuntimeError):  # the event loop is already closed
            loop.call_soon_threadsafe(queue.put_nowait, item)

    threading.Thread(target=pump, name="magisterium-queries", daemon=True).start()
    while (item := await queue.get()) is not None:
        if isinstance(item, Exception):
            raise item
        room.release()
        yield item


def _count(file: IO[str]) -> int | None:
    if file is sys.stdin or not file.seekable():
        return None
    count = sum(1 for line in file if line.strip())
    file.seek(0)
    return count


def _plan(args: argparse.Namespace) -> _Plan:
    out = None if args.out in (None, "-") else args.out
    state = args.state or (f"{out}.state.sqlite" if out else None)
    if not args.queries and not args.query:
        raise CliError("give a QUERIES_FILE (- for stdin) or at least one --query", ExitCode.USAGE)
    if args.resume and state is None:
        raise CliError(
            "--resume needs --out FILE or --state FILE: the state is what it resumes from",
            ExitCode.USAGE,
        )
    if not args.resume:
        for path in (out, state):
            if path is not None and os.path.exists(path):
                raise CliError(
                    f"{path} already exists: add --resume to continue that harvest, "
                    "or choose another --out",
                    ExitCode.USAGE,
                )
    files: list[IO[str]] = []
    try:
        for name in args.queries:
            files.append(sys.stdin if name == "-" else open(name, encoding="utf-8"))  # noqa: SIM115
    except OSError as exc:
        for file in files:
            file.close()
        raise CliError(f"cannot read {exc.filename}: {exc.strerror}", ExitCode.USAGE) from None
    counts = [_count(file) for file in files]
    total = None if None in counts else len(args.query) + sum(c or 0 for c in counts)
    return _Plan(list(args.query), files, out, state, total)


def _seconds(elapsed: float) -> str:
    return f"{elapsed:.2f}s" if elapsed < 10 else _duration(elapsed)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class _Status:
    """The live status line: progress, rate, 429s and an ETA from the client's quota."""

    def __init__(
        self,
        run: Harvest,
        sink: _Sink,
        total: int | None,
        quota: RateLimits,
        coordinator: Coordinator | None = None,
    ) -> None:
        self.run = run
        self.coordinator = coordinator
        self.sink = sink
        self.total = total
        self.quota = quota
        self._spinner: Spinner | None = None

    def eta(self) -> float | None:
        """Seconds left: the requests still to send ÷ the default pool's quota.

        Searches left, plus ids found and not yet fetched, plus the fetches the searches
        left should bring (at the rate of new ids per search so far). With the quota
        lifted, the rate observed so far stands in for it.
        """
        stats = self.run.stats
        if self.total is None or stats.searched == 0:
            return None
        failed = [f.kind for f in self.run.failures]
        searches_left = max(
            self.total
            - stats.searched
            - stats.skipped_queries
            - self._elsewhere()
            - failed.count("search"),
            0,
        )
        fetched = stats.fetched + stats.not_found + failed.count("fetch")
        fetches_left = max(stats.unique_ids - fetched, 0) + (
            searches_left * stats.unique_ids / stats.searched
        )
        per_second = self.quota.default / self.quota.period
        if math.isinf(per_second):
            done = stats.searched + fetched
            per_second = done / stats.elapsed if stats.elapsed > 0 else math.inf
        return (searches_left + fetches_left) / per_second if per_second > 0 else None

    def _elsewhere(self) -> int:
        return self.coordinator.skipped_queries if self.coordinator is not None else 0

    def line(self) -> str:
        stats = self.run.stats
        queries = f"{stats.searched + stats.skipped_queries + self._elsewhere()}"
        if self.total is not None:
            queries += f"/{self.total}"
        rate = self.sink.written / stats.elapsed if stats.elapsed > 0 else 0.0
        eta = self.eta()
        parts = [f"queries {queries}", f"docs {self.sink.written}", f"{rate:.1f}/s"]
        if stats.not_found:
            parts.append(f"not found {stats.not_found}")
        if stats.failed:
            parts.append(f"failed {stats.failed}")
        parts.append(f"429s {stats.rate_limited}")
        parts.append(f"ETA {_duration(eta) if eta is not None else '?'}")
        return " · ".join(parts)

    def __rich__(self) -> RenderableType:
        from rich.spinner import Spinner

        if self._spinner is None:
            self._spinner = Spinner("dots", style="cyan")
        self._spinner.update(text=self.line())
        return self._spinner


def _live(status: _Status) -> Any:
    """A rich ``Live`` display of ``status`` on stderr, or ``None`` (not a terminal, no rich)."""
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        return None
    return Live(status, console=Console(stderr=True), refresh_per_second=4, transient=True)


def _summary(
    plan: _Plan,
    run: Harvest,
    sink: _Sink,
    options: ClientOptions,
    ending: str,
    as_json: bool,
    coordinator: Coordinator | None,
    job: str | None,
) -> None:
    stats = run.stats
    if as_json:
        fields = dataclasses.asdict(stats)
        fields.pop("started")
        fields.pop("finished")
        record: dict[str, Any] = {"ending": ending, "out": plan.out, "state": plan.state}
        record.update(fields, written=sink.written, already_in_file=sink.skipped)
        record.update(elapsed=stats.elapsed)
        if coordinator is not None:
            record.update(
                job=job,
                queries_elsewhere=coordinator.skipped_queries,
                ids_elsewhere=coordinator.skipped_ids,
            )
        print(json.dumps(record), file=sys.stderr)
        return
    head = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}
    noun = "document" if sink.written == 1 else "documents"
    query_noun = "query" if stats.queries == 1 else "queries"
    lines = [
        f"{head[ending]} {sink.written} {noun} from {stats.queries} {query_noun}"
        f" in {_seconds(stats.elapsed)} → {plan.out or 'stdout'}",
        f"  searched {stats.searched}"
        + (
            f" (skipped {stats.skipped_queries}: repeated or searched before)"
            if stats.skipped_queries
            else ""
        )
        + f" · results {stats.results} · new documents {stats.unique_ids}"
        f" · not found {stats.not_found} · failed {stats.failed} · 429s {stats.rate_limited}",
    ]
    if coordinator is not None:
        lines.append(
            f"  job {job}: left to other workers {coordinator.skipped_queries} queries"
            f" and {coordinator.skipped_ids} documents"
        )
    if sink.skipped:
        lines.append(f"  {sink.skipped} already in {plan.out}, not written again")
    if run.failures:
        first = run.failures[0]
        lines.append(f"  first failure ({first.kind} {first.input!r}): {describe(first.error)}")
    if plan.state is not None and (ending != "done" or run.failures):
        lines.append(f"  run the same command with --resume to continue (state: {plan.state})")
    if options.emulator:
        lines.append(
            "  served offline by the bundled emulator; drop --emulator and set "
            "MAGISTERIUM_TOKEN to harvest the real service"
        )
    print("\n".join(lines), file=sys.stderr)


async def run_harvest(args: argparse.Namespace, options: ClientOptions) -> int:
    """Run the ``harvest`` command; returns the exit code."""
    from ._cli_workers import check_redis, run_workers, shared_state_error, sharing

    if args.workers > 1 and not args.worker_barrier:
        return await run_workers(args, options)
    shared = sharing(args)
    if shared.url is not None:
        await check_redis(shared.url)
        options = dataclasses.replace(options, redis=shared.url, workers=args.workers)
    plan = _plan(args)
    coordinator: Coordinator | None = None
    try:
        if shared.job is not None:
            coordinator = await _coordinate(shared.url or "", shared.job, plan.state)
        if args.worker_barrier:
            from ._cli_workers import wait_for_go

            await wait_for_go()
        async with open_client(options) as client:
            queries: AsyncIterator[str] = plan.lines()
            searcher: AsyncMagisterium | CoordinatedClient = client
            if coordinator is not None:
                from ._redis_harvest import CoordinatedClient, claimed_queries

                queries = claimed_queries(queries, coordinator)
                searcher = CoordinatedClient(client, coordinator)
            run = harvest(
                _FailFast(searcher),
                queries,
                state=plan.state,
                concurrency=args.concurrency,
                acknowledge="manual",
            )
            sink: _Sink = (
                JsonlWriter(plan.out, on_durable=run.acknowledge)
                if plan.out is not None
                else _StdoutSink(run.acknowledge)
            )
            report = _Report(options, args.json, coordinator, shared.job)
            return await _drive(plan, run, sink, client.rate_limits, report)
    except StateError as exc:
        raise CliError(str(exc)) from None
    except SharedStateError as exc:
        raise shared_state_error(exc, shared.url or "") from None
    finally:
        plan.close()
        if coordinator is not None:
            await coordinator.aclose()


async def _coordinate(url: str, job: str, state: str | None) -> Coordinator:
    """This worker's claims in ``job``, with what its state already holds claimed first."""
    from ._redis_harvest import Coordinator, worker_identity

    coordinator = Coordinator(url, job, worker_identity(state))
    try:
        if state is not None:
            await coordinator.hydrate(state)
    except BaseException:
        await coordinator.aclose()
        raise
    return coordinator


@dataclass(frozen=True)
class _Report:
    """How the harvest reports: the client's options, JSON or not, the coordination."""

    options: ClientOptions
    as_json: bool
    coordinator: Coordinator | None
    job: str | None


async def _drive(plan: _Plan, run: Harvest, sink: _Sink, quota: RateLimits, report: _Report) -> int:
    live = _live(_Status(run, sink, plan.total, quota, report.coordinator))
    ending = "interrupted"
    fatal: MagisteriumError | None = None
    try:
        if live is not None:
            live.start()
        async with run:
            if isinstance(sink, JsonlWriter):
                await sink.open()
            try:
                async for document in run:
                    await sink.write(document)
            finally:
                await sink.aclose()  # before the harvest closes: it records what is on disk
        ending = "done"
    except _StopHarvest as stop:
        ending, fatal = "stopped", stop.error
    except Exception:
        ending = "stopped"
        raise
    finally:
        if live is not None:
            live.stop()
        if run.stats.queries or sink.written or report.coordinator is not None:
            _summary(
                plan,
                run,
                sink,
                report.options,
                ending,
                report.as_json,
                report.coordinator,
                report.job,
            )
    if fatal is not None:
        raise fatal
    return exit_code_for(run.failures[0].error) if run.failures else ExitCode.OK
