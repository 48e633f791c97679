"""OpenTelemetry: one CLIENT span and a few metrics per protocol call, when asked for.

With the ``[otel]`` extra (``opentelemetry-api``) and a tracer or meter provider the
application configured (the global one, or ``AsyncMagisterium(tracer_provider=...,
meter_provider=...)``), each protocol call is a span named after its method, a child of
the caller's current span, with the attributes of OpenTelemetry's A2A conventions and the
client's own (``magisterium.*``); every request carries its W3C trace context. A call to a
skill the cache policy covers says how it was answered in ``magisterium.cache``: ``miss``
on the span of its own request, ``hit`` or ``coalesced`` on a span of its own that sent
nothing (:meth:`Telemetry.answered_without_request`); the counter
``magisterium.client.cache`` counts the three.

Without the extra, or with no provider configured (OpenTelemetry's proxy or no-op one),
:meth:`Telemetry.observe` gives the call :data:`NO_OBSERVER`, which hears nothing and
records nothing: nothing is made, nothing is emitted. A provider
configured later is picked up by the next call.

Nothing secret or typed by a user goes into a span: the method, ids (task, context,
skill), states, pools, counts, waits and error classes, never a header, a
token, a query or an exception's message.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from magisterium_async import _version
from magisterium_async._errors import JSONRPCError, RateLimitError
from magisterium_async._events import RetryEvent
from magisterium_async._models import Message, Task, TaskState

# OpenTelemetry's API, loaded by _in_use() once the application has imported it.
_trace: Any = None
_metrics: Any = None
_propagate: Any = None


def _in_use() -> bool:
    """Whether OpenTelemetry may be listening: only once the application has imported it
    (a provider can only be set, or handed to the client, that way). Until then it is not
    loaded here: a program that does not use it neither imports it (some 9,000 objects,
    and entry points read at import) nor pays for it in each call."""
    global _trace, _metrics, _propagate
    if _trace is None:
        if "opentelemetry.trace" not in sys.modules and "opentelemetry.metrics" not in sys.modules:
            return False
        try:
            from opentelemetry import metrics, propagate, trace
        except ImportError:  # a partial installation: telemetry stays off
            return False
        _trace, _metrics, _propagate = trace, metrics, propagate
    return True


__all__ = [
    "NO_OBSERVER",
    "CallObserver",
    "Telemetry",
    "error_type",
    "with_trace_context",
]

_NAME = "magisterium_async"
_DEFAULT_SKILL = "catholic_qa"  # the service's default skill (a message without skillId)
# What OpenTelemetry's getters return while no provider is configured.
_NO_TRACER_PROVIDERS = ("ProxyTracerProvider", "NoOpTracerProvider")
_NO_METER_PROVIDERS = ("_ProxyMeterProvider", "NoOpMeterProvider")


class CallObserver:
    """What the retry loop tells about one call; this base hears it and does nothing."""

    __slots__ = ()

    def admitted(self, waited: float) -> None:
        """An attempt got its slot after ``waited`` seconds in its pool's line."""

    def answered(self, error: BaseException | None) -> None:
        """An attempt ended: answered (``None``) or with ``error``."""

    def retried(self, event: RetryEvent) -> None:
        """The call is tried again (the event the client's stream carries)."""

    def current(self) -> contextlib.AbstractContextManager[object]:
        """The call's span made current (so requests carry it); here, there is none."""
        return _NOTHING

    def finish(self, task: Any, error: BaseException | None) -> None:
        """The call ended: with ``task`` (its answer), or with ``error``."""


_NOTHING: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
NO_OBSERVER = CallObserver()
"""The observer of a call nobody watches."""


def error_type(error: BaseException) -> str:
    """``error.type`` for ``error``: the JSON-RPC code as a string, else the class name."""
    if isinstance(error, JSONRPCError):
        return str(error.code)
    return type(error).__name__


def with_trace_context(headers: Mapping[str, str]) -> Mapping[str, str]:
    """``headers``, plus ``traceparent`` (and the other configured propagators' headers)
    when a span is current; the very same mapping, uncopied, when none is."""
    if not _in_use() or not _trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier = dict(headers)
    _propagate.inject(carrier)
    return carrier


