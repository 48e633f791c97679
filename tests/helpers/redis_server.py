"""A private ``redis-server`` on a free loopback port, for test_redis and the benchmark."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence

__all__ = ["RedisServer", "redis_unavailable"]


def redis_unavailable() -> str | None:
    """Why the Redis tests cannot run here (``None``: they can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "redis-py is not installed (pip install 'magisterium-async[redis]')"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """``redis-server --port P --bind 127.0.0.1 --save '' --appendonly no``; restartable.

    ``options`` are added after those, and win: ``("--appendonly", "yes", "--dir", D)``
    keeps what it acknowledged through :meth:`restart`; ``("--port", "0", "--tls-port",
    str(server.port), ...)`` serves TLS alone.
    """

    def __init__(self, options: Sequence[str] = ()) -> None:
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.options = list(options)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--loglevel",
            "notice",
            *self.options,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 10
        for raw in self.proc.stdout:  # the server says when it is ready
            line = raw.decode(errors="replace")
            lines.append(line)
            if "Ready to accept connections" in line:
                return
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError("redis-server did not start:\n" + "".join(lines))

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    def restart(self) -> None:
        """Kill it (losing everything, unless told to append to a file) and start it again
        on the same port."""
        self.stop()
        self.start()


def ci() -> bool:
    return os.environ.get("CI") == "true"
