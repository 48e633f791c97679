"""Async Python SDK for the Magisterium AI A2A API.

>>> async with AsyncMagisterium() as client:   # $MAGISTERIUM_TOKEN, or `magisterium-async login`
...     for hit in await client.search("grace and nature"):
...         print(hit.title)

Everything users need is importable from here; the private modules may change.
"""

# The names load on first use (PEP 562): ``magisterium-async --help`` and a program that
# imports one model need not import the network stack. The type checker reads the imports
# below; for the interpreter, ``_MODULES`` says where to look.

import importlib as _importlib
import typing as _typing

from magisterium_async._events import log_from_environment as _log_from_environment
from magisterium_async._version import __version__

if _typing.TYPE_CHECKING:
    from magisterium_async._auth import (
        TokenCallable,
        TokenSource,
    )
    from magisterium_async._cache import CacheStats
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._clock import Clock
    from magisterium_async._config import (
        DEFAULT_BASE_URL,
        DEFAULT_CACHE_POLICY,
        DEFAULT_MAX_RESPONSE_BYTES,
        DEFAULT_RETRY_POLICY,
        DEFAULT_TIMEOUTS,
        NOT_GIVEN,
        CachePolicy,
        CacheRule,
        NotGiven,
        Priority,
        ProtocolVersion,
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
    from magisterium_async._events import (
        AnswerEvent,
        CallEvent,
        EventKind,
        Notice,
        PoolEvent,
        RetryEvent,
    )
    from magisterium_async._harvest import (
        Acknowledge,
        Batch,
        BatchItem,
        Harvest,
        HarvestedDocument,
        HarvestFailure,
        HarvestStats,
        JsonlWriter,
        OnError,
        OutputMark,
    )
    from magisterium_async._http import HTTPRequest, HTTPTransport
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

_MODULES = (
    "magisterium_async._errors",
    "magisterium_async._models",
    "magisterium_async._config",
    "magisterium_async._events",
    "magisterium_async._clock",
    "magisterium_async._cache",
    "magisterium_async._ratelimit",
    "magisterium_async._auth",
    "magisterium_async._harvest",
    "magisterium_async._http",
    "magisterium_async._client",
)
"""Where the exported names live, the lightest modules first: a name is taken from the
first that holds it (a program that asks for a model imports no network stack)."""

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
    "AnswerEvent",
    "Artifact",
    "AsyncMagisterium",
    "AuthenticationError",
    "Batch",
    "BatchItem",
    "CacheError",
    "CachePolicy",
    "CacheRule",
    "CacheStats",
    "CallEvent",
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
    "Notice",
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
    if name in __all__:
        for module in _MODULES:
            value = getattr(_importlib.import_module(module), name, _MODULES)
            if value is not _MODULES:
                globals()[name] = value  # once: later uses do not come back here
                return value
    raise AttributeError(f"module 'magisterium_async' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_log_from_environment()  # $MAGISTERIUM_LOG, read once
