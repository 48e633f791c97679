"""Drive an A2A server with the a2a-sdk 0.3 client and report, as JSON, how the client took
every answer. Run with the .venv-interop03 python.

stdin: ``{"origin": "http://127.0.0.1:<port>", "card_path": ..., "token": ..., "steps": [...]}``
(the card read at ``card_path``, where the server serves it); each step is
``{"label", "call": "send", "message": {...}}`` (an A2A 0.3 Message without ``messageId``)
or ``{"label", "call": "get" | "cancel", "id": "<task id>" | {"task_of": "<label>"}}``
or ``{"label", "call": "raw", "body": "<request body>"}`` (posted as is with httpx, the
answer parsed with pydantic's ``JSONRPCErrorResponse``: for requests the client cannot make).

stdout: ``{"card": <outcome>, "steps": {label: <outcome>}}``. An outcome is one of
``{"kind": "task", "task": {...}}`` (the client's pydantic ``Task``, dumped back to JSON),
``{"kind": "card", "card": {...}}``,
``{"kind": "jsonrpc_error", "code", "message", "data", "error_type"}`` (the client raised
``A2AClientJSONRPCError``: it parsed the error response),
``{"kind": "http_error", "status", "body": <outcome of validating the body>}`` (the client
raised ``A2AClientHTTPError`` without reading the body; the body is then parsed here with the
method's pydantic response model), ``{"kind": "validation_error", "detail"}`` (pydantic
refused the answer) or ``{"kind": "exception", "type", "detail"}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
import pydantic
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    AgentCard,
    CancelTaskResponse,
    GetTaskResponse,
    JSONRPCErrorResponse,
    Message,
    SendMessageResponse,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TransportProtocol,
)

RESPONSE_MODELS: dict[str, Any] = {
    "send": (SendMessageResponse, "message/send"),
    "get": (GetTaskResponse, "tasks/get"),
    "cancel": (CancelTaskResponse, "tasks/cancel"),
}


def _dump(model: pydantic.BaseModel) -> dict[str, Any]:
    """A pydantic model as the JSON it stands for (camelCase, unset fields left out)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _error_outcome(error: Any) -> dict[str, Any]:
    """An error object of a ``JSONRPCErrorResponse`` (a pydantic ``JSONRPCError`` or subclass)."""
    return {
        "kind": "jsonrpc_error",
        "code": error.code,
        "message": error.message,
        "data": error.data,
        "error_type": type(error).__name__,
    }


def _validate_body(call: str, body: bytes) -> dict[str, Any]:
    """Parse a raw answer with the pydantic response model of ``call``."""
    model = RESPONSE_MODELS[call][0]
    try:
        response = model.model_validate_json(body).root
    except pydantic.ValidationError as exc:
        return {"kind": "validation_error", "detail": str(exc)}
    if isinstance(response, JSONRPCErrorResponse):
        return _error_outcome(response.error)
    return {"kind": "task", "task": _dump(response.result)}


async def _raw_step(http: httpx.AsyncClient, url: str, body: str) -> dict[str, Any]:
    raw = await http.post(url, content=body, headers={"Content-Type": "application/json"})
    try:
        response = JSONRPCErrorResponse.model_validate_json(raw.content)
    except pydantic.ValidationError as exc:
        return {"kind": "validation_error", "detail": str(exc), "status": raw.status_code}
    return {**_error_outcome(response.error), "id": response.id, "status": raw.status_code}


async def _run_step(
    client: Any, http: httpx.AsyncClient, url: str, step: dict[str, Any], params: Any
) -> dict[str, Any]:
    call = step["call"]
    try:
        if call == "send":
            message = Message.model_validate(params)
            (first, *_) = [event async for event in client.send_message(message)]
            if isinstance(first, Message):
                return {"kind": "message", "message": _dump(first)}
            task, _update = first
        elif call == "get":
            task = await client.get_task(TaskQueryParams(id=params))
        else:
            task = await client.cancel_task(TaskIdParams(id=params))
    except A2AClientJSONRPCError as exc:
        return _error_outcome(exc.error)
    except A2AClientHTTPError as exc:
        # The client raised on the status before reading the body: post the same request
        # again and check that the body at least is a JSON-RPC error response.
        payload = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": RESPONSE_MODELS[call][1],
            "params": {"message": params} if call == "send" else {"id": params},
        }
        raw = await http.post(url, json=payload)
        return {
            "kind": "http_error",
            "status": exc.status_code,
            "raw_status": raw.status_code,
            "body": _validate_body(call, raw.content),
        }
    except pydantic.ValidationError as exc:
        return {"kind": "validation_error", "detail": str(exc)}
    except Exception as exc:  # report anything else instead of dying
        return {"kind": "exception", "type": type(exc).__name__, "detail": str(exc)}
    assert isinstance(task, Task)
    return {"kind": "task", "task": _dump(task)}


async def main() -> None:
    plan = json.load(sys.stdin)
    headers = {"Authorization": f"Bearer {plan['token']}"}
    report: dict[str, Any] = {"steps": {}}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        try:
            resolver = A2ACardResolver(http, plan["origin"], agent_card_path=plan["card_path"])
            card = await resolver.get_agent_card()
        except Exception as exc:
            report["card"] = {"kind": "exception", "type": type(exc).__name__, "detail": str(exc)}
            print(json.dumps(report))
            return
        assert isinstance(card, AgentCard)
        report["card"] = {"kind": "card", "card": _dump(card)}
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_transports=[TransportProtocol.jsonrpc]
        )
        client = ClientFactory(config).create(card)
        tasks: dict[str, str] = {}
        for step in plan["steps"]:
            if step["call"] == "raw":
                report["steps"][step["label"]] = await _raw_step(http, card.url, step["body"])
                continue
            if step["call"] == "send":
                params = {"messageId": str(uuid.uuid4()), **step["message"]}
            else:
                ref = step["id"]
                params = tasks[ref["task_of"]] if isinstance(ref, dict) else ref
            outcome = await _run_step(client, http, card.url, step, params)
            if outcome["kind"] == "task":
                tasks[step["label"]] = outcome["task"]["id"]
            report["steps"][step["label"]] = outcome
        await client.close()
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