class _Instruments:
    """The client's metrics, made once per meter."""

    def __init__(self, meter: Any) -> None:
        self.requests = meter.create_counter(
            "magisterium.client.requests",
            unit="{request}",
            description="HTTP requests sent, by pool and outcome (ok, rate_limited, error)",
        )
        self.rate_limited = meter.create_counter(
            "magisterium.client.rate_limited",
            unit="{request}",
            description="Requests answered 429 (rate limited), by pool",
        )
        self.quota_wait = meter.create_histogram(
            "magisterium.client.quota.wait",
            unit="s",
            description="Seconds a call waited for its pool's quota, by pool",
        )
        self.cache = meter.create_counter(
            "magisterium.client.cache",
            unit="{call}",
            description="Calls the cache policy covers, by skill and outcome: hit (from the "
            "cache), coalesced (another call's answer), miss (a request of their own)",
        )


class _CallRecord(CallObserver):
    """One watched call: its span (if traced) and the counts that end up on it."""

    __slots__ = ("_labels", "attempts", "instruments", "retries", "span", "waited")

    def __init__(self, span: Any, instruments: _Instruments | None, pool: str) -> None:
        self.span = span
        self.instruments = instruments
        self._labels = {"pool": pool}
        self.attempts = 0
        self.retries = 0
        self.waited = 0.0

    def admitted(self, waited: float) -> None:
        self.attempts += 1
        self.waited += max(waited, 0.0)

    def answered(self, error: BaseException | None) -> None:
        if isinstance(error, RateLimitError):
            outcome = "rate_limited"
            if self.span is not None:
                # The wait the service gave, in seconds; none when it gave none usable.
                wait = error.retry_after
                usable = wait is not None and math.isfinite(wait)
                attributes = {"retry_after": wait} if usable else {}
                self.span.add_event("magisterium.rate_limited", attributes)
            if self.instruments is not None:
                self.instruments.rate_limited.add(1, self._labels)
        else:
            outcome = "ok" if error is None else "error"
        if self.instruments is not None:
            self.instruments.requests.add(1, {**self._labels, "outcome": outcome})

    def retried(self, event: RetryEvent) -> None:
        self.retries += 1
        if self.span is not None:
            attributes = {"attempt": self.retries, "reason": event.reason}
            self.span.add_event("magisterium.retry", attributes)

    def current(self) -> contextlib.AbstractContextManager[object]:
        if self.span is None:
            return _NOTHING
        used: contextlib.AbstractContextManager[object] = _trace.use_span(
            self.span, record_exception=False, set_status_on_exception=False
        )
        return used

    def finish(self, task: Any, error: BaseException | None) -> None:
        if self.instruments is not None:
            self.instruments.quota_wait.record(self.waited, self._labels)
        span = self.span
        if span is None:
            return
        span.set_attribute("magisterium.attempts", self.attempts)
        span.set_attribute("magisterium.quota.wait", self.waited)
        failure: str | None = None
        if isinstance(task, Task):
            span.set_attribute("a2a.task.id", task.id)
            span.set_attribute("a2a.task.state", task.state)
            span.set_attribute("gen_ai.conversation.id", task.context_id)
            if task.state == TaskState.FAILED:
                failure = "TaskFailedError"
        if error is not None:
            failure = error_type(error)
        if failure is not None:
            span.set_attribute("error.type", failure)
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, failure))
        span.end()


