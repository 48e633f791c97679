"""Async Python SDK for the Magisterium AI A2A API.

>>> async with AsyncMagisterium() as client:        # token from $MAGISTERIUM_TOKEN
...     for hit in await client.search("grace and nature"):
...         print(hit.title)

Everything users need is importable from here; the private modules may change.
"""

from ._batch import Batch, BatchItem
from ._client import AsyncMagisterium
from ._clock import Clock
from ._config import (
    DEFAULT_BASE_URL,
    DEFAULT_RETRY_POLICY,
    DEFAULT_TIMEOUTS,
    PoolName,
    RateLimits,
    RetryPolicy,
    Timeouts,
)
from ._errors import (
    APIConnectionError,
    APIResponseError,
    APITimeoutError,
    AuthenticationError,
    ClientClosedError,
    InternalServerError,
    InvalidParamsError,
    InvalidRequestError,
    JSONRPCError,
    MagisteriumError,
    MalformedResponseError,
    MethodNotFoundError,
    ParseError,
    PlanRequiredError,
    RateLimitError,
    SharedQuotaError,
    SharedStateError,
    SkillNotFoundError,
    StateError,
    TaskFailedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnexpectedStatusError,
)
from ._harvest import Harvest, HarvestedDocument, HarvestFailure, HarvestStats
from ._jsonl import JsonlWriter
from ._models import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Answer,
    Artifact,
    Citation,
    DataPart,
    Document,
    FileContent,
    FilePart,
    Message,
    Part,
    SearchResult,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from ._redis import SharedQuota
from ._scheduler import PoolEvent, PoolStats, SchedulerStats
from ._version import __version__

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_RETRY_POLICY",
    "DEFAULT_TIMEOUTS",
    "APIConnectionError",
    "APIResponseError",
    "APITimeoutError",
    "AgentCapabilities",
    "AgentCard",
    "AgentSkill",
    "Answer",
    "Artifact",
    "AsyncMagisterium",
    "AuthenticationError",
    "Batch",
    "BatchItem",
    "Citation",
    "ClientClosedError",
    "Clock",
    "DataPart",
    "Document",
    "FileContent",
    "FilePart",
    "Harvest",
    "HarvestFailure",
    "HarvestStats",
    "HarvestedDocument",
    "InternalServerError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONRPCError",
    "JsonlWriter",
    "MagisteriumError",
    "MalformedResponseError",
    "Message",
    "MethodNotFoundError",
    "ParseError",
    "Part",
    "PlanRequiredError",
    "PoolEvent",
    "PoolName",
    "PoolStats",
    "RateLimitError",
    "RateLimits",
    "RetryPolicy",
    "SchedulerStats",
    "SearchResult",
    "SharedQuota",
    "SharedQuotaError",
    "SharedStateError",
    "SkillNotFoundError",
    "StateError",
    "Task",
    "TaskFailedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "TaskState",
    "TaskStatus",
    "TextPart",
    "Timeouts",
    "UnexpectedStatusError",
    "__version__",
]
