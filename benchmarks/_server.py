"""The servers the benchmarks talk to, each in a process of its own, on 127.0.0.1.

``python -m benchmarks._server KIND [options]`` prints one JSON line once it listens
(``{"base_url", "token", "pid"}``) and serves until its stdin closes -- so it ends with
the process that started it, whatever happens to that one -- or it gets SIGTERM.

- ``emulator``: ``magisterium_async.testing.Emulator`` (limits lifted unless ``--default``
  is given; ``--synthetic N`` serves a :class:`SyntheticCorpus` of N documents), plus
  ``GET /_bench/stats`` with the emulator's counters by outcome.
- ``canned``: a minimal aiohttp JSON-RPC endpoint that answers every POST with one
  pre-encoded Task (``--body-file``: a JSON-RPC answer from the fixtures) and the request's
  id. It costs the server a few tens of microseconds a request, so a client benchmark
  measures the clients, not the server's skills, auth, quota and task store.

:class:`ServerProcess` starts one from the benchmarks and always stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

__all__ = ["ServerProcess"]

ROOT = Path(__file__).resolve().parent.parent
A2A_PATH = "/api/v1/a2a"
CANNED_TOKEN = "bench-token"
_START_TIMEOUT = 30.0


class ServerProcess:
    """``with ServerProcess("emulator", "--default", "20") as server: server.base_url``."""

    def __init__(self, kind: str, *options: str) -> None:
        self.args = [sys.executable, "-m", "benchmarks._server", kind, *options]
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.token = ""

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            self.args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            info = self._ready_line(self.proc)
        except BaseException:
            self.stop()
            raise
        self.base_url, self.token = info["base_url"], info["token"]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @staticmethod
    def _ready_line(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert proc.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with code {proc.returncode}")
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                line = proc.stdout.readline().decode().strip()
                try:
                    info: dict[str, Any] = json.loads(line)
                except ValueError:
                    raise RuntimeError(f"the server said {line!r}, not its address") from None
                return info
        raise RuntimeError(f"the server did not start within {_START_TIMEOUT:g} s")

    @property
    def origin(self) -> str:
        return self.base_url[: -len(A2A_PATH)]

    def stats(self) -> dict[str, Any]:
        """The emulator's counters (``GET /_bench/stats``)."""
        import urllib.request

        with urllib.request.urlopen(self.origin + "/_bench/stats", timeout=10) as response:
            stats: dict[str, Any] = json.loads(response.read())
        return stats

    def stop(self) -> None:
        """Close stdin (the server's cue), then SIGTERM, then SIGKILL; always reaped."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for step in (proc.stdin.close if proc.stdin else None, proc.terminate, proc.kill):
            if step is not None:
                step()
            try:
                proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        if proc.stdout is not None:
            proc.stdout.close()


# The server side -----------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._server")
    parser.add_argument("kind", choices=("emulator", "canned"))
    parser.add_argument("--default", type=float, help="default pool: requests per period")
    parser.add_argument("--expensive", type=float, help="catholic_qa: requests per period")
    parser.add_argument("--period", type=float, default=60.0)
    parser.add_argument("--algorithm", default="sliding")
    parser.add_argument("--qa-latency", type=float, default=0.0)
    parser.add_argument("--synthetic", type=int, help="serve a SyntheticCorpus of N documents")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--body-file", help="canned: the JSON-RPC answer to send")
    return parser.parse_args(argv)


def _announce(base_url: str, token: str) -> None:
    print(json.dumps({"base_url": base_url, "token": token, "pid": os.getpid()}), flush=True)


async def _until_stdin_closes() -> None:
    """Serve until the parent closes our stdin (or dies) or SIGTERM arrives."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not os.read(fd, 4096):
            loop.remove_reader(fd)
            done.set()

    loop.add_reader(fd, readable)
    await done.wait()


async def _serve_emulator(args: argparse.Namespace) -> None:
    from aiohttp import web

    from magisterium_async.testing import (
        Emulator,
        EmulatorConfig,
        RateLimitConfig,
        SyntheticCorpus,
    )

    limits = None
    if args.default is not None:
        limits = RateLimitConfig(
            default=args.default,
            expensive=args.expensive,
            period=args.period,
            algorithm=args.algorithm,
        )
    corpus = SyntheticCorpus(size=args.synthetic) if args.synthetic else None
    config = EmulatorConfig(
        rate_limits=limits,
        corpus=corpus,
        qa_latency=args.qa_latency,
        max_results=args.max_results,
        max_tasks=1000,  # a long benchmark must not grow the server's task store
        record_arrivals=False,
    )
    emulator = Emulator(config, host="127.0.0.1", port=0)

    async def stats(request: web.Request) -> web.Response:
        counters = emulator.stats
        by_skill: dict[str, dict[str, int]] = {}
        for (_, skill, outcome), number in counters.as_dict().items():
            by_skill.setdefault(str(skill), {})[outcome] = number
        return web.json_response({"by_outcome": counters.by_outcome(), "by_skill": by_skill})

    emulator.app.router.add_get("/_bench/stats", stats)
    async with emulator:
        _announce(emulator.base_url, emulator.token)
        await _until_stdin_closes()


class _Envelope(msgspec.Struct):
    id: Any = None
    result: msgspec.Raw = msgspec.Raw(b"null")


async def _serve_canned(args: argparse.Namespace) -> None:
    from aiohttp import web

    decoder = msgspec.json.Decoder(_Envelope)
    result = bytes(decoder.decode(args.body).result)
    head, tail = b'{"jsonrpc":"2.0","id":', b',"result":' + result + b"}"
    encode = msgspec.json.encode

    async def answer(request: web.Request) -> web.Response:
        request_id = decoder.decode(await request.read()).id
        return web.Response(body=head + encode(request_id) + tail, content_type="application/json")

    app = web.Application()
    app.router.add_post(A2A_PATH, answer)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        _announce(f"http://127.0.0.1:{port}{A2A_PATH}", CANNED_TOKEN)
        await _until_stdin_closes()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    args.body = Path(args.body_file).read_bytes() if args.body_file else b"{}"
    serve = _serve_emulator if args.kind == "emulator" else _serve_canned
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
