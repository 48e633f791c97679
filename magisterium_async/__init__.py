"""Async Python SDK for the Magisterium AI A2A API.

>>> async with AsyncMagisterium() as client:   # $MAGISTERIUM_TOKEN, or `magisterium-async login`
...     for hit in await client.search("grace and nature"):
...         print(hit.title)

Everything users need is importable from here; the private modules may change.
"""

# The names load on first use (PEP 562): ``magisterium-async --help`` and a program that
# imports one model need not import the network stack. The type checker reads the imports
# below; ``_EXPORTS`` says, for the interpreter, where each name lives.

import importlib as _importlib
import typing as _typing

from magisterium_async._events import log_from_environment as _log_from_environment
from magisterium_async._version import __version__

if _typing.TYPE_CHECKING:
    from magisterium_async._auth import (
        TokenCallable,
        TokenSource,
    )
    from magisterium_async._cache import (
        DEFAULT_CACHE_POLICY,
        CachePolicy,
        CacheRule,
        CacheStats,
    )
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._clock import Clock
    from magisterium_async._config import (
        DEFAULT_BASE_URL,
        DEFAULT_MAX_RESPONSE_BYTES,
        DEFAULT_RETRY_POLICY,
        DEFAULT_TIMEOUTS,
        NOT_GIVEN,
        NotGiven,
        Priority,
        RateLimits,
        RetryPolicy,
        Timeouts,
    )
    from magisterium_async._errors import (
        APIConnectionError,
        APIResponseError,
        APITimeoutError,
        AuthenticationError,
        CacheError,
        ClientClosedError,
        CredentialsError,
        InternalServerError,
        InvalidParamsError,
        InvalidRequestError,
        JSONRPCError,
        LoginRequiredError,
        MagisteriumError,
        MalformedResponseError,
        MethodNotFoundError,
        NotSupportedError,
        OAuthError,
        OutputFileError,
        ParseError,
        PlanRequiredError,
        RateLimitError,
        ResponseTooLargeError,
        SharedQuotaError,
        SkillNotFoundError,
        StateError,
        TaskFailedError,
        TaskNotCancelableError,
        TaskNotFoundError,
        TLSError,
        UnexpectedStatusError,
        VersionNotSupportedError,
    )
    from magisterium_async._events import EventKind, PoolEvent, RetryEvent
    from magisterium_async._harvest._batch import (
        Batch,
        BatchItem,
    )
    from magisterium_async._harvest._harvest import (
        Acknowledge,
        Harvest,
        HarvestedDocument,
        HarvestFailure,
        HarvestStats,
        OnError,
    )
    from magisterium_async._harvest._jsonl import (
        JsonlWriter,
        OutputMark,
    )
    from magisterium_async._http._base import (
        HTTPRequest,
        HTTPTransport,
    )
    from magisterium_async._http._dialect import ProtocolVersion
    from magisterium_async._models import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Answer,
        Artifact,
        Citation,
        DataPart,
        Document,
        FileContent,
        FilePart,
        Lookup,
        Message,
        Part,
        SearchResult,
        Task,
        TaskPage,
        TaskState,
        TaskStatus,
        TextPart,
    )
    from magisterium_async._ratelimit import (
        PoolQuota,
        PoolStats,
        Quota,
        SchedulerStats,
        SharedQuota,
    )

