"""Redis for harvests over several processes: reaching it, a private one, the worker's start.

The coordination itself (claims, the shared quota) is the library's (:mod:`.._redis_harvest`,
:mod:`.._redis`); this is what the command line adds around it: clear errors when Redis
cannot serve, a ``redis-server`` of its own for ``--workers``, and the handshake between
the parent of ``--workers`` and its workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._errors import SharedQuotaError, SharedStateError
from magisterium_async._redis import masked_url

if TYPE_CHECKING:
    from magisterium_async._harvest._redis_harvest import Coordinator

__all__ = [
    "INSTALL_HINT",
    "check_redis",
    "coordinate",
    "private_redis",
    "require_redis_py",
    "shared_state_error",
    "wait_for_go",
]

INSTALL_HINT = "several workers need redis-py: pip install 'magisterium-async[redis]'"
_TIMEOUT = 5.0
_READY = "ready to accept connections"  # redis-server's line, in its versions' spellings


def require_redis_py() -> None:
    """:class:`CliError` naming the extra when redis-py is not installed."""
    try:
        import redis  # noqa: F401
    except ImportError:
        raise CliError(INSTALL_HINT, ExitCode.ERROR) from None


async def check_redis(url: str) -> None:
    """A clear error now if redis-py is missing, ``url`` is invalid or Redis is unreachable."""
    require_redis_py()
    from magisterium_async._redis import connect, redis_errors

    try:
        client = connect(url, _TIMEOUT)
    except SharedQuotaError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    try:
        await asyncio.wait_for(client.ping(), _TIMEOUT)
    except redis_errors() as exc:
        reason = str(exc) or type(exc).__name__
        raise CliError(
            f"cannot reach Redis at {masked_url(url)}: {reason}", ExitCode.CONNECTION
        ) from None
    finally:
        await client.aclose()


def shared_state_error(exc: SharedStateError, url: str) -> CliError:
    """The harvest's Redis failed (exit 5) or lost its state (exit 1)."""
    code = ExitCode.CONNECTION if exc.__cause__ is not None else ExitCode.ERROR
    return CliError(str(exc).replace(url, masked_url(url)), code)


async def coordinate(url: str, job: str, state: str | None) -> Coordinator:
    """This worker's claims in ``job``, with what its state already holds claimed first."""
    from magisterium_async._harvest._redis_harvest import Coordinator, worker_identity

    coordinator = Coordinator(url, job, worker_identity(state))
    try:
        if state is not None:
            await coordinator.hydrate(state)
    except BaseException:
        await coordinator.aclose()
        raise
    return coordinator


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


@contextlib.asynccontextmanager
async def private_redis() -> AsyncIterator[str]:
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
