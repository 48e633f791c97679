"""A2A 1.0's JSON-RPC, as the emulator speaks it with ``protocol="1.0"``.

The service's pipeline (skills, tasks, quota) works on the A2A 0.3 structs of
:mod:`._wire`; this module is the edge: it reads 1.0 params into them and writes tasks,
list pages and errors out in 1.0's shapes (method names of the gRPC service, one part
whose kind is the field present, ``TASK_STATE_*`` and ``ROLE_*``, the ``{"task": ...}``
send result, and error ``data`` as an array of ``google.rpc.ErrorInfo``).

The service's own error codes are kept (-32002 "skill not found", -32003 rate limit,
-32004 unauthorized, -32005 paid plan required); each error's ``ErrorInfo.reason`` names
what the code means here, so a 1.0 client need not guess.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from dataclasses import dataclass
from typing import Any

import msgspec

from magisterium_async.testing.emulator._jsonrpc import (
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PLAN_REQUIRED,
    RATE_LIMITED,
    SKILL_NOT_FOUND,
    TASK_NOT_FOUND,
    UNAUTHORIZED,
    VERSION_NOT_SUPPORTED,
    RPCError,
    SendRequest,
    optional_str,
    skill_of,
)
from magisterium_async.testing.emulator._wire import (
    Artifact,
    DataPart,
    FilePart,
    Message,
    Part,
    Task,
    TextPart,
    encode,
)

__all__ = [
    "METHODS",
    "VERSION",
    "VERSION_HEADER",
    "ListRequest",
    "encode_task",
    "error_data",
    "from_state",
    "list_result",
    "send_result",
    "task_json",
    "to_state",
    "validate_get",
    "validate_list",
    "validate_send",
    "version_problem",
]

VERSION = "1.0"
VERSION_HEADER = "A2A-Version"

METHODS = {
    "SendMessage": "message/send",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "ListTasks": "tasks/list",
    "GetExtendedAgentCard": "agent/getExtendedAgentCard",
}
"""1.0's method names and the names the emulator counts them by (the service's, where it
has one). Streaming and push-notification methods are not offered: -32601."""

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
A2A_DOMAIN = "a2a-protocol.org"
SERVICE_DOMAIN = "magisterium.com"

_REASONS: dict[int, tuple[str, str]] = {
    PARSE_ERROR: ("PARSE_ERROR", A2A_DOMAIN),
    INVALID_REQUEST: ("INVALID_REQUEST", A2A_DOMAIN),
    METHOD_NOT_FOUND: ("METHOD_NOT_FOUND", A2A_DOMAIN),
    INVALID_PARAMS: ("INVALID_PARAMS", A2A_DOMAIN),
    INTERNAL_ERROR: ("INTERNAL_ERROR", A2A_DOMAIN),
    TASK_NOT_FOUND: ("TASK_NOT_FOUND", A2A_DOMAIN),
    EXTENDED_CARD_NOT_CONFIGURED: ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", A2A_DOMAIN),
    VERSION_NOT_SUPPORTED: ("VERSION_NOT_SUPPORTED", A2A_DOMAIN),
    # The service's own meanings of A2A's codes.
    SKILL_NOT_FOUND: ("SKILL_NOT_FOUND", SERVICE_DOMAIN),
    RATE_LIMITED: ("RATE_LIMIT_EXCEEDED", SERVICE_DOMAIN),
    UNAUTHORIZED: ("UNAUTHENTICATED", SERVICE_DOMAIN),
    PLAN_REQUIRED: ("PAID_PLAN_REQUIRED", SERVICE_DOMAIN),
}

_MAX_PAGE_SIZE = 100
_DEFAULT_PAGE_SIZE = 50


def _invalid(detail: str) -> RPCError:
    return RPCError(INVALID_PARAMS, data={"detail": detail})


def version_problem(header: str | None) -> str | None:
    """Why a request with this ``A2A-Version`` cannot be served (``None``: it can).

    A missing or empty header means 0.3 (A2A 1.0, "Versioning"), which this dialect does
    not serve; any 1.x is served, as the a2a-sdk servers do (the minor is additive).
    """
    version = (header or "").strip() or "0.3"
    major, _, _ = version.partition(".")
    return None if major == "1" else version


# Out: tasks, messages and parts in 1.0's shapes ---------------------------------------


def to_state(state: str) -> str:
    """``"input-required"`` → ``"TASK_STATE_INPUT_REQUIRED"``."""
    return "TASK_STATE_" + state.upper().replace("-", "_")


def from_state(state: str) -> str | None:
    """``"TASK_STATE_INPUT_REQUIRED"`` → ``"input-required"``; ``None`` for no state."""
    if not state.startswith("TASK_STATE_") or state == "TASK_STATE_UNSPECIFIED":
        return None
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _part(part: Part) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"text": part.text}
    elif isinstance(part, DataPart):
        out = {"data": part.data}
    else:
        file = part.file
        out = {"raw": file["bytes"]} if isinstance(file.get("bytes"), str) else {"url": file["uri"]}
        if isinstance(file.get("name"), str):
            out["filename"] = file["name"]
        if isinstance(file.get("mimeType"), str):
            out["mediaType"] = file["mimeType"]
    if part.metadata is not msgspec.UNSET:
        out["metadata"] = part.metadata
    return out


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"messageId": message.message_id}
    if message.context_id is not msgspec.UNSET:
        out["contextId"] = message.context_id
    if message.task_id is not msgspec.UNSET:
        out["taskId"] = message.task_id
    out["role"] = "ROLE_" + message.role.upper()
    out["parts"] = [_part(part) for part in message.parts]
    if message.metadata is not msgspec.UNSET:
        out["metadata"] = message.metadata
    return out


def _artifact(artifact: Artifact) -> dict[str, Any]:
    return {
        "artifactId": artifact.artifact_id,
        "name": artifact.name,
        "parts": [_part(part) for part in artifact.parts],
    }


def task_json(task: Task) -> dict[str, Any]:
    """The task as 1.0 JSON."""
    status: dict[str, Any] = {"state": to_state(task.status.state)}
    if task.status.message is not msgspec.UNSET:
        status["message"] = _message(task.status.message)
    status["timestamp"] = task.status.timestamp
    return {
        "id": task.id,
        "contextId": task.context_id,
        "status": status,
        "artifacts": [_artifact(artifact) for artifact in task.artifacts],
        "history": [_message(message) for message in task.history],
    }


def encode_task(task: Task) -> bytes:
    """The task as 1.0 JSON, encoded (what the task store keeps)."""
    return encode(task_json(task))


def trimmed(body: bytes, history_length: int | None, *, artifacts: bool = True) -> Any:
    """A stored task with only its last ``history_length`` messages (all when ``None``;
    none for 0), and without artifacts unless ``artifacts``."""
    task = msgspec.json.decode(body)
    if history_length is not None:
        history = task.get("history", [])
        task["history"] = history[len(history) - history_length :] if history_length else []
    if not artifacts:
        task.pop("artifacts", None)
    return task


def send_result(body: bytes, history_length: int | None) -> bytes:
    """``SendMessage``'s result: the stored task in a ``{"task": ...}`` wrapper."""
    if history_length is None:
        return b'{"task":' + body + b"}"
    return encode({"task": trimmed(body, history_length)})


