"""``harvest`` over several workers: ``--redis URL --job NAME`` and ``--workers N``.

Each worker is an ordinary harvest (its own ``--out`` and state, so killing it loses at
most the lines in progress and ``--resume`` finishes it) that Redis coordinates
(:mod:`._redis_harvest`): every query is searched once, every document fetched once, over
all the workers, and they share the token's quota (:mod:`._redis`).

``--workers N`` runs N such workers on this host as child processes of one command:
worker K writes ``OUT.wK.jsonl`` (its state ``OUT.wK.jsonl.state.sqlite``). The parent
starts them together once each has claimed what its state already holds (so a resumed
harvest rebuilds its claims even in an empty Redis), stops them when it is interrupted
(they see their stdin close), and prints one summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._cli_client import ClientOptions, read_token
from ._cli_errors import CliError, ExitCode
from ._config import RateLimits
from ._errors import SharedQuotaError, SharedStateError

__all__ = [
    "HARVEST_EPILOG",
    "Sharing",
    "check_redis",
    "run_workers",
    "shared_state_error",
    "sharing",
    "wait_for_go",
]

HARVEST_EPILOG = """\
Documents go out as JSON Lines, fsync'd in small batches: a killed harvest loses at
most the lines in progress, and --resume writes every document exactly once. With
--json the summary on stderr is one JSON object.

several workers: each reads the same queries; Redis decides which one searches each
query and fetches each document (once over all of them), and they share the quota.
  several hosts  run the same command on each, with the same --redis URL --job NAME
                 and each its own --out; the harvest is the union of the outputs.
  --workers N    N processes on this host, worker K writing OUT.wK.jsonl (its state
                 OUT.wK.jsonl.state.sqlite, or STATE.wK with --state): cat them for
                 the whole harvest. Without --redis or $MAGISTERIUM_REDIS_URL, a
                 private redis-server (on PATH) serves the run on a Unix socket.
                 --emulator serves every worker from one emulator.
  --resume       the same command again (same --job, same --workers): each worker
                 first claims what its state holds, so even an empty Redis is rebuilt.
  --job has no default: a name derived from the queries would make a new harvest of
  the same queries find everything claimed by the last one and write nothing.
  $MAGISTERIUM_REDIS_URL without --job (and one worker) only shares the quota."""

INSTALL_HINT = "several workers need redis-py: pip install 'magisterium-async[redis]'"
REDIS_URL_ENV = "MAGISTERIUM_REDIS_URL"
PRIVATE_JOB = "local"
_JOB = re.compile(r"[A-Za-z0-9._-]{1,100}")
_TIMEOUT = 5.0
_READY = "ready to accept connections"  # redis-server's line, in its versions' spellings


@dataclass(frozen=True)
class Sharing:
    """What one harvest process shares through Redis: the quota (``url``), and the work
    when it has a ``job``."""

    url: str | None
    job: str | None


def safe_url(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _check_job(job: str) -> None:
    if not _JOB.fullmatch(job):
        raise CliError(
            f"--job {job!r}: use up to 100 letters, digits, '.', '_' or '-'", ExitCode.USAGE
        )


def sharing(args: argparse.Namespace) -> Sharing:
    """The Redis and job of one harvest process (not a ``--workers`` parent)."""
    url = args.redis or os.environ.get(REDIS_URL_ENV) or None
    if args.job is not None:
        _check_job(args.job)
        if url is None:
            raise CliError(
                f"--job shares a harvest through Redis: pass --redis URL or set ${REDIS_URL_ENV}",
                ExitCode.USAGE,
            )
    elif args.redis is not None:
        raise CliError(
            "--redis shares a harvest between invocations: name it with --job NAME, "
            "the same on each",
            ExitCode.USAGE,
        )
    return Sharing(url, args.job)


def _require_redis_py() -> None:
    try:
        import redis  # noqa: F401
    except ImportError:
        raise CliError(INSTALL_HINT, ExitCode.ERROR) from None


async def check_redis(url: str) -> None:
    """A clear error now if redis-py is missing, ``url`` is invalid or Redis is unreachable."""
    _require_redis_py()
    from ._redis import connect, redis_errors

    try:
        client = connect(url, _TIMEOUT)
    except SharedQuotaError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    try:
        await asyncio.wait_for(client.ping(), _TIMEOUT)
    except redis_errors() as exc:
        reason = str(exc) or type(exc).__name__
        raise CliError(
            f"cannot reach Redis at {safe_url(url)}: {reason}", ExitCode.CONNECTION
        ) from None
    finally:
        await client.aclose()


def shared_state_error(exc: SharedStateError, url: str) -> CliError:
    """The harvest's Redis failed (exit 5) or lost its state (exit 1)."""
    code = ExitCode.CONNECTION if exc.__cause__ is not None else ExitCode.ERROR
    return CliError(str(exc).replace(url, safe_url(url)), code)


