"""Running the command line as users run it: ``python -m magisterium_async`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TIMEOUT", "Run", "clean_env", "cli", "jsonl"]

TIMEOUT = 60


@dataclass
class Run:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAGISTERIUM_")}
    env.update(COLUMNS="200", PYTHONIOENCODING="utf-8", **extra)
    return env


def cli(
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(**(env or {})),
        cwd=cwd,
        timeout=TIMEOUT,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]
