"""Running the command line as users run it: ``python -m magisterium_async`` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["TIMEOUT", "LoginRun", "Run", "clean_env", "cli", "jsonl"]

TIMEOUT = 60


@dataclass
class Run:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MAGISTERIUM_") and not k.lower().endswith("_proxy")
    }
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


class LoginRun:
    """``magisterium-async login`` in a subprocess, read line by line as a person would."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.err: list[str] = []

    @classmethod
    async def start(
        cls, base_url: str, path: Path | None, *extra: str, env: dict[str, str] | None = None
    ) -> LoginRun:
        """``login`` to ``path`` (``None``: the default place, as ``env`` makes it)."""
        where = [] if path is None else ["--credentials", str(path)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "magisterium_async",
            "login",
            "--base-url",
            base_url,
            *where,
            "--no-browser",
            *extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=clean_env(**(env or {})),
        )
        return cls(proc)

    async def url(self) -> str:
        """The authorization URL: the stderr line that is a URL and nothing else."""
        assert self.proc.stderr is not None
        while line := await asyncio.wait_for(self.proc.stderr.readline(), TIMEOUT):
            text = line.decode()
            self.err.append(text)
            if text.startswith("http"):
                assert text.strip() == text.rstrip("\n") and " " not in text.strip()
                return text.strip()
        pytest.fail(f"login printed no URL: {self.err}")

    async def finish(self, stdin: bytes = b"") -> Run:
        out, err = await asyncio.wait_for(self.proc.communicate(stdin), TIMEOUT)
        assert self.proc.returncode is not None
        return Run(self.proc.returncode, out.decode(), "".join(self.err) + err.decode())
