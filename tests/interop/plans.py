"""The plans the interop clients run: their steps, and the subprocess that runs one.

A plan is JSON on the client's stdin (``origin``, ``token``, ``steps``); its report is JSON
on its stdout. Steps name a call (``send``, ``get``, ``cancel``) and a label the report is
keyed by; an id given as ``{"task_of": label}`` is the task an earlier step created.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["CLIENT_TIMEOUT", "cancel", "data", "get", "run_plan", "text"]

CLIENT_TIMEOUT = 120.0


def text(value: str) -> dict[str, Any]:
    """A text part."""
    return {"kind": "text", "text": value}


def data(value: dict[str, Any]) -> dict[str, Any]:
    """A data part."""
    return {"kind": "data", "data": value}


def get(label: str, task_id: str | dict[str, str]) -> dict[str, Any]:
    """A ``tasks/get`` step."""
    return {"label": label, "call": "get", "id": task_id}


def cancel(label: str, task_id: str | dict[str, str]) -> dict[str, Any]:
    """A ``tasks/cancel`` step."""
    return {"label": label, "call": "cancel", "id": task_id}


async def run_plan(argv: list[str], cwd: Path, plan: dict[str, Any]) -> Any:
    """Run the client ``argv`` on ``plan``; its report. Fails the test if it fails."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(json.dumps(plan).encode()), CLIENT_TIMEOUT
        )
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return json.loads(out)
