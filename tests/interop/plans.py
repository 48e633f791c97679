"""The plans the interop clients run: their steps, and the subprocess that runs one.

A plan is JSON on the client's stdin (``origin``, ``card_path``, ``token``, ``steps``); its
report is JSON on its stdout. ``card_path`` is where the server serves its agent card
(:func:`plan_of`): A2A 0.2.6's ``/.well-known/agent.json`` for the service's own dialect,
which a peer of 0.3 or 1.x, whose default is ``agent-card.json``, must be told, as its user
pointing it at the service must. Steps name a call (``send``, ``get``, ``cancel``) and a
label the report is keyed by; an id given as ``{"task_of": label}`` is the task an earlier
step created.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from magisterium_async.testing import CorpusDocument, Emulator

__all__ = [
    "CLIENT_TIMEOUT",
    "MISSING_TASK",
    "cancel",
    "data",
    "every_skill_and_task_method",
    "get",
    "plan_of",
    "run_plan",
    "text",
]

CLIENT_TIMEOUT = 120.0
MISSING_TASK = "00000000-0000-0000-0000-000000000000"


def plan_of(emulator: Emulator, steps: list[dict[str, Any]], token: str | None = None) -> Any:
    """The plan of ``steps`` against ``emulator``: its origin, where it serves its card, and
    ``token`` (else its own)."""
    card_path = urlsplit(emulator.card_url).path
    token = token or emulator.token
    return {"origin": emulator.origin, "card_path": card_path, "token": token, "steps": steps}


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


def every_skill_and_task_method(
    send: Callable[..., dict[str, Any]], document: CorpusDocument
) -> list[dict[str, Any]]:
    """Each of the contract's skills once (and each "not found"), a failed task, then
    ``tasks/get`` and ``tasks/cancel`` on tasks known and unknown, and an unknown skill.

    ``send(label, skill, *parts)`` is the client's own ``message/send`` step.
    """
    return [
        send("qa", None, text("What is the Eucharist?")),
        send("qa_named", "catholic_qa", text("What is grace?")),
        send("search", "document_search", text("human work")),
        send("fetch", "document_fetch", data({"id": document.id})),
        send("fetch_text", "document_fetch", text(document.id)),
        send("fetch_missing", "document_fetch", data({"id": "99999999"})),
        send("readings", "liturgical_readings", text("Easter Sunday 2026")),
        send("saints", "saints_of_the_day", data({"date": "2026-03-19"})),
        send("failed", "document_search", text("__fail__: the skill raised")),
        get("get_search", {"task_of": "search"}),
        get("get_failed", {"task_of": "failed"}),
        cancel("cancel_search", {"task_of": "search"}),
        get("get_unknown", MISSING_TASK),
        cancel("cancel_unknown", MISSING_TASK),
        send("unknown_skill", "no_such_skill", text("hello")),
    ]


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
