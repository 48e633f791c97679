"""Interop fixtures: a2a-sdk servers and clients, each in its own virtualenv, in subprocesses.

a2a-sdk 0.3 and 1.x cannot share an environment (nor should they share the project's), so
each runs under its own python, found in this order:

1. ``$MAGISTERIUM_INTEROP_PY03`` / ``$MAGISTERIUM_INTEROP_PY13``: a python executable
   where ``pip install -r tests/interop/requirements-a2a03.txt`` (or ``-a2a13``) was run;
2. ``.venv-interop03`` / ``.venv-interop13`` under the repository root;
3. with ``MAGISTERIUM_INTEROP_BUILD=1``, that virtualenv is built (needs PyPI, a minute).

When none is there the tests skip, saying how to get one -- or fail when ``CI`` is true:
CI must not pass by skipping them.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOKEN = "interop-token-0123456789"
RPC_PATH = "/api/v1/a2a"
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class InteropEnv:
    """One a2a-sdk version and where its virtualenv comes from."""

    key: str
    version: str
    variable: str

    @property
    def requirements(self) -> Path:
        return HERE / f"requirements-a2a{self.key}.txt"

    @property
    def venv(self) -> Path:
        return ROOT / f".venv-interop{self.key}"

    @property
    def server_script(self) -> Path:
        return HERE / f"a2a{self.key}_server.py"


A2A03 = InteropEnv("03", "0.3.26", "MAGISTERIUM_INTEROP_PY03")
A2A13 = InteropEnv("13", "1.3.0", "MAGISTERIUM_INTEROP_PY13")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _installed_version(python: Path) -> str | None:
    """The a2a-sdk version importable by ``python`` (with uvicorn), or ``None``."""
    probe = "import importlib.metadata as m, a2a, uvicorn; print(m.version('a2a-sdk'))"
    try:
        done = subprocess.run(
            [str(python), "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _build(env: InteropEnv) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(env.venv)], check=True, timeout=300)
    python = str(_venv_python(env.venv))
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(env.requirements)], check=True, timeout=900)


def resolve_python(env: InteropEnv) -> Path:
    """The python to run a2a-sdk ``env.version`` with; skips or fails the test without one."""
    given = os.environ.get(env.variable)
    if given:
        found = _installed_version(Path(given))
        if found != env.version:
            what = f"a2a-sdk {found}" if found else "no importable a2a-sdk and uvicorn"
            pytest.fail(
                f"${env.variable}={given} does not provide a2a-sdk=={env.version} and uvicorn "
                f"({what}); run: {given} -m pip install -r {env.requirements}"
            )
        return Path(given)
    python = _venv_python(env.venv)
    if python.exists() and _installed_version(python) == env.version:
        return python
    if os.environ.get("MAGISTERIUM_INTEROP_BUILD") == "1":
        _build(env)
        if _installed_version(python) == env.version:
            return python
        pytest.fail(f"built {env.venv} but it does not provide a2a-sdk=={env.version}")
    reason = (
        f"no a2a-sdk {env.version} environment: set ${env.variable} to a python where "
        f"`pip install -r tests/interop/{env.requirements.name}` was run, or set "
        f"MAGISTERIUM_INTEROP_BUILD=1 to build {env.venv.name}/ (needs PyPI)"
    )
    if _in_ci():
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def a2a03_python() -> Path:
    """The python of the a2a-sdk 0.3 environment."""
    return resolve_python(A2A03)


@pytest.fixture(scope="session")
def a2a13_python() -> Path:
    """The python of the a2a-sdk 1.x environment."""
    return resolve_python(A2A13)


@dataclass(frozen=True)
class ServerKind:
    """Which a2a-sdk server: its version, and whether it serves A2A 1.0 alone."""

    id: str
    env: InteropEnv
    v1_only: bool = False


SERVERS = [
    ServerKind("a2a-0.3", A2A03),
    ServerKind("a2a-1.3-compat", A2A13),
    ServerKind("a2a-1.3", A2A13, v1_only=True),
]


@dataclass(frozen=True)
class A2AServer:
    """An a2a-sdk server running in a subprocess on 127.0.0.1."""

    env: InteropEnv
    port: int
    v1_only: bool = False

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.origin + RPC_PATH

    @property
    def token(self) -> str:
        return TOKEN


def _read_port(stdout: IO[bytes], proc: subprocess.Popen[bytes], deadline: float) -> int:
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([stdout], [], [], 0.1)
        if ready:
            line = stdout.readline().decode().strip()
            if line.startswith("PORT "):
                return int(line.split()[1])
            raise RuntimeError(f"unexpected first line from the server: {line!r}")
    raise RuntimeError("the server did not report its port")


def _wait_ready(origin: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Poll the agent card until the server answers it."""
    url = origin + "/.well-known/agent-card.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the server did not answer {url} in time")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin (the server's cue to exit), then terminate, then kill."""
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    for step in (None, proc.terminate, proc.kill):
        if step is not None:
            step()
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session", params=SERVERS, ids=[kind.id for kind in SERVERS])
def a2a_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[A2AServer]:
    """Each a2a-sdk server of :data:`SERVERS` in turn."""
    kind: ServerKind = request.param
    env = kind.env
    python: Path = request.getfixturevalue(f"a2a{env.key}_python")
    log = tmp_path_factory.mktemp(kind.id) / "server.log"
    flags = ["--v1-only"] if kind.v1_only else []
    with (
        log.open("wb") as stderr,
        subprocess.Popen(
            [str(python), str(env.server_script), "--token", TOKEN, *flags],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        ) as proc,
    ):
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + START_TIMEOUT
            try:
                port = _read_port(proc.stdout, proc, deadline)
                server = A2AServer(env, port, kind.v1_only)
                _wait_ready(server.origin, proc, deadline)
            except RuntimeError as exc:
                _stop(proc)
                output = log.read_text(errors="replace")[-3000:]
                pytest.fail(f"a2a-sdk {env.version} server did not start: {exc}\n{output}")
            yield server
        finally:
            _stop(proc)
