"""One harvest process: queries in, every document they find out, as JSON Lines.

Documents go to ``--out`` through :class:`JsonlWriter` (written, flushed and fsync'd in
small batches; the harvest's state learns a document was delivered only once it is on
disk), so an interrupted harvest loses at most the lines in progress and ``--resume``
writes every document exactly once. A live status line goes to stderr when it is a
terminal, and a summary when the harvest ends.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import msgspec

from .._errors import (
    AuthenticationError,
    MagisteriumError,
    PlanRequiredError,
    RateLimitError,
    SharedStateError,
    StateError,
)
from .._harvest import Harvest, harvest
from .._jsonl import JsonlWriter
from .._models import Document, SearchResult
from .._ratelimit import SchedulerStats
from .._state import HarvestState
from ._client import open_client
from ._command import Invocation
from ._coordination import check_redis, coordinate, shared_state_error, wait_for_go
from ._errors import CliError, ExitCode, exit_code_for
from ._harvest_plan import Plan, plan, sharing, unwritable
from ._harvest_report import Before, Status, Tally, live, summary
from ._output import Output

if TYPE_CHECKING:
    from .._client import AsyncMagisterium
    from .._redis_harvest import CoordinatedClient, Coordinator

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


async def run_harvest(invocation: Invocation) -> int:
    """Run one harvest process (alone, or a worker of ``--workers``); returns the exit code."""
    args = invocation.args
    options = invocation.options
    shared = sharing(args)
    if shared.url is not None:
        await check_redis(shared.url)
        options = dataclasses.replace(options, redis=shared.url, workers=args.workers)
    where = plan(args)
    coordinator: Coordinator | None = None
    try:
        if shared.job is not None:
            coordinator = await coordinate(shared.url or "", shared.job, where.state)
        before = await _before(where)
        if args.worker_barrier:
            await wait_for_go()
        async with open_client(options) as client:
            queries: AsyncIterator[str] = where.lines()
            searcher: AsyncMagisterium | CoordinatedClient = client
            if coordinator is not None:
                from .._redis_harvest import CoordinatedClient, claimed_queries

                queries = claimed_queries(queries, coordinator)
                searcher = CoordinatedClient(client, coordinator)
            run = harvest(
                _FailFast(searcher),
                queries,
                state=where.state,
                concurrency=args.concurrency,
                acknowledge="manual",
            )
            sink: _Sink = (
                JsonlWriter(where.out, on_durable=run.acknowledge)
                if where.out is not None
                else _StdoutSink(run.acknowledge)
            )
            tally = Tally(
                run,
                sink,
                total=where.total,
                quota=client.rate_limits,
                before=before,
                coordinator=coordinator,
                pool=lambda: client.stats.default,
                in_file=where.out is not None,
            )
            report = _Report(invocation.output, options.emulator, shared.job)
            return await _drive(where, run, sink, tally, report)
    except StateError as exc:
        raise CliError(str(exc)) from None
    except SharedStateError as exc:
        raise shared_state_error(exc, shared.url or "") from None
    finally:
        where.close()
        if coordinator is not None:
            await coordinator.aclose()


async def _before(where: Plan) -> Before:
    """What the state holds before this run (nothing for a new harvest)."""
    if where.state is None or not where.resuming:
        return Before()
    opened = await HarvestState.open(where.state, new_run=False)
    try:
        return Before.of(await opened.summary())
    finally:
        await opened.aclose()


@dataclass(frozen=True)
class _Report:
    """How the harvest reports: the output mode, offline or not, the job."""

    output: Output
    emulator: bool
    job: str | None


async def _drive(where: Plan, run: Harvest, sink: _Sink, tally: Tally, report: _Report) -> int:
    display = live(Status(tally))
    ending = "interrupted"
    fatal: MagisteriumError | None = None
    try:
        if display is not None:
            display.start()
        async with run:
            if isinstance(sink, JsonlWriter):
                try:
                    await sink.open()
                except OSError as exc:
                    raise unwritable("--out", sink.path, exc) from None
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
        if display is not None:
            display.stop()
        if run.stats.queries or sink.written or tally.coordinator is not None:
            summary(
                report.output,
                tally,
                ending=ending,
                out=where.out,
                state=where.state,
                emulator=report.emulator,
                job=report.job,
            )
    if fatal is not None:
        raise fatal
    return exit_code_for(run.failures[0].error) if run.failures else ExitCode.OK