async def wait_for_go() -> None:
    """In a worker of ``--workers``: say ``READY``, start on the parent's line, and stop as
    on Ctrl-C when the parent closes stdin (it stops, or it died)."""
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    go: asyncio.Future[None] = loop.create_future()

    def started() -> None:
        if not go.done():
            go.set_result(None)

    def watch() -> None:
        if sys.stdin.readline():
            with contextlib.suppress(RuntimeError):  # the event loop is already closed
                loop.call_soon_threadsafe(started)
            for _ in sys.stdin:
                pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(signal.raise_signal, signal.SIGINT)

    threading.Thread(target=watch, name="magisterium-parent", daemon=True).start()
    await go


# -- the parent of --workers ----------------------------------------------------------------


def worker_path(path: str, index: int) -> str:
    """``docs.jsonl`` -> ``docs.w1.jsonl`` (``docs`` -> ``docs.w1``)."""
    root, ext = os.path.splitext(path)
    return f"{root}.w{index}{ext}"


def _quota_text(limits: RateLimits) -> str:
    if limits.default == float("inf") and limits.expensive == float("inf"):
        return "unlimited"
    return f"{limits.default:g}/{limits.expensive:g}/{limits.period:g}"


@contextlib.asynccontextmanager
async def _private_redis() -> AsyncIterator[str]:
    """A ``redis-server`` for this run only, on a Unix socket in a private directory."""
    directory = tempfile.mkdtemp(prefix="magisterium-redis-")
    sock = os.path.join(directory, "redis.sock")
    proc = await asyncio.create_subprocess_exec(
        "redis-server",
        *("--port", "0", "--unixsocket", sock, "--unixsocketperm", "700"),
        *("--save", "", "--appendonly", "no", "--dir", directory),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches the parent, which stops it last
    )
    assert proc.stdout is not None
    drain: asyncio.Task[bytes] | None = None
    try:
        lines: list[str] = []

        async def started() -> None:
            assert proc.stdout is not None
            while line := (await proc.stdout.readline()).decode(errors="replace"):
                lines.append(line.strip())
                if _READY in line.lower():
                    return

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(started(), 10)
        if not lines or _READY not in lines[-1].lower():
            last = lines[-1] if lines else "no output"
            raise CliError(f"the private redis-server did not start: {last}")
        drain = asyncio.create_task(proc.stdout.read())  # its log, so it never blocks
        yield f"unix://{sock}"
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        if drain is not None:
            await drain
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class _Worker:
    index: int
    out: str
    state: str
    proc: asyncio.subprocess.Process | None = None
    summary: dict[str, Any] | None = None


def _plan_workers(args: argparse.Namespace) -> list[_Worker]:
    if args.out in (None, "-"):
        raise CliError("--workers writes one file per worker: give --out FILE", ExitCode.USAGE)
    if "-" in args.queries:
        raise CliError(
            "--workers cannot share stdin: put the queries in a file, or use --query",
            ExitCode.USAGE,
        )
    if not args.queries and not args.query:
        raise CliError("give a QUERIES_FILE or at least one --query", ExitCode.USAGE)
    workers = []
    for index in range(1, args.workers + 1):
        out = worker_path(args.out, index)
        state = f"{args.state}.w{index}" if args.state else f"{out}.state.sqlite"
        workers.append(_Worker(index, out, state))
    for worker in workers:
        for path in (worker.out, worker.state):
            if not args.resume and os.path.exists(path):
                raise CliError(
                    f"{path} already exists: add --resume to continue that harvest, "
                    "or choose another --out",
                    ExitCode.USAGE,
                )
    beyond = worker_path(args.out, args.workers + 1)
    if args.resume and os.path.exists(beyond):
        raise CliError(
            f"{beyond} exists: resume with the --workers that harvest had", ExitCode.USAGE
        )
    return workers


