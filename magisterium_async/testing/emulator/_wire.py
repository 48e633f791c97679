"""The wire shapes the emulator answers with: A2A structs and JSON-RPC envelopes."""

from __future__ import annotations

import datetime
import random
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "Artifact",
    "DataPart",
    "FilePart",
    "Message",
    "Part",
    "Task",
    "TaskStatus",
    "TextPart",
    "decode",
    "encode",
    "error_body",
    "new_id",
    "result_body",
    "timestamp",
]


class TextPart(msgspec.Struct, tag_field="kind", tag="text", omit_defaults=True):
    """``{"kind": "text", "text": ...}``."""

    text: str
    metadata: dict[str, Any] | UnsetType = UNSET


class DataPart(msgspec.Struct, tag_field="kind", tag="data", omit_defaults=True):
    """``{"kind": "data", "data": {...}}``."""

    data: dict[str, Any]
    metadata: dict[str, Any] | UnsetType = UNSET


class FilePart(msgspec.Struct, tag_field="kind", tag="file", omit_defaults=True):
    """``{"kind": "file", "file": {"name", "mimeType", "bytes" | "uri"}}``, kept as sent."""

    file: dict[str, Any]
    metadata: dict[str, Any] | UnsetType = UNSET


Part = TextPart | DataPart | FilePart


class Message(msgspec.Struct, tag_field="kind", tag="message", rename="camel", omit_defaults=True):
    """One user or agent message."""

    role: str
    message_id: str
    parts: list[Part]
    context_id: str | UnsetType = UNSET
    task_id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class TaskStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    """A task's ``state``, when it got there, and the agent's reason when ``failed``."""

    state: str
    timestamp: str
    message: Message | UnsetType = UNSET


class Artifact(msgspec.Struct, rename="camel"):
    """A skill's output."""

    artifact_id: str
    name: str
    parts: list[Part]


class Task(msgspec.Struct, tag_field="kind", tag="task", rename="camel"):
    """The finished task ``message/send`` returns and ``tasks/get`` finds."""

    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact]
    history: list[Message]


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

encode = _encoder.encode
decode = _decoder.decode


_random = random.Random()


def new_id() -> str:
    """A fresh random id for a task, context, message or artifact, shaped as a UUID 4."""
    # Faster than uuid.uuid4(), which reads os.urandom for every id.
    digits = f"{_random.getrandbits(128):032x}"
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{digits[16:20]}-{digits[20:]}"


def timestamp() -> str:
    """Now, in UTC, as ISO 8601 with milliseconds and a ``Z``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def result_body(request_id: Any, result: bytes) -> bytes:
    """A JSON-RPC success envelope around an already encoded ``result``."""
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "result": msgspec.Raw(result)})


def error_body(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error envelope; ``data`` is left out when ``None``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "error": error})
