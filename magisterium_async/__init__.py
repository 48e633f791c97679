"""Async Python SDK for the Magisterium AI A2A API.

>>> async with AsyncMagisterium() as client:   # $MAGISTERIUM_TOKEN, or `magisterium-async login`
...     for hit in await client.search("grace and nature"):
...         print(hit.title)

Everything users need is importable from here; the private modules may change.
"""

# The models, the errors, the options and the events are imported here; the rest loads on
# first use (PEP 562): ``magisterium-async --help`` and a program that imports one model
# need not import the network stack or the harvest. The type checker reads the imports
# under ``TYPE_CHECKING``; for the interpreter, ``_LAZY`` says where each such name lives.

import importlib as _importlib
import typing as _typing

from magisterium_async._clock import Clock as Clock
from magisterium_async._config import DEFAULT_BASE_URL as DEFAULT_BASE_URL
from magisterium_async._config import DEFAULT_CACHE_POLICY as DEFAULT_CACHE_POLICY
from magisterium_async._config import DEFAULT_MAX_RESPONSE_BYTES as DEFAULT_MAX_RESPONSE_BYTES
from magisterium_async._config import DEFAULT_RETRY_POLICY as DEFAULT_RETRY_POLICY
from magisterium_async._config import DEFAULT_TIMEOUTS as DEFAULT_TIMEOUTS
from magisterium_async._config import NOT_GIVEN as NOT_GIVEN
from magisterium_async._config import CachePolicy as CachePolicy
from magisterium_async._config import CacheRule as CacheRule
from magisterium_async._config import NotGiven as NotGiven
from magisterium_async._config import Priority as Priority
from magisterium_async._config import ProtocolVersion as ProtocolVersion
from magisterium_async._config import RateLimits as RateLimits
from magisterium_async._config import RetryPolicy as RetryPolicy
from magisterium_async._config import Timeouts as Timeouts
from magisterium_async._errors import APIConnectionError as APIConnectionError
from magisterium_async._errors import APIResponseError as APIResponseError
from magisterium_async._errors import APITimeoutError as APITimeoutError
from magisterium_async._errors import AuthenticationError as AuthenticationError
from magisterium_async._errors import CacheError as CacheError
from magisterium_async._errors import ClientClosedError as ClientClosedError
from magisterium_async._errors import CredentialsError as CredentialsError
from magisterium_async._errors import InternalServerError as InternalServerError
from magisterium_async._errors import InvalidParamsError as InvalidParamsError
from magisterium_async._errors import InvalidRequestError as InvalidRequestError
from magisterium_async._errors import JSONRPCError as JSONRPCError
from magisterium_async._errors import LoginRequiredError as LoginRequiredError
from magisterium_async._errors import MagisteriumError as MagisteriumError
from magisterium_async._errors import MalformedResponseError as MalformedResponseError
from magisterium_async._errors import MethodNotFoundError as MethodNotFoundError
from magisterium_async._errors import NotSupportedError as NotSupportedError
from magisterium_async._errors import OAuthError as OAuthError
from magisterium_async._errors import OutputFileError as OutputFileError
from magisterium_async._errors import ParseError as ParseError
from magisterium_async._errors import PlanRequiredError as PlanRequiredError
from magisterium_async._errors import RateLimitError as RateLimitError
from magisterium_async._errors import ResponseTooLargeError as ResponseTooLargeError
from magisterium_async._errors import SharedQuotaError as SharedQuotaError
from magisterium_async._errors import SkillNotFoundError as SkillNotFoundError
from magisterium_async._errors import StateError as StateError
from magisterium_async._errors import TaskFailedError as TaskFailedError
from magisterium_async._errors import TaskNotCancelableError as TaskNotCancelableError
from magisterium_async._errors import TaskNotFoundError as TaskNotFoundError
from magisterium_async._errors import TLSError as TLSError
from magisterium_async._errors import UnexpectedStatusError as UnexpectedStatusError
from magisterium_async._errors import VersionNotSupportedError as VersionNotSupportedError
from magisterium_async._events import AnswerEvent as AnswerEvent
from magisterium_async._events import CallEvent as CallEvent
from magisterium_async._events import EventKind as EventKind
from magisterium_async._events import Notice as Notice
from magisterium_async._events import PoolEvent as PoolEvent
from magisterium_async._events import RetryEvent as RetryEvent
from magisterium_async._events import log_from_environment as _log_from_environment
from magisterium_async._models import AgentCapabilities as AgentCapabilities
from magisterium_async._models import AgentCard as AgentCard
from magisterium_async._models import AgentInterface as AgentInterface
from magisterium_async._models import AgentSkill as AgentSkill
from magisterium_async._models import Answer as Answer
from magisterium_async._models import Artifact as Artifact
from magisterium_async._models import Citation as Citation
from magisterium_async._models import DataPart as DataPart
from magisterium_async._models import Document as Document
from magisterium_async._models import FileContent as FileContent
from magisterium_async._models import FilePart as FilePart
from magisterium_async._models import Lookup as Lookup
from magisterium_async._models import Message as Message
from magisterium_async._models import Part as Part
from magisterium_async._models import SearchResult as SearchResult
from magisterium_async._models import Task as Task
from magisterium_async._models import TaskPage as TaskPage
from magisterium_async._models import TaskState as TaskState
from magisterium_async._models import TaskStatus as TaskStatus
from magisterium_async._models import TextPart as TextPart
from magisterium_async._version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from magisterium_async._auth import TokenCallable as TokenCallable
    from magisterium_async._auth import TokenSource as TokenSource
    from magisterium_async._cache import CacheStats as CacheStats
    from magisterium_async._client import AsyncMagisterium as AsyncMagisterium
    from magisterium_async._harvest import Acknowledge as Acknowledge
    from magisterium_async._harvest import Batch as Batch
    from magisterium_async._harvest import BatchItem as BatchItem
    from magisterium_async._harvest import Harvest as Harvest
    from magisterium_async._harvest import HarvestedDocument as HarvestedDocument
    from magisterium_async._harvest import HarvestFailure as HarvestFailure
    from magisterium_async._harvest import HarvestStats as HarvestStats
    from magisterium_async._harvest import JsonlWriter as JsonlWriter
    from magisterium_async._harvest import OnError as OnError
    from magisterium_async._harvest import OutputMark as OutputMark
    from magisterium_async._http import HTTPRequest as HTTPRequest
    from magisterium_async._http import HTTPTransport as HTTPTransport
    from magisterium_async._ratelimit import PoolQuota as PoolQuota
    from magisterium_async._ratelimit import PoolStats as PoolStats
    from magisterium_async._ratelimit import Quota as Quota
    from magisterium_async._ratelimit import SchedulerStats as SchedulerStats
    from magisterium_async._ratelimit import SharedQuota as SharedQuota

