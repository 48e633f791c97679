"""The two JSON-RPC dialects of A2A the client speaks, as one table of differences.

The client's models are A2A 0.3's, the service's today. A2A 1.0 differs in its methods'
names, its headers, its parts, states and roles, and the shape of its results (the table
of ``docs/protocol-versions.md``); each difference is undone here, so that a :class:`Task`
reads the same whichever dialect carried it: a 1.0 result is rewritten into 0.3's JSON and
decoded by the same models, a message written as 0.3's JSON is rewritten into 1.0's (an
error's ``data``, a list of ``google.rpc`` details in 1.0, ``_errors`` reads in both
shapes). :func:`offered` reads which dialect an agent card offers (either card shape);
which one a client speaks is the call's (``_call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from magisterium_async._events import OnEvent, log_event, notice
from magisterium_async._http._base import check_base_url
from magisterium_async._models import (
    TASK_DECODER,
    AgentCard,
    AgentInterface,
    Message,
    Task,
    TaskPage,
)

_METHODS = {
    "message/send": "SendMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/list": "ListTasks",
}
_STATES = (
    "unknown",
    "submitted",
    "working",
    "completed",
    "failed",
    "canceled",
    "input-required",
    "rejected",
    "auth-required",
)
"""1.0's states by their protobuf number (``TASK_STATE_UNSPECIFIED`` is 0: ``"unknown"``)."""
_ROLES = ("unknown", "user", "agent")


@dataclass(frozen=True)
class Dialect:
    """One A2A JSON-RPC dialect, as spoken to one endpoint.

    - ``version``: ``"0.3"`` (also the service's 0.2.6: the same JSON-RPC) or ``"1.0"``;
    - ``url``: the endpoint the agent card named for it (``None``: the client's
      ``base_url``);
    - ``tenant``: the tenant the card's 1.0 interface names, sent in every request's
      params;
    - ``extensions``: URIs of A2A extensions asked for on every request.
    """

    version: Literal["0.3", "1.0"]
    url: str | None = None
    tenant: str | None = None
    extensions: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        headers: dict[str, str] = {}
        if self.version == "1.0":
            headers["A2A-Version"] = "1.0"
        if self.extensions:
            name = "A2A-Extensions" if self.version == "1.0" else "X-A2A-Extensions"
            headers[name] = ", ".join(self.extensions)
        object.__setattr__(self, "headers", headers)

    def method(self, operation: str) -> str:
        """The dialect's name of ``operation`` (named by its 0.3 method)."""
        return operation if self.version == "0.3" else _METHODS.get(operation, operation)

    def params(self, params: Any) -> Any:
        """``params`` as the dialect sends them: as built for 0.3, rewritten for 1.0."""
        if self.version == "0.3":
            return params
        message = getattr(params, "message", None)
        out = {"message": _message_out(message)} if message is not None else dict(params)
        if self.tenant:
            out["tenant"] = self.tenant
        return out

    def decode(self, operation: str, raw: bytes) -> Task | TaskPage:
        """The result of ``operation``: a Task, or 1.0's ``ListTasks`` page; msgspec's
        errors, or ``ValueError`` saying why, when it is not one."""
        if self.version == "0.3":
            return TASK_DECODER.decode(raw)
        found = msgspec.json.decode(raw)  # its depth was bounded with the envelope's
        if operation == "tasks/list":
            tasks = found.get("tasks", []) if isinstance(found, dict) else None
            if not isinstance(tasks, list):
                raise ValueError("the result is not a ListTasks page")
            page = {
                "tasks": [_task(task, f"tasks[{i}]") for i, task in enumerate(tasks)],
                "next_page_token": found.get("nextPageToken") or None,
                "page_size": found.get("pageSize"),
                "total_size": found.get("totalSize"),
            }
            return msgspec.convert(page, TaskPage)
        if operation == "message/send":
            if isinstance(found, dict) and "message" in found and "task" not in found:
                raise ValueError("the agent answered with a message, not a task")
            if not isinstance(found, dict) or "task" not in found:
                raise ValueError('the result is not a SendMessage result ({"task": ...})')
            found = found["task"]
        return _task(found, "task")


V03 = Dialect("0.3")
V10 = Dialect("1.0")


# 1.0 to 0.3 (a shape that is neither is left for the models to refuse) ---------------------