class Telemetry:
    """The client's telemetry: providers given, or the global ones, looked up per call."""

    def __init__(
        self, base_url: str, *, tracer_provider: Any = None, meter_provider: Any = None
    ) -> None:
        parts = urlsplit(base_url)
        self._server: dict[str, str | int] = {
            "server.address": parts.hostname or "",
            "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        }
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer: tuple[Any, Any] = (None, None)  # (provider, its tracer or None)
        self._instruments: tuple[Any, _Instruments | None] = (None, None)
        self._agent: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<Telemetry {'in use' if _in_use() else 'off (OpenTelemetry not imported)'}>"

    def know_agent(self, name: str, version: str | None) -> None:
        """The agent card's name and version: on every span from now on."""
        self._agent = {"gen_ai.agent.name": name}
        if version is not None:
            self._agent["gen_ai.agent.version"] = version

    def _current_tracer(self) -> Any:
        provider = self._tracer_provider or _trace.get_tracer_provider()
        seen, tracer = self._tracer
        if provider is not seen:
            tracer = None
            if provider is not None and type(provider).__name__ not in _NO_TRACER_PROVIDERS:
                tracer = provider.get_tracer(_NAME, _version.__version__)
            self._tracer = (provider, tracer)
        return tracer

    def _current_instruments(self) -> _Instruments | None:
        provider = self._meter_provider or _metrics.get_meter_provider()
        seen, instruments = self._instruments
        if provider is not seen:
            instruments = None
            if provider is not None and type(provider).__name__ not in _NO_METER_PROVIDERS:
                instruments = _Instruments(provider.get_meter(_NAME, _version.__version__))
            self._instruments = (provider, instruments)
        return instruments

    def observe(
        self,
        method: str,
        pool: str,
        params: Any,
        cache: str | None = None,
        started: int | None = None,
    ) -> CallObserver:
        """The observer of one call: its span is started here when anyone listens; else
        :data:`NO_OBSERVER`, and nothing is made. ``cache``: ``"miss"`` for a call the
        cache policy covers (it sends because nothing answered it). ``started``: when the
        call began (ns since the epoch; ``None``: now), for one that waited for its turn
        before it came here."""
        if not _in_use():
            return NO_OBSERVER
        tracer = self._current_tracer()
        instruments = self._current_instruments()
        if tracer is None and instruments is None:
            return NO_OBSERVER
        found = _request_attributes(params)
        if cache is not None and instruments is not None:
            instruments.cache.add(1, _cache_labels(found, cache))
        span = None
        if tracer is not None:
            attributes = {
                "a2a.method.name": method,
                "magisterium.pool": pool,
                **self._server,
                **self._agent,
                **found,
            }
            if cache is not None:
                attributes["magisterium.cache"] = cache
            span = tracer.start_span(
                method, kind=_trace.SpanKind.CLIENT, attributes=attributes, start_time=started
            )
        return _CallRecord(span, instruments, pool)

    def answered_without_request(
        self, method: str, pool: str, params: Any, task: Task, cache: str, started: int
    ) -> None:
        """A call the cache (``cache="hit"``) or an identical call in flight
        (``"coalesced"``) answered: counted, and a span from ``started`` (ns since the
        epoch) to now that sent nothing."""
        if not _in_use():
            return
        tracer = self._current_tracer()
        instruments = self._current_instruments()
        if tracer is None and instruments is None:
            return
        found = _request_attributes(params)
        if instruments is not None:
            instruments.cache.add(1, _cache_labels(found, cache))
        if tracer is None:
            return
        attributes = {
            "a2a.method.name": method,
            "magisterium.pool": pool,
            **self._server,
            **self._agent,
            **found,
            "magisterium.cache": cache,
            "magisterium.attempts": 0,
            "a2a.task.id": task.id,
            "a2a.task.state": task.state,
            "gen_ai.conversation.id": task.context_id,
        }
        span = tracer.start_span(
            method, kind=_trace.SpanKind.CLIENT, attributes=attributes, start_time=started
        )
        if task.state == TaskState.FAILED:  # another call's failed task, shared
            span.set_attribute("error.type", "TaskFailedError")
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, "TaskFailedError"))
        span.end()


def _cache_labels(found: Mapping[str, str], outcome: str) -> dict[str, str]:
    return {"skill": found.get("magisterium.skill.id", _DEFAULT_SKILL), "outcome": outcome}


def _request_attributes(params: Any) -> dict[str, str]:
    """What the request says about itself that may go on a span: ids, never text."""
    message = getattr(params, "message", None)
    if isinstance(message, Message):
        metadata = message.metadata or {}
        skill = metadata.get("skillId")
        found = {"magisterium.skill.id": skill if isinstance(skill, str) else _DEFAULT_SKILL}
        if message.context_id is not None:
            found["gen_ai.conversation.id"] = message.context_id
        return found
    if isinstance(params, Mapping) and isinstance(params.get("id"), str):
        return {"a2a.task.id": params["id"]}
    return {}
