"""A private ``redis-server`` on a free loopback port, for test_redis and the benchmark."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence

__all__ = ["RedisClusterServers", "RedisServer", "SentinelServers", "redis_unavailable"]


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


def _redis_cli(*args: str) -> str:
    done = subprocess.run(
        ["redis-cli", *args], check=True, capture_output=True, timeout=30, text=True
    )
    return done.stdout


def _until(ready: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    """Wait for a server started here to reach a state (a readiness poll of another
    process, bounded; not a test's synchronisation)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {seconds:g} s")
        time.sleep(0.05)


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


class RedisClusterServers:
    """Three ``redis-server --cluster-enabled yes`` primaries joined by ``redis-cli
    --cluster create`` (every slot assigned, no replica)."""

    def __init__(self, directory: str) -> None:
        self.nodes = [RedisServer() for _ in range(3)]
        for node in self.nodes:
            node.port = _cluster_port()
            node.options = [
                "--cluster-enabled", "yes", "--dir", directory,
                "--cluster-config-file", f"nodes-{node.port}.conf",
                "--cluster-node-timeout", "2000",
            ]  # fmt: skip

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:2])

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        hosts = [f"127.0.0.1:{n.port}" for n in self.nodes]
        _redis_cli("--cluster", "create", *hosts, "--cluster-replicas", "0", "--cluster-yes")

        def ok() -> bool:
            return all(
                "cluster_state:ok" in _redis_cli("-p", str(n.port), "cluster", "info")
                for n in self.nodes
            )

        _until(ok, "the cluster")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class SentinelServers:
    """A primary, its replica and one ``redis-server --sentinel`` watching them as
    ``mymaster`` (quorum 1, a primary down after 1 s)."""

    SERVICE = "mymaster"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        # Each in its own directory: a replica writes the primary's RDB to disk when it
        # syncs, and would leave a dump.rdb in the working directory (the checkout).
        self.primary = RedisServer(("--dir", self._made(directory, "primary")))
        self.replica = RedisServer(("--dir", self._made(directory, "replica")))
        self.sentinel_port = _free_port()
        self.sentinel: subprocess.Popen[bytes] | None = None

    @staticmethod
    def _made(directory: str, name: str) -> str:
        path = os.path.join(directory, name)
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.SERVICE}/0"

    def master_port(self) -> int:
        out = _redis_cli(
            "-p", str(self.sentinel_port), "sentinel", "get-master-addr-by-name", self.SERVICE
        )
        return int(out.split()[1])

    def start(self) -> None:
        self.primary.start()
        self.replica.options += ["--replicaof", "127.0.0.1", str(self.primary.port)]
        self.replica.start()
        replica = str(self.replica.port)
        _until(
            lambda: "master_link_status:up" in _redis_cli("-p", replica, "info", "replication"),
            "the replica",
        )
        conf = os.path.join(self.directory, "sentinel.conf")
        with open(conf, "w") as file:
            file.write(
                f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 1\n"
                f"sentinel down-after-milliseconds {self.SERVICE} 1000\n"
                f"sentinel failover-timeout {self.SERVICE} 5000\n"
            )
        self.sentinel = subprocess.Popen(
            ["redis-server", conf, "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def knows_replica() -> bool:
            try:
                out = _redis_cli(
                    "-p", str(self.sentinel_port), "sentinel", "replicas", self.SERVICE
                )
            except subprocess.CalledProcessError:
                return False
            return replica in out

        _until(knows_replica, "the sentinel")

    def fail_over(self) -> None:
        """SIGKILL the primary, and wait until Sentinel names the replica instead."""
        self.primary.stop()
        _until(lambda: self.master_port() == self.replica.port, "the failover", 30.0)

    def stop(self) -> None:
        proc, self.sentinel = self.sentinel, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        self.replica.stop()
        self.primary.stop()