_EXPORTS: dict[str, str] = {
    "TokenCallable": "magisterium_async._auth",
    "TokenSource": "magisterium_async._auth",
    "DEFAULT_CACHE_POLICY": "magisterium_async._cache",
    "CachePolicy": "magisterium_async._cache",
    "CacheRule": "magisterium_async._cache",
    "CacheStats": "magisterium_async._cache",
    "AsyncMagisterium": "magisterium_async._client",
    "Clock": "magisterium_async._clock",
    "DEFAULT_BASE_URL": "magisterium_async._config",
    "DEFAULT_MAX_RESPONSE_BYTES": "magisterium_async._config",
    "DEFAULT_RETRY_POLICY": "magisterium_async._config",
    "DEFAULT_TIMEOUTS": "magisterium_async._config",
    "NOT_GIVEN": "magisterium_async._config",
    "NotGiven": "magisterium_async._config",
    "Priority": "magisterium_async._config",
    "RateLimits": "magisterium_async._config",
    "RetryPolicy": "magisterium_async._config",
    "Timeouts": "magisterium_async._config",
    "APIConnectionError": "magisterium_async._errors",
    "APIResponseError": "magisterium_async._errors",
    "APITimeoutError": "magisterium_async._errors",
    "AuthenticationError": "magisterium_async._errors",
    "CacheError": "magisterium_async._errors",
    "ClientClosedError": "magisterium_async._errors",
    "CredentialsError": "magisterium_async._errors",
    "InternalServerError": "magisterium_async._errors",
    "InvalidParamsError": "magisterium_async._errors",
    "InvalidRequestError": "magisterium_async._errors",
    "JSONRPCError": "magisterium_async._errors",
    "LoginRequiredError": "magisterium_async._errors",
    "MagisteriumError": "magisterium_async._errors",
    "MalformedResponseError": "magisterium_async._errors",
    "MethodNotFoundError": "magisterium_async._errors",
    "NotSupportedError": "magisterium_async._errors",
    "OAuthError": "magisterium_async._errors",
    "OutputFileError": "magisterium_async._errors",
    "ParseError": "magisterium_async._errors",
    "PlanRequiredError": "magisterium_async._errors",
    "RateLimitError": "magisterium_async._errors",
    "ResponseTooLargeError": "magisterium_async._errors",
    "SharedQuotaError": "magisterium_async._errors",
    "SkillNotFoundError": "magisterium_async._errors",
    "StateError": "magisterium_async._errors",
    "TaskFailedError": "magisterium_async._errors",
    "TaskNotCancelableError": "magisterium_async._errors",
    "TaskNotFoundError": "magisterium_async._errors",
    "TLSError": "magisterium_async._errors",
    "UnexpectedStatusError": "magisterium_async._errors",
    "VersionNotSupportedError": "magisterium_async._errors",
    "Batch": "magisterium_async._harvest._batch",
    "BatchItem": "magisterium_async._harvest._batch",
    "Acknowledge": "magisterium_async._harvest._harvest",
    "Harvest": "magisterium_async._harvest._harvest",
    "HarvestedDocument": "magisterium_async._harvest._harvest",
    "HarvestFailure": "magisterium_async._harvest._harvest",
    "HarvestStats": "magisterium_async._harvest._harvest",
    "OnError": "magisterium_async._harvest._harvest",
    "JsonlWriter": "magisterium_async._harvest._jsonl",
    "OutputMark": "magisterium_async._harvest._jsonl",
    "HTTPRequest": "magisterium_async._http._base",
    "HTTPTransport": "magisterium_async._http._base",
    "ProtocolVersion": "magisterium_async._http._dialect",
    "AgentCapabilities": "magisterium_async._models",
    "AgentCard": "magisterium_async._models",
    "AgentInterface": "magisterium_async._models",
    "AgentSkill": "magisterium_async._models",
    "Answer": "magisterium_async._models",
    "Artifact": "magisterium_async._models",
    "Citation": "magisterium_async._models",
    "DataPart": "magisterium_async._models",
    "Document": "magisterium_async._models",
    "FileContent": "magisterium_async._models",
    "FilePart": "magisterium_async._models",
    "Lookup": "magisterium_async._models",
    "Message": "magisterium_async._models",
    "Part": "magisterium_async._models",
    "SearchResult": "magisterium_async._models",
    "Task": "magisterium_async._models",
    "TaskPage": "magisterium_async._models",
    "TaskState": "magisterium_async._models",
    "TaskStatus": "magisterium_async._models",
    "TextPart": "magisterium_async._models",
    "EventKind": "magisterium_async._events",
    "PoolEvent": "magisterium_async._events",
    "RetryEvent": "magisterium_async._events",
    "PoolQuota": "magisterium_async._ratelimit",
    "PoolStats": "magisterium_async._ratelimit",
    "Quota": "magisterium_async._ratelimit",
    "SchedulerStats": "magisterium_async._ratelimit",
    "SharedQuota": "magisterium_async._ratelimit",
}
"""Each exported name → the module it lives in (imported when the name is first used)."""

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_CACHE_POLICY",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_RETRY_POLICY",
    "DEFAULT_TIMEOUTS",
    "NOT_GIVEN",
    "APIConnectionError",
    "APIResponseError",
    "APITimeoutError",
    "Acknowledge",
    "AgentCapabilities",
    "AgentCard",
    "AgentInterface",
    "AgentSkill",
    "Answer",
    "Artifact",
    "AsyncMagisterium",
    "AuthenticationError",
    "Batch",
    "BatchItem",
    "CacheError",
    "CachePolicy",
    "CacheRule",
    "CacheStats",
    "Citation",
    "ClientClosedError",
    "Clock",
    "CredentialsError",
    "DataPart",
    "Document",
    "EventKind",
    "FileContent",
    "FilePart",
    "HTTPRequest",
    "HTTPTransport",
    "Harvest",
    "HarvestFailure",
    "HarvestStats",
    "HarvestedDocument",
    "InternalServerError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONRPCError",
    "JsonlWriter",
    "LoginRequiredError",
    "Lookup",
    "MagisteriumError",
    "MalformedResponseError",
    "Message",
    "MethodNotFoundError",
    "NotGiven",
    "NotSupportedError",
    "OAuthError",
    "OnError",
    "OutputFileError",
    "OutputMark",
    "ParseError",
    "Part",
    "PlanRequiredError",
    "PoolEvent",
    "PoolQuota",
    "PoolStats",
    "Priority",
    "ProtocolVersion",
    "Quota",
    "RateLimitError",
    "RateLimits",
    "ResponseTooLargeError",
    "RetryEvent",
    "RetryPolicy",
    "SchedulerStats",
    "SearchResult",
    "SharedQuota",
    "SharedQuotaError",
    "SkillNotFoundError",
    "StateError",
    "TLSError",
    "Task",
    "TaskFailedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "TaskPage",
    "TaskState",
    "TaskStatus",
    "TextPart",
    "Timeouts",
    "TokenCallable",
    "TokenSource",
    "UnexpectedStatusError",
    "VersionNotSupportedError",
    "__version__",
]


def __getattr__(name: str) -> object:
    """Import an exported name's module the first time the name is used."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'magisterium_async' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # once: later uses do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_log_from_environment()  # $MAGISTERIUM_LOG, read once
