"""A2A 1.0's JSON-RPC shapes, and their translation to and from the client's models.

The client's models (:mod:`.._models`) are A2A 0.3's: ``kind``-tagged parts, ``"completed"``
states, ``"user"`` roles. Here the 1.0 wire is read into them and written from them, so a
:class:`Task` reads the same whichever dialect carried it:

- a part is the one field present: ``text``, ``data``, ``raw`` (base64 bytes) or ``url``,
  with ``mediaType`` and ``filename`` (a file part's ``mime_type`` and ``name``);
- states are ``TASK_STATE_COMPLETED`` and the like (or their protobuf numbers), roles
  ``ROLE_USER`` and ``ROLE_AGENT``;
- ``SendMessage`` answers ``{"task": ...}`` or ``{"message": ...}``; ``ListTasks`` a page.

Pure functions and wire structs: no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec

from magisterium_async._models import (
    Artifact,
    DataPart,
    FileContent,
    FilePart,
    Message,
    Part,
    Task,
    TaskPage,
    TaskStatus,
    TextPart,
)

__all__ = [
    "ResultError",
    "decode_page",
    "decode_send",
    "decode_task",
    "message_json",
    "role_of",
    "state_of",
]

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
"""The states by their protobuf number (``TASK_STATE_UNSPECIFIED`` is 0: ``"unknown"``)."""
_ROLES = ("unknown", "user", "agent")


class ResultError(ValueError):
    """A 1.0 result that cannot be read as what it must be; the text says why."""


class _Part(msgspec.Struct, rename="camel"):
    text: str | msgspec.UnsetType = msgspec.UNSET
    raw: str | msgspec.UnsetType = msgspec.UNSET
    url: str | msgspec.UnsetType = msgspec.UNSET
    data: Any = msgspec.UNSET
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None


class _Message(msgspec.Struct, rename="camel"):
    message_id: str = ""
    role: str | int = 0
    parts: list[_Part] = msgspec.field(default_factory=list)
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None


class _Status(msgspec.Struct, rename="camel"):
    state: str | int = 0
    message: _Message | None = None
    timestamp: str | None = None


class _Artifact(msgspec.Struct, rename="camel"):
    artifact_id: str = ""
    parts: list[_Part] = msgspec.field(default_factory=list)
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class _Task(msgspec.Struct, rename="camel"):
    id: str
    context_id: str = ""
    status: _Status = msgspec.field(default_factory=_Status)
    artifacts: list[_Artifact] = msgspec.field(default_factory=list)
    history: list[_Message] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] | None = None


class _SendResult(msgspec.Struct):
    task: _Task | None = None
    message: _Message | None = None


class _Page(msgspec.Struct, rename="camel"):
    tasks: list[_Task] = msgspec.field(default_factory=list)
    next_page_token: str | None = None
    page_size: int | None = None
    total_size: int | None = None


_TASK = msgspec.json.Decoder(_Task)
_SEND = msgspec.json.Decoder(_SendResult)
_PAGE = msgspec.json.Decoder(_Page)


def _enum(value: str | int, prefix: str, names: tuple[str, ...]) -> str:
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else "unknown"
    if value.startswith(prefix):
        name = value[len(prefix) :].lower().replace("_", "-")
        return "unknown" if name == "unspecified" else name
    return value  # not 1.0's: kept as sent, as the 0.3 dialect keeps states it does not know


def state_of(value: str | int) -> str:
    """``"TASK_STATE_INPUT_REQUIRED"`` (or its number, 6) → ``"input-required"``."""
    return _enum(value, "TASK_STATE_", _STATES)


def role_of(value: str | int) -> str:
    """``"ROLE_USER"`` (or 1) → ``"user"``."""
    return _enum(value, "ROLE_", _ROLES)


# In ------------------------------------------------------------------------------------


def _part(part: _Part, where: str) -> Part:
    present = [
        name for name in ("text", "raw", "url", "data") if getattr(part, name) is not msgspec.UNSET
    ]
    if len(present) != 1:
        raise ResultError(f"{where} has {len(present)} of text, raw, url and data, not one")
    if isinstance(part.text, str):
        return TextPart(text=part.text, metadata=part.metadata)
    if part.data is not msgspec.UNSET:
        if not isinstance(part.data, dict):
            kind = type(part.data).__name__
            raise ResultError(f"{where}.data is a JSON {kind}, not an object")
        return DataPart(data=part.data, metadata=part.metadata)
    file = FileContent(name=part.filename, mime_type=part.media_type)
    if isinstance(part.raw, str):
        file.bytes = part.raw
    else:
        assert isinstance(part.url, str)
        file.uri = part.url
    return FilePart(file=file, metadata=part.metadata)


def _message(message: _Message, where: str) -> Message:
    return Message(
        role=role_of(message.role),
        parts=[_part(p, f"{where}.parts[{i}]") for i, p in enumerate(message.parts)],
        message_id=message.message_id,
        context_id=message.context_id or None,
        task_id=message.task_id or None,
        metadata=message.metadata,
    )


def _task(task: _Task, where: str = "task") -> Task:
    status = task.status
    message = status.message

    def parts(artifact: _Artifact, i: int) -> list[Part]:
        return [
            _part(p, f"{where}.artifacts[{i}].parts[{j}]") for j, p in enumerate(artifact.parts)
        ]

    return Task(
        id=task.id,
        context_id=task.context_id,
        status=TaskStatus(
            state=state_of(status.state),
            message=_message(message, f"{where}.status.message") if message else None,
            timestamp=status.timestamp,
        ),
        artifacts=[
            Artifact(
                artifact_id=a.artifact_id,
                parts=[
                    _part(p, f"{where}.artifacts[{i}].parts[{j}]") for j, p in enumerate(a.parts)
                ],
                name=a.name,
                description=a.description,
                metadata=a.metadata,
            )
            for i, a in enumerate(task.artifacts)
        ],
        history=[_message(m, f"{where}.history[{i}]") for i, m in enumerate(task.history)],
        metadata=task.metadata,
    )


def _decoded(decoder: msgspec.json.Decoder[Any], raw: bytes, what: str) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ResultError(f"the result is not {what}: {exc}") from None


def decode_task(raw: bytes) -> Task:
    """A ``GetTask`` or ``CancelTask`` result."""
    found: _Task = _decoded(_TASK, raw, "an A2A 1.0 Task")
    return _task(found)


def decode_send(raw: bytes) -> Task:
    """A ``SendMessage`` result: the task of ``{"task": ...}``. An agent that answers with
    a bare ``{"message": ...}`` made no task, which no call of this client can return."""
    found: _SendResult = _decoded(_SEND, raw, 'a SendMessage result ({"task": ...})')
    if found.task is not None:
        return _task(found.task)
    if found.message is not None:
        raise ResultError("the agent answered with a message, not a task")
    raise ResultError('the result holds neither "task" nor "message"')


def decode_page(raw: bytes) -> TaskPage:
    """A ``ListTasks`` result."""
    found: _Page = _decoded(_PAGE, raw, "a ListTasks result")
    return TaskPage(
        tasks=[_task(t, f"tasks[{i}]") for i, t in enumerate(found.tasks)],
        next_page_token=found.next_page_token or None,
        page_size=found.page_size,
        total_size=found.total_size,
    )


# Out -----------------------------------------------------------------------------------


def _part_json(part: Part) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"text": part.text}
    elif isinstance(part, DataPart):
        out = {"data": part.data}
    else:
        file = part.file
        out = {"raw": file.bytes} if file.bytes is not None else {"url": file.uri}
        if file.name is not None:
            out["filename"] = file.name
        if file.mime_type is not None:
            out["mediaType"] = file.mime_type
    if part.metadata is not None:
        out["metadata"] = part.metadata
    return out


def message_json(message: Message) -> dict[str, Any]:
    """A message as A2A 1.0 JSON."""
    out: dict[str, Any] = {
        "messageId": message.message_id,
        "role": "ROLE_" + message.role.upper(),
        "parts": [_part_json(part) for part in message.parts],
    }
    if message.context_id is not None:
        out["contextId"] = message.context_id
    if message.task_id is not None:
        out["taskId"] = message.task_id
    if message.metadata is not None:
        out["metadata"] = message.metadata
    return out
