"""The competitors' environments: a2a-sdk 0.3 and 1.3 cannot share one, nor share ours.

Each runs under its own python, found in this order:

1. ``$MAGISTERIUM_BENCH_PY03`` / ``$MAGISTERIUM_BENCH_PY13``: a python executable that has
   the requirements below (used as given; a wrong one is reported, not replaced);
2. ``benchmarks/.venvs/a2a03`` / ``a2a13`` (built by an earlier full run);
3. ``.venv-interop03`` / ``.venv-interop13`` at the repository root (the interop tests');
4. unless ``--no-build`` or ``--quick``: ``benchmarks/.venvs/<key>`` is built (PyPI).

A competitor with no environment is reported "unavailable" with the reason, never guessed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["COMPETITORS", "Competitor", "Resolved", "resolve"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"


@dataclass(frozen=True)
class Competitor:
    """One a2a-sdk version and how to get an environment for it."""

    key: str
    version: str
    variable: str
    requirements: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"a2a-sdk {self.version}"

    @property
    def venv(self) -> Path:
        return VENVS / f"a2a{self.key}"

    @property
    def interop_venv(self) -> Path:
        return ROOT / f".venv-interop{self.key}"


COMPETITORS = {
    "03": Competitor("03", "0.3.26", "MAGISTERIUM_BENCH_PY03", ("a2a-sdk==0.3.26", "httpx>=0.27")),
    "13": Competitor("13", "1.3.0", "MAGISTERIUM_BENCH_PY13", ("a2a-sdk==1.3.0", "httpx>=0.27")),
}


@dataclass(frozen=True)
class Resolved:
    """A python for a competitor, or why there is none; ``origin`` says where it came from."""

    python: str | None
    origin: str

    @property
    def available(self) -> bool:
        return self.python is not None


def _python_in(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def installed_version(python: str | Path) -> str | None:
    """The a2a-sdk version ``python`` imports (with httpx), or ``None``."""
    probe = "import importlib.metadata as m, a2a, httpx; print(m.version('a2a-sdk'))"
    try:
        done = subprocess.run(
            [str(python), "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tempfile.gettempdir(),  # never import a2a/types.py as the stdlib's types
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _build(competitor: Competitor, log: list[str]) -> str | None:
    """Build ``benchmarks/.venvs/a2a<key>``; ``None`` on success, else the reason."""
    venv = competitor.venv
    started = time.monotonic()
    VENVS.mkdir(exist_ok=True)
    (VENVS / ".gitignore").write_text("# built by python -m benchmarks; never committed\n*\n")
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        pip = [str(_python_in(venv)), "-m", "pip", "install", "--quiet"]
        done = subprocess.run(
            [*pip, "--disable-pip-version-check", *competitor.requirements],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"building {venv} failed: {type(exc).__name__}: {exc}"
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        return f"pip install {' '.join(competitor.requirements)} failed: {tail[:300]}"
    log.append(f"built {venv.relative_to(ROOT)} in {time.monotonic() - started:.0f} s")
    return None


def resolve(competitor: Competitor, *, build: bool, log: list[str]) -> Resolved:
    """Find (or build, when ``build``) the python for ``competitor``."""
    given = os.environ.get(competitor.variable)
    if given:
        found = installed_version(given)
        if found != competitor.version:
            what = f"a2a-sdk {found}" if found else "no importable a2a-sdk/httpx"
            return Resolved(None, f"${competitor.variable}={given} has {what}")
        return Resolved(given, f"${competitor.variable}")
    for venv in (competitor.venv, competitor.interop_venv):
        python = _python_in(venv)
        if python.exists() and installed_version(python) == competitor.version:
            return Resolved(str(python), str(venv.relative_to(ROOT)))
    if not build:
        return Resolved(
            None,
            f"no {competitor.label} environment (set ${competitor.variable}, or run the full "
            "`python -m benchmarks` once to build benchmarks/.venvs/)",
        )
    reason = _build(competitor, log)
    python = _python_in(competitor.venv)
    if reason is None and installed_version(python) != competitor.version:
        reason = f"built {competitor.venv} but it does not import {competitor.label}"
    if reason is not None:
        return Resolved(None, reason)
    return Resolved(str(python), str(competitor.venv.relative_to(ROOT)) + " (built now)")