def _string(value: Any) -> str:
    return value if isinstance(value, str) else encode(value).decode()


def error_data(code: int, data: Any) -> list[dict[str, Any]]:
    """``error.data`` of 1.0: an ``ErrorInfo`` whose ``reason`` names the error and whose
    ``metadata`` (strings, as ``google.rpc.ErrorInfo`` has them) holds what the 0.3
    dialect sends as ``data``; a rate limit adds a ``RetryInfo``."""
    reason, domain = _REASONS.get(code, ("UNKNOWN_ERROR", A2A_DOMAIN))
    metadata = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "state" and isinstance(value, str):
                value = to_state(value)
            metadata[key] = _string(value)
    details: list[dict[str, Any]] = [
        {"@type": ERROR_INFO, "reason": reason, "domain": domain, "metadata": metadata}
    ]
    retry_after = data.get("retryAfter") if isinstance(data, dict) else None
    if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool):
        details.append({"@type": RETRY_INFO, "retryDelay": f"{retry_after:g}s"})
    return details


# In: params of 1.0's requests ----------------------------------------------------------


def _part_in(index: int, raw: Any) -> Part:
    where = f"message.parts[{index}]"
    if not isinstance(raw, dict):
        raise _invalid(f"{where} must be an object")
    present = [key for key in ("text", "raw", "url", "data") if key in raw]
    if len(present) != 1:
        raise _invalid(f"{where} must have exactly one of text, raw, url or data")
    (key,) = present
    value = raw[key]
    metadata = raw.get("metadata", msgspec.UNSET)
    if metadata is not msgspec.UNSET and not isinstance(metadata, dict):
        raise _invalid(f"{where}.metadata must be an object")
    filename = optional_str(raw, "filename", where)
    media_type = optional_str(raw, "mediaType", where)
    if key == "text":
        if not isinstance(value, str):
            raise _invalid(f"{where}.text must be a string")
        return TextPart(value, metadata)
    if key == "data":
        # A protobuf Value may be any JSON; the service's skills read objects.
        if not isinstance(value, dict):
            raise _invalid(f"{where}.data must be an object")
        return DataPart(value, metadata)
    if not isinstance(value, str):
        raise _invalid(f"{where}.{key} must be a string")
    if key == "raw":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _invalid(f"{where}.raw must be base64") from None
    file: dict[str, Any] = {"bytes" if key == "raw" else "uri": value}
    if filename:
        file["name"] = filename
    if media_type:
        file["mimeType"] = media_type
    return FilePart(file, metadata)


