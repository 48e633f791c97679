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

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from magisterium_async._cli._client import check_options, emulator_quota, read_token
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._local_emulator import local_emulator
from magisterium_async._cli.harvest._coordination import (
    check_redis,
    private_redis,
    require_redis_py,
)
from magisterium_async._cli.harvest._plan import (
    PRIVATE_JOB,
    WorkerPaths,
    plan_workers,
    workers_sharing,
)
from magisterium_async._cli.harvest._report import combined_summary
from magisterium_async._config import CREDENTIALS_ENV, REDIS_URL_ENV, TOKEN_ENV, RateLimits
from magisterium_async._redis import masked_url

__all__ = ["run_workers"]


def _quota_text(limits: RateLimits) -> str:
    if limits.default == float("inf") and limits.expensive == float("inf"):
        return "unlimited"
    return f"{limits.default:g}/{limits.expensive:g}/{limits.period:g}"


@dataclass
class _Worker:
    paths: WorkerPaths
    proc: asyncio.subprocess.Process | None = None
    summary: dict[str, Any] | None = None

    @property
    def index(self) -> int:
        return self.paths.index


def _argv(invocation: Invocation, worker: _Worker, job: str) -> list[str]:
    """A worker's command line. Redis is named in its environment, not here: a URL may hold
    a password, and argv is public to every user of the host (``ps``)."""
    args = invocation.args
    argv = [sys.executable, "-m", "magisterium_async", "harvest", *args.queries]
    for query in args.query:
        argv += ["--query", query]
    argv += ["--out", worker.paths.out, "--state", worker.paths.state, "--json"]
    argv += ["--job", job, "--workers", str(args.workers), "--worker-barrier"]
    argv += ["--concurrency", str(args.concurrency), "--max-retries", str(args.max_retries)]
    if args.resume:
        argv.append("--resume")
    if args.timeout is not None:
        argv += ["--timeout", repr(args.timeout)]
    return argv


async def run_workers(invocation: Invocation) -> int:
    """``harvest --workers N``: N child harvests coordinated through Redis, one summary."""
    args = invocation.args
    options = invocation.options
    workers = [_Worker(paths) for paths in plan_workers(args)]
    shared = workers_sharing(args)
    url = shared.url
    job = shared.job or PRIVATE_JOB
    require_redis_py()
    check_options(options)
    env = dict(os.environ)
    common: list[str] = []
    if not options.emulator:
        read_token(options.token_file, options.credentials)  # one error now, not one a worker
        common += ["--token-file", options.token_file] if options.token_file else []
        if options.credentials:  # in the environment: a Redis URL may hold a password
            env[CREDENTIALS_ENV] = options.credentials
        common += ["--base-url", options.base_url] if options.base_url else []
        common += ["--quota", _quota_text(options.quota)] if options.quota else []
        if options.proxy is not None:
            # In the workers' environment, not their argv: the URL may hold a password.
            for name in ("http_proxy", "https_proxy", "no_proxy"):
                env.pop(name, None)
                env.pop(name.upper(), None)
            env["http_proxy"] = env["https_proxy"] = options.proxy
    async with contextlib.AsyncExitStack() as stack:
        if url is None:
            url = await stack.enter_async_context(private_redis())
        await check_redis(url)
        if options.emulator:
            emulator = local_emulator(limits=options.emulator_limits, synthetic=options.synthetic)
            await stack.enter_async_context(emulator)
            env[TOKEN_ENV] = emulator.token
            common += ["--base-url", emulator.base_url]
            common += ["--quota", _quota_text(emulator_quota(options))]
        started = time.monotonic()
        interrupted = False
        env[REDIS_URL_ENV] = url
        argvs = [_argv(invocation, w, job) + common for w in workers]
        try:
            await _supervise(workers, argvs, env)
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            where = "private" if shared.url is None else url
            combined_summary(
                invocation.output,
                ending=_ending(workers, interrupted),
                summaries=[w.summary for w in workers],
                outs=[w.paths.out for w in workers],
                states=[w.paths.state for w in workers],
                job=job,
                redis=masked_url(where),
                elapsed=time.monotonic() - started,
                emulator=options.emulator,
            )
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


def _ending(workers: Sequence[_Worker], interrupted: bool) -> str:
    endings = [w.summary["ending"] if w.summary else "stopped" for w in workers]
    if "stopped" in endings:
        return "stopped"
    return "interrupted" if interrupted or "interrupted" in endings else "done"


def _exit_code(workers: Sequence[_Worker]) -> int:
    codes = [w.proc.returncode if w.proc is not None else ExitCode.ERROR for w in workers]
    ended = (ExitCode.OK, ExitCode.INTERRUPTED, ExitCode.PARTIAL)
    failed = [c for c in codes if c not in ended]
    if failed:  # a worker killed by a signal has a negative code
        return failed[0] if failed[0] is not None and failed[0] > 0 else ExitCode.ERROR
    for code in (ExitCode.INTERRUPTED, ExitCode.PARTIAL):
        if code in codes:
            return code
    return ExitCode.OK