def _enum(value: Any, prefix: str, names: tuple[str, ...]) -> Any:
    """``"TASK_STATE_INPUT_REQUIRED"`` (or its number, 6) as 0.3's ``"input-required"``;
    a value not 1.0's is kept as sent, as 0.3 keeps states it does not know."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else "unknown"
    if isinstance(value, str) and value.startswith(prefix):
        name = value[len(prefix) :].lower().replace("_", "-")
        return "unknown" if name == "unspecified" else name
    return value


def _part(part: Any, where: str) -> Any:
    if not isinstance(part, dict):
        return part
    present = [name for name in ("text", "raw", "url", "data") if name in part]
    if len(present) != 1:
        raise ValueError(f"{where} has {len(present)} of text, raw, url and data, not one")
    name = present[0]
    if name in ("text", "data"):
        return {"kind": name, name: part[name], "metadata": part.get("metadata")}
    file = {"name": part.get("filename"), "mimeType": part.get("mediaType")}
    file["bytes" if name == "raw" else "uri"] = part[name]
    return {"kind": "file", "file": file, "metadata": part.get("metadata")}


def _with_parts(holder: Any, where: str, **defaults: Any) -> Any:
    """A message or an artifact with its parts as 0.3 writes them."""
    if not isinstance(holder, dict):
        return holder
    parts = holder.get("parts", [])
    if isinstance(parts, list):
        parts = [_part(part, f"{where}.parts[{i}]") for i, part in enumerate(parts)]
    return {**defaults, **holder, "parts": parts}


def _message(message: Any, where: str) -> Any:
    if isinstance(message, dict):
        role = _enum(message.get("role", 0), "ROLE_", _ROLES)
        message = {**message, "kind": "message", "role": role}
    return _with_parts(message, where, messageId="")


def _task(task: Any, where: str) -> Task:
    """A 1.0 task as a :class:`Task`, or ``ValueError`` saying why it is none."""
    if isinstance(task, dict):
        status = task.get("status", {})
        if isinstance(status, dict):
            state = _enum(status.get("state", 0), "TASK_STATE_", _STATES)
            said = _message(status.get("message"), f"{where}.status.message")
            status = {**status, "state": state, "message": said}
        artifacts, history = task.get("artifacts", []), task.get("history", [])
        task = {"contextId": "", **task, "kind": "task", "status": status}
        if isinstance(artifacts, list):
            task["artifacts"] = [
                _with_parts(a, f"{where}.artifacts[{i}]", artifactId="")
                for i, a in enumerate(artifacts)
            ]
        if isinstance(history, list):
            task["history"] = [_message(m, f"{where}.history[{i}]") for i, m in enumerate(history)]
    try:
        return msgspec.convert(task, Task)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{where} is not an A2A 1.0 Task: {exc}") from None


def _message_out(message: Message) -> dict[str, Any]:
    """``message`` as 1.0 writes it: 0.3's JSON, its parts by field, its role ``ROLE_*``."""
    out: dict[str, Any] = msgspec.to_builtins(message)
    del out["kind"]
    out["role"] = "ROLE_" + message.role.upper()
    for part in out["parts"]:
        del part["kind"]
        file = part.pop("file", None)
        if file is not None:
            part["raw" if "bytes" in file else "url"] = file.get("bytes", file.get("uri"))
            for old, new in (("name", "filename"), ("mimeType", "mediaType")):
                if old in file:
                    part[new] = file[old]
    return out


# Which dialect a card offers --------------------------------------------------------------


def _major(version: str | None) -> int | None:
    head = (version or "").strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _is_jsonrpc(interface: AgentInterface) -> bool:
    binding = interface.protocol_binding or interface.transport or ""
    return binding.upper() == "JSONRPC"


def _endpoint(url: str | None, base_url: str, emit: OnEvent) -> str | None:
    """The card's endpoint if the client may send the token there (the base URL's origin,
    over https or to loopback), else ``None`` (keep the base URL)."""
    if not url or url.rstrip("/") == base_url.rstrip("/"):
        return None
    try:
        url = check_base_url(url)
    except (TypeError, ValueError) as exc:
        emit(notice("warning", "transport", f"agent card: endpoint {url} not used: {exc}"))
        return None
    a, b = urlsplit(url), urlsplit(base_url)
    if (a.scheme, a.hostname, a.port) != (b.scheme, b.hostname, b.port):
        # The card is public and unauthenticated: never let it send the token elsewhere.
        said = f"agent card: endpoint {url} is on another origin than {base_url}; not used"
        emit(notice("warning", "transport", said))
        return None
    return url


def offered(card: AgentCard, base_url: str, emit: OnEvent = log_event) -> Dialect:
    """The dialect ``card`` offers: A2A 1.0 where it names a 1.0 JSON-RPC interface
    (``supportedInterfaces``; or a top-level ``protocolVersion`` of 1.x), with that
    interface's URL when it is on ``base_url``'s origin (an endpoint not used is told to
    ``emit``); else 0.3 (the 0.2.6 and 0.3 cards, and any card that says nothing)."""
    ones = [
        i for i in card.supported_interfaces if _is_jsonrpc(i) and _major(i.protocol_version) == 1
    ]
    ones.sort(key=lambda i: (i.protocol_version or "").strip() not in ("1.0", "1.0.0"))
    if ones:
        chosen = ones[0]
        return Dialect("1.0", _endpoint(chosen.url, base_url, emit), chosen.tenant or None)
    if not card.supported_interfaces and _major(card.protocol_version) == 1:
        return Dialect("1.0", _endpoint(card.url, base_url, emit))
    return V03
