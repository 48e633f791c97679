"""JSON-RPC request parsing and strict validation, with the service's error codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from magisterium_async.testing.emulator._wire import DataPart, FilePart, Part, TextPart, decode

__all__ = [
    "EXTENDED_CARD_NOT_CONFIGURED",
    "HTTP_STATUS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PLAN_REQUIRED",
    "RATE_LIMITED",
    "SERVICE_METHODS",
    "SKILL_NOT_FOUND",
    "TASK_NOT_FOUND",
    "UNAUTHORIZED",
    "VERSION_NOT_SUPPORTED",
    "Call",
    "RPCError",
    "SendRequest",
    "optional_str",
    "parse_call",
    "skill_of",
    "validate_send",
    "validate_task_id",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
SKILL_NOT_FOUND = -32002
RATE_LIMITED = -32003
UNAUTHORIZED = -32004
PLAN_REQUIRED = -32005
EXTENDED_CARD_NOT_CONFIGURED = -32007
VERSION_NOT_SUPPORTED = -32009

HTTP_STATUS = {UNAUTHORIZED: 401, PLAN_REQUIRED: 403, RATE_LIMITED: 429}

_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    TASK_NOT_FOUND: "Task not found",
    SKILL_NOT_FOUND: "Skill not found",
    RATE_LIMITED: "Rate limit exceeded",
    UNAUTHORIZED: "Unauthorized",
    PLAN_REQUIRED: "Paid plan required",
    EXTENDED_CARD_NOT_CONFIGURED: "Extended agent card is not configured",
    VERSION_NOT_SUPPORTED: "Version not supported",
}

DEFAULT_SKILL = "catholic_qa"

SERVICE_METHODS = {name: name for name in ("message/send", "tasks/get", "tasks/cancel")}
"""The service's methods, each counted by its own name."""


class RPCError(Exception):
    """A JSON-RPC error to answer with: ``code``, ``message``, optional ``data``."""

    def __init__(self, code: int, message: str | None = None, data: Any = None) -> None:
        self.code = code
        self.message = message or _MESSAGES.get(code, "Error")
        self.data = data
        super().__init__(self.message)

    @property
    def status(self) -> int:
        """The HTTP status the service pairs with this code."""
        return HTTP_STATUS.get(self.code, 200)


def _invalid(detail: str) -> RPCError:
    return RPCError(INVALID_PARAMS, data={"detail": detail})


@dataclass(slots=True)
class Call:
    """One request body as far as it could be read.

    ``method`` is the name the request gave; ``operation`` the service's name for it
    (``message/send`` for A2A 1.0's ``SendMessage``), ``None`` when the dialect spoken has
    no such method. ``skill`` is the skill a send asks for (the default when none is
    named), read leniently so faults and counters can be keyed on it before validation.
    ``version`` is the request's ``A2A-Version`` header.
    """

    id: Any = None
    method: str | None = None
    operation: str | None = None
    params: Any = None
    skill: str | None = None
    error: RPCError | None = None
    version: str | None = None

    @property
    def counted_as(self) -> str | None:
        """The method name counters, arrivals and faults know it by."""
        return self.operation or self.method


