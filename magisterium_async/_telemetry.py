"""OpenTelemetry: one CLIENT span and a few metrics per protocol call, when asked for.

With the ``[otel]`` extra (``opentelemetry-api``) and a tracer or meter provider the
application configured (the global one, or ``AsyncMagisterium(tracer_provider=...,
meter_provider=...)``), each protocol call is a span named after its method, a child of
the caller's current span, with the attributes of OpenTelemetry's A2A conventions and the
client's own (``magisterium.*``); every request carries its W3C trace context.

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
from collections.abc import Awaitable, Mapping
from typing import Any
from urllib.parse import urlsplit

from magisterium_async import _version
from magisterium_async._errors import JSONRPCError, RateLimitError
from magisterium_async._models import Message, Task, TaskState

try:
    from opentelemetry import metrics as _metrics
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # the [otel] extra is not installed: telemetry is off
    _trace = None  # type: ignore[assignment]
    _metrics = None  # type: ignore[assignment]
    _propagate = None  # type: ignore[assignment]

__all__ = ["NO_OBSERVER", "CallObserver", "Telemetry", "error_type", "with_trace_context"]

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

    def retrying(self, attempt: int, reason: str) -> None:
        """The call is tried again: ``attempt`` is the retry's number, ``reason`` why."""

    async def traced(self, work: Awaitable[Task]) -> Task:
        """``await work`` inside the call's span; here, there is none."""
        return await work


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
    if _trace is None or not _trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier = dict(headers)
    _propagate.inject(carrier)
    return carrier


class _Instruments:
    """The client's three metrics, made once per meter."""

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


class _CallRecord(CallObserver):
    """One watched call: its span (if traced) and the counts that end up on it."""

    __slots__ = ("_labels", "attempts", "instruments", "span", "waited")

    def __init__(self, span: Any, instruments: _Instruments | None, pool: str) -> None:
        self.span = span
        self.instruments = instruments
        self._labels = {"pool": pool}
        self.attempts = 0
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

    def retrying(self, attempt: int, reason: str) -> None:
        if self.span is not None:
            self.span.add_event("magisterium.retry", {"attempt": attempt, "reason": reason})

    async def traced(self, work: Awaitable[Task]) -> Task:
        """``await work`` with the span current (so requests carry it), then end the span."""
        scope = (
            _trace.use_span(self.span, record_exception=False, set_status_on_exception=False)
            if self.span is not None
            else contextlib.nullcontext()
        )
        with scope:
            try:
                task = await work
            except BaseException as error:
                self.finish(None, error)
                raise
        self.finish(task, None)
        return task

    def finish(self, task: Task | None, error: BaseException | None) -> None:
        if self.instruments is not None:
            self.instruments.quota_wait.record(self.waited, self._labels)
        span = self.span
        if span is None:
            return
        span.set_attribute("magisterium.attempts", self.attempts)
        span.set_attribute("magisterium.quota.wait", self.waited)
        failure: str | None = None
        if task is not None:
            span.set_attribute("a2a.task.id", task.id)
            span.set_attribute("a2a.task.state", task.state)
            span.set_attribute("gen_ai.conversation.id", task.context_id)
            if task.state == TaskState.FAILED:
                failure = "TaskFailedError"
        if error is not None:
            failure = error_type(error)
        if failure is not None:
            span.set_attribute("error.type", failure)
            span.set_status(Status(StatusCode.ERROR, failure))
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
        return f"<Telemetry {'available' if _trace is not None else 'not installed'}>"

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

    def observe(self, method: str, pool: str, params: Any) -> CallObserver:
        """The observer of one call starting now: its span is started here when anyone
        listens; else :data:`NO_OBSERVER`, and nothing is made."""
        if _trace is None:
            return NO_OBSERVER
        tracer = self._current_tracer()
        instruments = self._current_instruments()
        if tracer is None and instruments is None:
            return NO_OBSERVER
        span = None
        if tracer is not None:
            attributes = {
                "a2a.method.name": method,
                "magisterium.pool": pool,
                **self._server,
                **self._agent,
                **_request_attributes(params),
            }
            span = tracer.start_span(method, kind=SpanKind.CLIENT, attributes=attributes)
        return _CallRecord(span, instruments, pool)


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
