"""OpenTelemetry: a subscriber of the client's event stream, one CLIENT span and a few
metrics per protocol call, when asked for (what each holds: ``docs/observability.md``).

A protocol call (its ``call_started`` to its ``call_ended`` event) is a span, current while
the call runs, so every request carries its W3C trace context (:func:`with_trace_context`);
its ``sent``, ``answered`` and ``retried`` events add to it. Without the ``[otel]`` extra,
or with no provider configured (OpenTelemetry's proxy or no-op one), a call starts nothing
here and nothing is made or emitted. Nothing secret or typed by a user goes into a span.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from magisterium_async import _version
from magisterium_async._events import AnswerEvent, CallEvent, PoolEvent, RetryEvent, error_type
from magisterium_async._models import Message, Task, TaskState
from magisterium_async._skills import DEFAULT_SKILL_ID

# OpenTelemetry's API, loaded by _in_use() once the application has imported it.
_trace: Any = None
_metrics: Any = None
_propagate: Any = None
_context: Any = None


def _in_use() -> bool:
    """Whether OpenTelemetry may be listening: only once the application has imported it
    (a provider can only be set, or handed to the client, that way). Until then it is not
    loaded here: a program that does not use it neither imports it (some 9,000 objects,
    and entry points read at import) nor pays for it in each call."""
    global _trace, _metrics, _propagate, _context
    if _trace is None:
        if "opentelemetry.trace" not in sys.modules and "opentelemetry.metrics" not in sys.modules:
            return False
        try:
            from opentelemetry import context, metrics, propagate, trace
        except ImportError:  # a partial installation: telemetry stays off
            return False
        _trace, _metrics, _propagate, _context = trace, metrics, propagate, context
    return True


_NAME = "magisterium_async"
# What OpenTelemetry's getters return while no provider is configured.
_NO_PROVIDERS = (
    "ProxyTracerProvider",
    "NoOpTracerProvider",
    "_ProxyMeterProvider",
    "NoOpMeterProvider",
)


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


@dataclass(slots=True)
class _Call:
    """One watched call: its span (if traced), the context that makes it current, and the
    counts that end up on it."""

    span: Any
    instruments: _Instruments | None
    labels: dict[str, str]
    attempts: int = 0
    retries: int = 0
    waited: float = 0.0
    attached: object = None  # the token of the context the span is current in


_CALL: ContextVar[_Call | None] = ContextVar("magisterium_async_call", default=None)


class Telemetry:
    """The stream's OpenTelemetry subscriber: providers given, or the global ones, looked
    up at each call's start."""

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
        # Per kind: the provider last seen, and its tracer (or instruments), or None.
        self._providers: dict[str, tuple[Any, Any]] = {}
        self._agent: dict[str, str] = {}

    def know_agent(self, name: str, version: str | None) -> None:
        """The agent card's name and version: on every span from now on."""
        self._agent = {"gen_ai.agent.name": name}
        if version is not None:
            self._agent["gen_ai.agent.version"] = version

    def __call__(self, event: PoolEvent) -> None:
        if isinstance(event, CallEvent) and event.kind == "call_started":
            self._start(event)
            return
        call = _CALL.get()
        if call is None:
            return
        if isinstance(event, CallEvent):  # call_ended
            self._end(call, event)
        elif event.kind == "sent":
            call.attempts += 1
            call.waited += max(event.value, 0.0)
        elif isinstance(event, AnswerEvent):
            self._answered(call, event)
        elif isinstance(event, RetryEvent):
            call.retries += 1
            if call.span is not None:
                attributes = {"attempt": call.retries, "reason": event.reason}
                call.span.add_event("magisterium.retry", attributes)

    def _start(self, event: CallEvent) -> None:
        if not _in_use():
            return
        tracer = self._made(
            "tracer",
            self._tracer_provider or _trace.get_tracer_provider(),
            lambda provider: provider.get_tracer(_NAME, _version.__version__),
        )
        instruments = self._made(
            "instruments",
            self._meter_provider or _metrics.get_meter_provider(),
            lambda provider: _Instruments(provider.get_meter(_NAME, _version.__version__)),
        )
        if tracer is None and instruments is None:
            return
        span = attached = None
        if tracer is not None:
            attributes = {
                "a2a.method.name": event.method,
                "magisterium.pool": event.pool,
                **self._server,
                **self._agent,
                **_request_attributes(event.params),
            }
            span = tracer.start_span(
                event.method, kind=_trace.SpanKind.CLIENT, attributes=attributes
            )
            attached = _context.attach(_trace.set_span_in_context(span))
        # Calls never nest in one task: call_ended sets None back.
        _CALL.set(_Call(span, instruments, {"pool": event.pool}, attached=attached))

    def _answered(self, call: _Call, event: AnswerEvent) -> None:
        if event.outcome == "rate_limited":
            if call.span is not None:
                # The wait the service gave, in seconds; none when it gave none usable.
                wait = event.retry_after
                call.span.add_event(
                    "magisterium.rate_limited", {} if wait is None else {"retry_after": wait}
                )
            if call.instruments is not None:
                call.instruments.rate_limited.add(1, call.labels)
        if call.instruments is not None:
            call.instruments.requests.add(1, {**call.labels, "outcome": event.outcome})

    def _end(self, call: _Call, event: CallEvent) -> None:
        _CALL.set(None)
        sent_nothing = event.cache in ("hit", "coalesced")
        instruments = call.instruments
        if instruments is not None:
            if not sent_nothing:
                instruments.quota_wait.record(call.waited, call.labels)
            if event.cache is not None:
                skill = _request_attributes(event.params).get("magisterium.skill.id")
                labels = {"skill": skill or DEFAULT_SKILL_ID, "outcome": event.cache}
                instruments.cache.add(1, labels)
        span = call.span
        if span is None:
            return
        if call.attached is not None:
            _context.detach(call.attached)
        span.set_attribute("magisterium.attempts", call.attempts)
        if not sent_nothing:
            span.set_attribute("magisterium.quota.wait", call.waited)
        if event.cache is not None:
            span.set_attribute("magisterium.cache", event.cache)
        failure: str | None = None
        task = event.result
        if isinstance(task, Task):
            span.set_attribute("a2a.task.id", task.id)
            span.set_attribute("a2a.task.state", task.state)
            span.set_attribute("gen_ai.conversation.id", task.context_id)
            if task.state == TaskState.FAILED:
                failure = "TaskFailedError"
        if event.error is not None:
            failure = error_type(event.error)
        if failure is not None:
            span.set_attribute("error.type", failure)
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, failure))
        span.end()

    def _made(self, what: str, provider: Any, make: Callable[[Any], Any]) -> Any:
        """What ``make`` makes of ``provider``, once per provider; ``None`` while no
        provider is configured."""
        seen, made = self._providers.get(what, (None, None))
        if provider is not seen:
            made = None
            if provider is not None and type(provider).__name__ not in _NO_PROVIDERS:
                made = make(provider)
            self._providers[what] = (provider, made)
        return made


def _request_attributes(params: Any) -> dict[str, str]:
    """What the request says about itself that may go on a span: ids, never text."""
    message = getattr(params, "message", None)
    if isinstance(message, Message):
        metadata = message.metadata or {}
        skill = metadata.get("skillId")
        found = {"magisterium.skill.id": skill if isinstance(skill, str) else DEFAULT_SKILL_ID}
        if message.context_id is not None:
            found["gen_ai.conversation.id"] = message.context_id
        return found
    if isinstance(params, Mapping) and isinstance(params.get("id"), str):
        return {"a2a.task.id": params["id"]}
    return {}