def _optional_int(container: dict[str, Any], key: str, where: str) -> int | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _invalid(f"{where}.{key} must be a whole number >= 0")
    return value


def _params(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise _invalid("params must be an object")
    return params


def validate_send(params: Any) -> tuple[SendRequest, int | None]:
    """``SendMessage`` params field by field, and the ``historyLength`` asked for; raises
    -32602 naming the first fault."""
    params = _params(params)
    message = params.get("message")
    if not isinstance(message, dict):
        raise _invalid("params.message is required and must be an object")
    if message.get("role") != "ROLE_USER":
        raise _invalid('message.role must be "ROLE_USER"')
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _invalid("message.messageId must be a non-empty string")
    raw_parts = message.get("parts")
    if not isinstance(raw_parts, list) or not raw_parts:
        raise _invalid("message.parts must be a non-empty list")
    parts = [_part_in(index, raw) for index, raw in enumerate(raw_parts)]
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _invalid("message.metadata must be an object")
    skill = skill_of(metadata)
    context_id = optional_str(message, "contextId", "message")
    configuration = params.get("configuration")
    history_length = None
    if configuration is not None:
        if not isinstance(configuration, dict):
            raise _invalid("params.configuration must be an object")
        immediately = configuration.get("returnImmediately")
        if immediately is not None and not isinstance(immediately, bool):
            raise _invalid("configuration.returnImmediately must be a boolean")
        modes = configuration.get("acceptedOutputModes")
        if modes is not None and (
            not isinstance(modes, list) or not all(isinstance(m, str) for m in modes)
        ):
            raise _invalid("configuration.acceptedOutputModes must be a list of strings")
        history_length = _optional_int(configuration, "historyLength", "configuration")
    request = SendRequest(message_id, parts, skill, context_id or None, metadata)
    return request, history_length


def validate_get(params: Any) -> tuple[str, int | None]:
    """The ``id`` of ``GetTask`` / ``CancelTask`` params, and ``historyLength``."""
    params = _params(params)
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _invalid("params.id must be a non-empty string")
    return task_id, _optional_int(params, "historyLength", "params")


@dataclass(frozen=True, slots=True)
class ListRequest:
    """A validated ``ListTasks``."""

    context_id: str | None = None
    state: str | None = None
    page_size: int = _DEFAULT_PAGE_SIZE
    page_token: int | None = None
    history_length: int | None = None
    after: str | None = None
    include_artifacts: bool = False


def _timestamp(value: str) -> str:
    """An RFC 3339 timestamp in the emulator's own form (UTC, milliseconds, ``Z``), which
    compares as text in time order."""
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid("params.statusTimestampAfter must be an RFC 3339 timestamp") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    utc = moment.astimezone(datetime.timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def validate_list(params: Any) -> ListRequest:
    """``ListTasks`` params; raises -32602 naming the first fault."""
    params = _params(params)
    context_id = optional_str(params, "contextId", "params") or None
    status = params.get("status")
    state = None
    if status is not None and status != "TASK_STATE_UNSPECIFIED":
        state = from_state(status) if isinstance(status, str) else None
        if state is None:
            raise _invalid("params.status must be a TASK_STATE_* name")
    page_size = _optional_int(params, "pageSize", "params")
    if page_size is not None and not 1 <= page_size <= _MAX_PAGE_SIZE:
        raise _invalid(f"params.pageSize must be from 1 to {_MAX_PAGE_SIZE}")
    token = optional_str(params, "pageToken", "params")
    page_token = None
    if token:
        if not token.isdigit():
            raise _invalid("params.pageToken is not a token this server gave")
        page_token = int(token)
    after = optional_str(params, "statusTimestampAfter", "params")
    include = params.get("includeArtifacts", False)
    if not isinstance(include, bool):
        raise _invalid("params.includeArtifacts must be a boolean")
    return ListRequest(
        context_id,
        state,
        page_size or _DEFAULT_PAGE_SIZE,
        page_token,
        _optional_int(params, "historyLength", "params"),
        _timestamp(after) if after else None,
        include,
    )


def list_result(
    tasks: list[bytes], next_token: int | None, total: int, request: ListRequest
) -> bytes:
    """``ListTasks``' result: one page of tasks (newest first) and the token of the next."""
    page = [
        trimmed(body, request.history_length, artifacts=request.include_artifacts) for body in tasks
    ]
    return encode(
        {
            "tasks": page,
            "nextPageToken": "" if next_token is None else str(next_token),
            "pageSize": request.page_size,
            "totalSize": total,
        }
    )