def _argv(args: argparse.Namespace, worker: _Worker, url: str, job: str) -> list[str]:
    argv = [sys.executable, "-m", "magisterium_async", "harvest", *args.queries]
    for query in args.query:
        argv += ["--query", query]
    argv += ["--out", worker.out, "--state", worker.state, "--json"]
    argv += ["--redis", url, "--job", job, "--workers", str(args.workers), "--worker-barrier"]
    argv += ["--concurrency", str(args.concurrency), "--max-retries", str(args.max_retries)]
    if args.resume:
        argv.append("--resume")
    if args.timeout is not None:
        argv += ["--timeout", repr(args.timeout)]
    return argv


async def run_workers(args: argparse.Namespace, options: ClientOptions) -> int:
    """``harvest --workers N``: N child harvests coordinated through Redis, one summary."""
    workers = _plan_workers(args)
    url = args.redis or os.environ.get(REDIS_URL_ENV) or None
    if args.job is not None:
        _check_job(args.job)
    if url is None:
        if shutil.which("redis-server") is None:
            raise CliError(
                f"--workers {args.workers} needs Redis to coordinate: pass --redis URL (or set "
                f"${REDIS_URL_ENV}), or install redis-server for a private one",
                ExitCode.USAGE,
            )
    elif args.job is None:
        raise CliError(
            "--workers with a shared Redis needs --job NAME (the same on every host)",
            ExitCode.USAGE,
        )
    job = args.job or PRIVATE_JOB
    _require_redis_py()
    env = dict(os.environ)
    common: list[str] = []
    if not options.emulator:
        read_token(options.token_file)  # one clear error now, not one per worker
        if options.synthetic is not None or options.emulator_limits:
            raise CliError("--synthetic and --emulator-limits need --emulator", ExitCode.USAGE)
        common += ["--token-file", options.token_file] if options.token_file else []
        common += ["--base-url", options.base_url] if options.base_url else []
        common += ["--quota", _quota_text(options.quota)] if options.quota else []
    elif options.base_url is not None or options.token_file is not None:
        raise CliError(
            "--emulator runs its own server: drop --base-url and --token-file", ExitCode.USAGE
        )
    async with contextlib.AsyncExitStack() as stack:
        if url is None:
            url = await stack.enter_async_context(_private_redis())
        await check_redis(url)
        if options.emulator:
            from ._cli_emulator import local_emulator

            emulator = local_emulator(limits=options.emulator_limits, synthetic=options.synthetic)
            await stack.enter_async_context(emulator)
            quota = options.quota or (
                RateLimits.pro() if options.emulator_limits else RateLimits.unlimited()
            )
            env["MAGISTERIUM_TOKEN"] = emulator.token
            common += ["--base-url", emulator.base_url, "--quota", _quota_text(quota)]
        started = time.monotonic()
        interrupted = False
        try:
            await _supervise(workers, [_argv(args, w, url, job) + common for w in workers], env)
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            where = "private" if args.redis is None and not os.environ.get(REDIS_URL_ENV) else url
            _combined(args, workers, job, safe_url(where), time.monotonic() - started, interrupted)
    return _exit_code(workers)


async def _supervise(
    workers: Sequence[_Worker], argvs: list[list[str]], env: dict[str, str]
) -> None:
    pipe = asyncio.subprocess.PIPE
    readers: list[asyncio.Task[None]] = []
    try:
        for worker, argv in zip(workers, argvs, strict=True):
            worker.proc = await asyncio.create_subprocess_exec(
                *argv, stdin=pipe, stdout=pipe, stderr=pipe, env=env, start_new_session=True
            )
            readers.append(asyncio.create_task(_read_stderr(worker)))
        ready = await asyncio.gather(*(_ready(w) for w in workers))
        for worker in workers:
            assert worker.proc is not None and worker.proc.stdin is not None
            if all(ready):
                worker.proc.stdin.write(b"go\n")
            else:  # one could not start: the others stop before they begin
                worker.proc.stdin.close()
        await asyncio.gather(*(w.proc.wait() for w in workers if w.proc is not None))
    finally:
        await asyncio.shield(_stop(workers, readers))