def _peek_skill(params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    message = params.get("message")
    if not isinstance(message, dict):
        return None
    metadata = message.get("metadata")
    if metadata is None:
        return DEFAULT_SKILL
    if not isinstance(metadata, dict):
        return None
    skill = metadata.get("skillId", DEFAULT_SKILL)
    return skill if isinstance(skill, str) else None


def parse_call(body: bytes, methods: dict[str, str] = SERVICE_METHODS) -> Call:
    """Read a request body; a parse or envelope error lands in :attr:`Call.error`.

    ``methods`` maps the method names of the dialect spoken to the service's."""
    try:
        obj = decode(body)
    except msgspec.DecodeError:
        return Call(error=RPCError(PARSE_ERROR))
    if not isinstance(obj, dict):
        return Call(error=RPCError(INVALID_REQUEST, data={"detail": "expected a JSON object"}))
    call = Call()
    request_id = obj.get("id")
    if isinstance(request_id, (str, int, float)) and not isinstance(request_id, bool):
        call.id = request_id
    method = obj.get("method")
    if isinstance(method, str):
        call.method = method
        call.operation = methods.get(method)
    call.params = obj.get("params")
    if call.operation == "message/send":
        call.skill = _peek_skill(call.params)
    if obj.get("jsonrpc") != "2.0":
        call.error = RPCError(INVALID_REQUEST, data={"detail": 'jsonrpc must be "2.0"'})
    elif "id" not in obj:
        call.error = RPCError(INVALID_REQUEST, data={"detail": "id is required"})
    elif call.id is None and request_id is not None:
        call.error = RPCError(INVALID_REQUEST, data={"detail": "id must be a string or number"})
    elif call.method is None:
        call.error = RPCError(INVALID_REQUEST, data={"detail": "method must be a string"})
    return call


@dataclass(slots=True)
class SendRequest:
    """A validated ``message/send``."""

    message_id: str
    parts: list[Part]
    skill: str
    context_id: str | None
    metadata: dict[str, Any] | None


def _part(index: int, raw: Any) -> Part:
    where = f"message.parts[{index}]"
    if not isinstance(raw, dict):
        raise _invalid(f"{where} must be an object")
    kind = raw.get("kind")
    metadata = raw.get("metadata", msgspec.UNSET)
    if metadata is not msgspec.UNSET and not isinstance(metadata, dict):
        raise _invalid(f"{where}.metadata must be an object")
    if kind == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            raise _invalid(f"{where}.text must be a string")
        return TextPart(text, metadata)
    if kind == "data":
        data = raw.get("data")
        if not isinstance(data, dict):
            raise _invalid(f"{where}.data must be an object")
        return DataPart(data, metadata)
    if kind == "file":
        file = raw.get("file")
        if not isinstance(file, dict) or not (
            isinstance(file.get("bytes"), str) or isinstance(file.get("uri"), str)
        ):
            raise _invalid(f"{where}.file must be an object with bytes or uri")
        return FilePart(file, metadata)
    raise _invalid(f"{where}.kind must be text, data or file, got {kind!r}")


def optional_str(container: dict[str, Any], key: str, where: str) -> str | None:
    """``container[key]``: a string, or ``None`` when absent; -32602 for anything else."""
    value = container.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{where}.{key} must be a string")
    return value


def skill_of(metadata: dict[str, Any] | None) -> str:
    """The skill ``message.metadata`` names (the default when none); -32602 if not a string."""
    if metadata is None or "skillId" not in metadata:
        return DEFAULT_SKILL
    skill_id = metadata["skillId"]
    if not isinstance(skill_id, str):
        raise _invalid("message.metadata.skillId must be a string")
    return skill_id


def validate_send(params: Any) -> SendRequest:
    """Check ``message/send`` params field by field; raises -32602 naming the first fault."""
    if not isinstance(params, dict):
        raise _invalid("params must be an object")
    message = params.get("message")
    if not isinstance(message, dict):
        raise _invalid("params.message is required and must be an object")
    if message.get("role") != "user":
        raise _invalid('message.role must be "user"')
    if message.get("kind") != "message":
        raise _invalid('message.kind must be "message"')
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid("message.messageId must be a non-empty string")
    raw_parts = message.get("parts")
    if not isinstance(raw_parts, list) or not raw_parts:
        raise _invalid("message.parts must be a non-empty list")
    parts = [_part(index, raw) for index, raw in enumerate(raw_parts)]
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid("message.metadata must be an object")
    skill = skill_of(metadata)
    context_id = optional_str(message, "contextId", "message")
    configuration = params.get("configuration")
    if configuration is not None and not isinstance(configuration, dict):
        raise _invalid("params.configuration must be an object")
    return SendRequest(message_id, parts, skill, context_id or None, metadata)


def validate_task_id(params: Any) -> str:
    """The ``id`` of ``tasks/get`` / ``tasks/cancel`` params; raises -32602 when absent."""
    if not isinstance(params, dict):
        raise _invalid("params must be an object")
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _invalid("params.id must be a non-empty string")
    return task_id
