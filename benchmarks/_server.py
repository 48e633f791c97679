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
- ``window``: a fixed-window quota in front of a canned one-hit search Task, for
  ``bench_quota``: ``--schedule 0:20,4:6,10:20`` (requests per ``--period`` window, by
  seconds since the last ``POST /_bench/reset``, which also starts the first window),
  ``--jitter S`` (each request waits up to S seconds before the server counts it), or
  ``--spurious P`` (no quota: a 429 with ``retryAfter`` ``--spurious-wait`` for a share P
  of the requests, at random). A 429 is HTTP 429, -32003, with the exact seconds to the
  window's end in ``retryAfter``. A ``document_fetch`` is answered with a canned
  document Task, any other message with the search Task. ``GET /_bench/stats``:
  ``{"ok", "rate_limited", "t0", "accepted"}``: ``t0`` is the last reset on the server's
  monotonic clock (``time.monotonic()``, the same clock in every process of the
  machine), ``accepted`` the seconds since ``t0`` at which each accepted request was
  counted, in order (a benchmark's run is short: the list stays small).

:class:`ServerProcess` starts one from the benchmarks and always stops it;
:class:`RedisServer` starts a private ``redis-server`` for the shared-quota benchmarks,
:class:`RedisCluster` a private three-primary Redis Cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # imported inside the servers: the module loads without aiohttp
    from aiohttp import web

__all__ = ["RedisServer", "ServerProcess", "run_together"]

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
        """The server's counters (``GET /_bench/stats``)."""
        import urllib.request

        with urllib.request.urlopen(self.origin + "/_bench/stats", timeout=10) as response:
            stats: dict[str, Any] = json.loads(response.read())
        return stats

    def reset(self) -> None:
        """``window``: start the quota afresh, its first window now (``POST /_bench/reset``)."""
        import urllib.request

        request = urllib.request.Request(self.origin + "/_bench/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A private ``redis-server`` on a free loopback port, nothing saved; ``stop()`` it."""

    def __init__(self) -> None:
        self.port = _free_port()
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if b"Ready to accept connections" in line:
                return
        raise RuntimeError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def flushall(self) -> None:
        """Forget every key: each measured run starts from a Redis nothing has learnt in."""
        import redis

        with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10) as connection:
            connection.flushall()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` primaries on free loopback ports, joined
    by ``redis-cli --cluster create`` (every slot assigned, no replica); ``stop()`` it.

    ``url`` names two of the three nodes: the client finds the third from them."""

    def __init__(self) -> None:
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="bench-cluster-")
        self.ports = [_cluster_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for port in self.ports:
                args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
                args += ["--save", "", "--appendonly", "no", "--cluster-enabled", "yes"]
                args += ["--dir", self._dir.name, "--cluster-config-file", f"nodes-{port}.conf"]
                proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                self.procs.append(proc)
                assert proc.stdout is not None
                for line in proc.stdout:
                    if b"Ready to accept connections" in line:
                        break
                else:
                    raise RuntimeError("redis-server (cluster mode) did not start")
            hosts = [f"127.0.0.1:{port}" for port in self.ports]
            create = ["redis-cli", "--cluster", "create", *hosts, "--cluster-replicas", "0"]
            subprocess.run(
                [*create, "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            deadline = time.monotonic() + 30  # a readiness poll of other processes, bounded
            while not all(self._info(port) for port in self.ports):
                if time.monotonic() > deadline:
                    raise RuntimeError("the cluster did not reach cluster_state:ok")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _info(port: int) -> bool:
        done = subprocess.run(
            ["redis-cli", "-p", str(port), "cluster", "info"],
            capture_output=True,
            timeout=30,
            text=True,
        )
        return "cluster_state:ok" in done.stdout

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:2])

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs = []
        self._dir.cleanup()

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _cluster_port() -> int:
    """A free port whose cluster bus port (10000 above) is free too."""
    while True:
        port = _free_port()
        if port > 55535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


# The server side -----------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._server")
    parser.add_argument("kind", choices=("emulator", "canned", "window"))
    parser.add_argument("--default", type=float, help="default pool: requests per period")
    parser.add_argument("--expensive", type=float, help="catholic_qa: requests per period")
    parser.add_argument("--period", type=float, default=60.0)
    parser.add_argument("--algorithm", default="sliding")
    parser.add_argument("--qa-latency", type=float, default=0.0)
    parser.add_argument("--synthetic", type=int, help="serve a SyntheticCorpus of N documents")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--body-file", help="canned: the JSON-RPC answer to send")
    parser.add_argument("--schedule", default="0:20", help="window: T:LIMIT,... by seconds")
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--spurious", type=float, default=0.0)
    parser.add_argument("--spurious-wait", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
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


async def _serve(app: web.Application) -> None:
    """Serve ``app`` on a free loopback port, announce it, and stop when stdin closes."""
    from aiohttp import web

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
    await _serve(app)


def _task(number: int, artifact: str, parts: list[dict[str, Any]]) -> bytes:
    """A completed Task with one artifact, encoded once."""
    return msgspec.json.encode(
        {
            "kind": "task",
            "id": f"task-{number}",
            "contextId": f"ctx-{number}",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": f"a-{number}", "name": artifact, "parts": parts}],
        }
    )


_HIT = {"id": "doc-1", "url": "u", "title": "Grace"}
_SEARCH_RESULT = _task(1, "search_results", [{"kind": "data", "data": {"results": [_HIT]}}])
_DOCUMENT_RESULT = _task(
    2,
    "document",
    [
        {"kind": "data", "data": {"id": "doc-1", "title": "Grace", "ref": "1"}},
        {"kind": "text", "text": "Grace perfects nature."},
    ],
)
_FETCH_SKILL = b'"document_fetch"'


def _schedule(text: str) -> list[tuple[float, int]]:
    steps = [(float(at), int(limit)) for at, limit in (s.split(":") for s in text.split(","))]
    return sorted(steps)


async def _serve_window(args: argparse.Namespace) -> None:
    import math
    import random

    from aiohttp import web

    decoder = msgspec.json.Decoder(_Envelope)
    schedule = _schedule(args.schedule)
    period, jitter, spurious = args.period, args.jitter, args.spurious
    rng = random.Random(args.seed)
    head = b'{"jsonrpc":"2.0","id":'
    tail = b',"result":' + _SEARCH_RESULT + b"}"
    fetch_tail = b',"result":' + _DOCUMENT_RESULT + b"}"
    encode = msgspec.json.encode
    loop = asyncio.get_running_loop()  # its time() is time.monotonic(): stats report it
    state = {"t0": loop.time(), "window": -1, "count": 0, "ok": 0, "rate_limited": 0}
    accepted: list[float] = []

    def limit_at(t: float) -> int:
        return next(limit for at, limit in reversed(schedule) if t >= at)

    def refused(request_id: Any, wait: float) -> web.Response:
        state["rate_limited"] += 1
        error = {"code": -32003, "message": "Rate limit exceeded", "data": {"retryAfter": wait}}
        body = {"jsonrpc": "2.0", "id": request_id, "error": error}
        return web.Response(status=429, body=encode(body), content_type="application/json")

    async def answer(request: web.Request) -> web.Response:
        raw = await request.read()
        request_id = decoder.decode(raw).id
        if jitter:
            await asyncio.sleep(rng.uniform(0, jitter))
        if spurious:
            if rng.random() < spurious:
                return refused(request_id, args.spurious_wait)
        else:
            t = loop.time() - state["t0"]
            window = math.floor(t / period)
            if window != state["window"]:
                state["window"], state["count"] = window, 0
            if state["count"] >= limit_at(window * period):
                return refused(request_id, round((window + 1) * period - t, 6))
            state["count"] += 1
        state["ok"] += 1
        accepted.append(round(loop.time() - state["t0"], 6))
        answer = fetch_tail if _FETCH_SKILL in raw else tail
        return web.Response(
            body=head + encode(request_id) + answer, content_type="application/json"
        )

    async def reset(request: web.Request) -> web.Response:
        state.update(t0=loop.time(), window=-1, count=0, ok=0, rate_limited=0)
        accepted.clear()
        rng.seed(args.seed)  # every client meets the same random 429s
        return web.json_response({"reset": True})

    async def stats(request: web.Request) -> web.Response:
        counters = {"ok": state["ok"], "rate_limited": state["rate_limited"]}
        return web.json_response({**counters, "t0": state["t0"], "accepted": accepted})

    app = web.Application()
    app.router.add_post(A2A_PATH, answer)
    app.router.add_post("/_bench/reset", reset)
    app.router.add_get("/_bench/stats", stats)
    await _serve(app)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    args.body = Path(args.body_file).read_bytes() if args.body_file else b"{}"
    serves = {"emulator": _serve_emulator, "canned": _serve_canned, "window": _serve_window}
    asyncio.run(serves[args.kind](args))


if __name__ == "__main__":
    main()


def run_together(procs: list[subprocess.Popen[bytes]], timeout: float) -> list[Any]:
    """Worker processes released at once: each prints ``READY``, then all are told ``go``;
    the JSON object each prints last, in order. A worker that does not start or fails is a
    ``RuntimeError``."""
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"READY":
            raise RuntimeError("a worker did not start")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"a worker exited with code {proc.returncode}")
        reports.append(json.loads(out.splitlines()[-1]))
    return reports
