"""Drive an A2A server with the official a2a-sdk 1.x client and report, as JSON, how the
client took every answer. Run with the .venv-interop13 python.

The client is made as a 1.x user makes it: the card read by ``A2ACardResolver`` (at the
plan's ``card_path``: the resolver's default, ``/.well-known/agent-card.json``, is A2A 0.3's
and 1.0's, not the service's ``agent.json``), then
``ClientFactory(ClientConfig(...)).create(card)``, which picks its JSON-RPC transport from
the card: A2A 1.0's for a 1.0 interface, its v0.3 compat transport for a 0.3 one, and none
for anything older ("no compatible transports").

stdin: as ``a2a03_client.py``'s (``origin``, ``card_path``, ``token``, ``steps``; a send
step's message in A2A 0.3's shape, turned into a 1.0 ``Message`` here).

stdout: ``{"card": <outcome>, "client": <outcome>, "steps": {label: <outcome>}}``, an
outcome being ``{"kind": "card", "card": {...}}`` (the card as 1.0 JSON, whatever its
shape on the wire), ``{"kind": "client", "transport": <class name>}``,
``{"kind": "task", "task": {...}}`` (the client's protobuf ``Task`` as 1.0 JSON),
``{"kind": "jsonrpc_error", "code", "message", "data", "error_type"}`` (the A2A error the
client raised for a JSON-RPC error: the code is its class's, ``data`` the ErrorInfo
metadata it kept), ``{"kind": "client_error", "detail"}`` (``A2AClientError``: an HTTP
error status, a body it could not read) or ``{"kind": "exception", "type", "detail"}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf.json_format import MessageToDict, ParseDict


def _part(part: dict[str, Any]) -> Part:
    if part["kind"] == "text":
        return Part(text=part["text"])
    out = Part()
    ParseDict({"data": part["data"]}, out)
    return out


def _message(sent: dict[str, Any]) -> Message:
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT if sent["role"] == "agent" else Role.ROLE_USER,
        parts=[_part(part) for part in sent["parts"]],
    )
    if "metadata" in sent:
        message.metadata.update(sent["metadata"])
    return message


def _error_outcome(error: Exception) -> dict[str, Any]:
    if isinstance(error, A2AClientError):
        return {"kind": "client_error", "detail": str(error)}
    if isinstance(error, A2AError):
        return {
            "kind": "jsonrpc_error",
            "code": JSON_RPC_ERROR_CODE_MAP.get(type(error)),
            "message": error.message,
            "data": error.data,
            "error_type": type(error).__name__,
        }
    return {"kind": "exception", "type": type(error).__name__, "detail": str(error)}


async def _run_step(client: Any, step: dict[str, Any], task_id: str | None) -> dict[str, Any]:
    call = step["call"]
    try:
        if call == "send":
            request = SendMessageRequest(message=_message(step["message"]))
            (first, *_) = [event async for event in client.send_message(request)]
            if first.HasField("message"):
                return {"kind": "message", "message": MessageToDict(first.message)}
            task = first.task
        elif call == "get":
            task = await client.get_task(GetTaskRequest(id=task_id))
        else:
            task = await client.cancel_task(CancelTaskRequest(id=task_id))
    except Exception as exc:  # report everything instead of dying
        return _error_outcome(exc)
    assert isinstance(task, Task)
    return {"kind": "task", "task": MessageToDict(task)}


async def main() -> None:
    plan = json.load(sys.stdin)
    headers = {"Authorization": f"Bearer {plan['token']}"}
    report: dict[str, Any] = {"steps": {}}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        try:
            resolver = A2ACardResolver(http, plan["origin"], agent_card_path=plan["card_path"])
            card = await resolver.get_agent_card()
        except Exception as exc:
            report["card"] = _error_outcome(exc)
            print(json.dumps(report))
            return
        report["card"] = {"kind": "card", "card": MessageToDict(card)}
        try:
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        except Exception as exc:
            report["client"] = _error_outcome(exc)
            print(json.dumps(report))
            return
        report["client"] = {"kind": "client", "transport": type(client._transport).__name__}
        tasks: dict[str, str] = {}
        for step in plan["steps"]:
            ref = step.get("id")
            task_id = tasks.get(ref["task_of"]) if isinstance(ref, dict) else ref
            outcome = await _run_step(client, step, task_id)
            if outcome["kind"] == "task":
                tasks[step["label"]] = outcome["task"]["id"]
            report["steps"][step["label"]] = outcome
        await client.close()
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