_LAZY = {
    "TokenCallable": "magisterium_async._auth",
    "TokenSource": "magisterium_async._auth",
    "CacheStats": "magisterium_async._cache",
    "AsyncMagisterium": "magisterium_async._client",
    "Acknowledge": "magisterium_async._harvest",
    "Batch": "magisterium_async._harvest",
    "BatchItem": "magisterium_async._harvest",
    "Harvest": "magisterium_async._harvest",
    "HarvestedDocument": "magisterium_async._harvest",
    "HarvestFailure": "magisterium_async._harvest",
    "HarvestStats": "magisterium_async._harvest",
    "JsonlWriter": "magisterium_async._harvest",
    "OnError": "magisterium_async._harvest",
    "OutputMark": "magisterium_async._harvest",
    "HTTPRequest": "magisterium_async._http",
    "HTTPTransport": "magisterium_async._http",
    "PoolQuota": "magisterium_async._ratelimit",
    "PoolStats": "magisterium_async._ratelimit",
    "Quota": "magisterium_async._ratelimit",
    "SchedulerStats": "magisterium_async._ratelimit",
    "SharedQuota": "magisterium_async._ratelimit",
}

# The names imported above and the lazy ones (pytest's assertion rewriting, which covers a
# plugin's package, adds names beginning with "@").
__all__ = sorted([*(name for name in globals() if name[0].isalpha()), *_LAZY, "__version__"])


def __getattr__(name: str) -> object:
    """Import a lazily exported name's module the first time the name is used."""
    if name not in _LAZY:
        raise AttributeError(f"module 'magisterium_async' has no attribute {name!r}")
    value = getattr(_importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # once: later uses do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_log_from_environment()  # $MAGISTERIUM_LOG, read once