async def _ready(worker: _Worker) -> bool:
    assert worker.proc is not None and worker.proc.stdout is not None
    return (await worker.proc.stdout.readline()).strip() == b"READY"


async def _read_stderr(worker: _Worker) -> None:
    """Forward a worker's stderr, prefixed; keep its JSON summary."""
    assert worker.proc is not None and worker.proc.stderr is not None
    async for raw in worker.proc.stderr:
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and "ending" in record:
                    worker.summary = record
                    continue
        print(f"[w{worker.index}] {line}", file=sys.stderr, flush=True)


async def _stop(workers: Sequence[_Worker], readers: list[asyncio.Task[None]]) -> None:
    """Close every worker's stdin (a running one stops as on Ctrl-C); kill laggards."""
    procs = [w.proc for w in workers if w.proc is not None]
    for proc in procs:
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
    for proc in procs:
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
    if readers:
        await asyncio.gather(*readers, return_exceptions=True)
    for proc in procs:
        if proc.stdout is not None:
            await proc.stdout.read()


_SUMMED = (
    "queries",
    "searched",
    "skipped_queries",
    "results",
    "unique_ids",
    "fetched",
    "resumed",
    "yielded",
    "not_found",
    "failed",
    "rate_limited",
    "written",
    "already_in_file",
)


def _ending(workers: Sequence[_Worker], interrupted: bool) -> str:
    endings = [w.summary["ending"] if w.summary else "stopped" for w in workers]
    if "stopped" in endings:
        return "stopped"
    return "interrupted" if interrupted or "interrupted" in endings else "done"


def _combined(
    args: argparse.Namespace,
    workers: Sequence[_Worker],
    job: str,
    redis: str,
    elapsed: float,
    interrupted: bool,
) -> None:
    totals = {key: sum(int((w.summary or {}).get(key, 0)) for w in workers) for key in _SUMMED}
    ending = _ending(workers, interrupted)
    if args.json:
        record: dict[str, Any] = {"ending": ending, "workers": len(workers), "job": job}
        record.update(redis=redis, out=[w.out for w in workers], state=[w.state for w in workers])
        record.update(totals, elapsed=elapsed, per_worker=[w.summary for w in workers])
        print(json.dumps(record), file=sys.stderr)
        return
    head = {"done": "Harvested", "stopped": "Stopped after", "interrupted": "Interrupted after"}
    from ._cli_harvest import _seconds

    lines = [
        f"{head[ending]} {totals['written']} documents from {totals['queries']} queries with "
        f"{len(workers)} workers in {_seconds(elapsed)} → {workers[0].out} … {workers[-1].out}",
        f"  searched {totals['searched']} · results {totals['results']} · new documents "
        f"{totals['unique_ids']} · not found {totals['not_found']} · failed {totals['failed']}"
        f" · 429s {totals['rate_limited']} · job {job} on {redis} Redis",
        "  per worker: "
        + " · ".join(
            f"w{w.index} {(w.summary or {}).get('written', '?')} docs"
            f"/{(w.summary or {}).get('queries', '?')} queries"
            for w in workers
        ),
    ]
    if totals["already_in_file"]:
        lines.append(f"  {totals['already_in_file']} already in the outputs, not written again")
    if ending != "done" or totals["failed"]:
        lines.append("  run the same command with --resume to continue")
    if args.emulator:
        lines.append(
            "  served offline by the bundled emulator; drop --emulator and set "
            "MAGISTERIUM_TOKEN to harvest the real service"
        )
    print("\n".join(lines), file=sys.stderr)


def _exit_code(workers: Sequence[_Worker]) -> int:
    codes = [w.proc.returncode if w.proc is not None else ExitCode.ERROR for w in workers]
    failed = [c for c in codes if c not in (ExitCode.OK, ExitCode.INTERRUPTED)]
    if failed:  # a worker killed by a signal has a negative code
        return failed[0] if failed[0] is not None and failed[0] > 0 else ExitCode.ERROR
    return ExitCode.INTERRUPTED if ExitCode.INTERRUPTED in codes else ExitCode.OK
