"""Helpers for the emulator's tests: a thin JSON-RPC caller.

Time is set by hand with the ``clock`` fixture (a :class:`tests.conftest.JumpClock`).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from magisterium_async.testing import Emulator

_ids = itertools.count(1)

DEFAULT = object()


def text(value: str) -> dict[str, Any]:
    """A text part."""
    return {"kind": "text", "text": value}


def data(value: dict[str, Any]) -> dict[str, Any]:
    """A data part."""
    return {"kind": "data", "data": value}


def message(
    *parts: dict[str, Any],
    skill: str | None = None,
    context_id: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A user message with the given parts, asking for ``skill``."""
    msg: dict[str, Any] = {
        "role": "user",
        "kind": "message",
        "messageId": f"m-{next(_ids)}",
        "parts": list(parts),
    }
    if skill is not None:
        msg["metadata"] = {"skillId": skill}
    if context_id is not None:
        msg["contextId"] = context_id
    msg.update(fields)
    return msg


@dataclass
class Answer:
    """One HTTP answer: status, headers, decoded JSON body (``None`` if not JSON)."""

    status: int
    headers: dict[str, str]
    raw: bytes
    body: Any = field(default=None)

    @property
    def result(self) -> Any:
        assert "error" not in self.body, self.body
        return self.body["result"]

    @property
    def error(self) -> Any:
        assert "error" in self.body, self.body
        return self.body["error"]

    def artifact_parts(self) -> list[dict[str, Any]]:
        """The parts of the task's only artifact."""
        artifacts = self.result["artifacts"]
        assert len(artifacts) == 1, artifacts
        parts: list[dict[str, Any]] = artifacts[0]["parts"]
        return parts


@dataclass
class Wire:
    """Talks JSON-RPC to one emulator over real loopback HTTP."""

    session: aiohttp.ClientSession
    emu: Emulator

    async def post(
        self, body: bytes, *, token: Any = DEFAULT, headers: dict[str, str] | None = None
    ) -> Answer:
        sent = {"Content-Type": "application/json", **(headers or {})}
        token = self.emu.token if token is DEFAULT else token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        async with self.session.post(self.emu.base_url, data=body, headers=sent) as response:
            raw = await response.read()
            answer = Answer(response.status, dict(response.headers), raw)
        try:
            answer.body = json.loads(raw)
        except ValueError:
            answer.body = None
        return answer

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        request_id: Any = 1,
        token: Any = DEFAULT,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        return await self.post(json.dumps(request).encode(), token=token, headers=headers)

    async def send(
        self, skill: str | None, *parts: dict[str, Any], token: Any = DEFAULT, **fields: Any
    ) -> Answer:
        return await self.call(
            "message/send", {"message": message(*parts, skill=skill, **fields)}, token=token
        )
