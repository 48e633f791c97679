"""OpenTelemetry: a CLIENT span and metrics per protocol call, trace context on the wire,
and nothing at all when no provider is configured."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import typing
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import magisterium_async as m
from magisterium_async.testing import (
    Emulator,
    Fault,
    MockRequest,
    MockResponse,
    MockTransport,
    VirtualClock,
)

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from magisterium_async._events import Topic

QUERY = "the secret query of a user"
FAST = m.RetryPolicy(initial_backoff=0.001, max_backoff=0.001, min_retry_after=0.001)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


@pytest.fixture
async def client(
    magisterium_emulator: Emulator, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> AsyncIterator[m.AsyncMagisterium]:
    emulator = magisterium_emulator
    async with m.AsyncMagisterium(
        token=emulator.token,
        base_url=emulator.base_url,
        rate_limits=m.RateLimits.unlimited(),
        retry_policy=FAST,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    ) as c:
        yield c


def client_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]


async def test_one_client_span_per_call_child_of_the_callers_span(
    client: m.AsyncMagisterium,
    magisterium_emulator: Emulator,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("caller") as caller:
        await client.search(QUERY)
        sent = await client.send_message("x", skill_id="document_search")
        task = await client.get_task(sent.id)
    spans = client_spans(exporter)
    assert [s.name for s in spans] == ["message/send", "message/send", "tasks/get"]
    for span in spans:
        assert span.parent is not None
        assert span.parent.span_id == caller.get_span_context().span_id
        assert span.context.trace_id == caller.get_span_context().trace_id
        assert span.status.status_code is StatusCode.UNSET
    search = dict(spans[0].attributes or {})
    assert search["a2a.method.name"] == "message/send"
    assert search["magisterium.skill.id"] == "document_search"
    assert search["magisterium.pool"] == "default"
    assert search["magisterium.attempts"] == 1
    assert search["magisterium.quota.wait"] >= 0.0
    assert search["a2a.task.state"] == "completed"
    assert search["a2a.task.id"] and search["gen_ai.conversation.id"]
    assert search["server.address"] == "127.0.0.1"
    assert search["server.port"] == magisterium_emulator.port
    get = dict(spans[2].attributes or {})
    assert get["a2a.task.id"] == task.id
    assert get["magisterium.pool"] == "unmetered"
    assert "magisterium.skill.id" not in get


async def test_the_agent_card_names_the_agent_on_later_spans(
    client: m.AsyncMagisterium, exporter: InMemorySpanExporter
) -> None:
    card = await client.agent_card()
    await client.search("grace")
    attributes = dict(client_spans(exporter)[-1].attributes or {})
    assert attributes["gen_ai.agent.name"] == card.name
    assert attributes["gen_ai.agent.version"] == card.version


async def test_a_failed_call_is_an_error_with_its_type(
    client: m.AsyncMagisterium, exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(m.TaskNotFoundError):
        await client.get_task("no-such-task")
    with pytest.raises(m.TaskFailedError):
        await client.search("__fail__: index offline")
    lost, failed = client_spans(exporter)
    assert lost.status.status_code is StatusCode.ERROR
    assert (lost.attributes or {})["error.type"] == "-32001"
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["a2a.task.state"] == "failed"


async def test_a_call_that_times_out_waiting_for_its_turn_has_its_error_span(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    clock = VirtualClock()

    def answer(request: MockRequest) -> MockResponse:
        return MockResponse.result(request, _task())

    async with m.AsyncMagisterium(
        token="t",
        base_url="https://a2a.example/api",
        clock=clock,
        transport=MockTransport(answer),
        retry_policy=m.RetryPolicy(total_timeout=30.0),
        rate_limits=m.RateLimits(1, 1, period=120.0),
        tracer_provider=tracer_provider,
    ) as client:
        # Calls the cache may share (a search), as they come back: a Task each.
        first = asyncio.ensure_future(client.send_message("a", skill_id="document_search"))
        second = asyncio.ensure_future(client.send_message("b", skill_id="document_search"))
        await clock.run_until_idle()
        await first
        with pytest.raises(m.APITimeoutError):
            await second
    sent, timed_out = client_spans(exporter)
    assert sent.status.status_code is StatusCode.UNSET
    assert timed_out.status.status_code is StatusCode.ERROR
    assert (timed_out.attributes or {})["error.type"] == "APITimeoutError"
    assert timed_out.end_time is not None and timed_out.start_time is not None
    assert timed_out.end_time - timed_out.start_time >= 0


async def test_a_429_and_a_retry_are_events_and_attempts(
    client: m.AsyncMagisterium,
    magisterium_emulator: Emulator,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    magisterium_emulator.script(Fault.rate_limit(retry_after=0.001), Fault.http_502())
    await client.search("grace")
    (span,) = client_spans(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["magisterium.attempts"] == 3
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        ("magisterium.rate_limited", {"retry_after": 0.001}),
        ("magisterium.retry", {"attempt": 1, "reason": "rate_limited"}),
        ("magisterium.retry", {"attempt": 2, "reason": "UnexpectedStatusError"}),
    ]
    assert span.status.status_code is StatusCode.UNSET
    metrics = _metrics(reader)
    assert metrics["magisterium.client.requests"] == {
        (("outcome", "error"), ("pool", "default")): 1,
        (("outcome", "ok"), ("pool", "default")): 1,
        (("outcome", "rate_limited"), ("pool", "default")): 1,
    }
    assert metrics["magisterium.client.rate_limited"] == {(("pool", "default"),): 1}
    assert metrics["magisterium.client.quota.wait"] == {(("pool", "default"),): 1}


def _metrics(reader: InMemoryMetricReader) -> dict[str, dict[tuple[Any, ...], Any]]:
    """Each metric's points: a counter's value, a histogram's count, by sorted labels."""
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, dict[tuple[Any, ...], Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "magisterium_async"
            for metric in scope.metrics:
                points = found.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    key = tuple(sorted((point.attributes or {}).items()))
                    points[key] = getattr(point, "value", None) or getattr(point, "count", None)
    return found


async def test_no_token_or_user_text_in_any_span(
    client: m.AsyncMagisterium, magisterium_emulator: Emulator, exporter: InMemorySpanExporter
) -> None:
    emulator = magisterium_emulator
    emulator.script(Fault.rate_limit(retry_after=0.001))
    await client.search(QUERY)
    with pytest.raises(m.TaskFailedError):
        await client.search(f"__fail__: {QUERY}")
    spans = exporter.get_finished_spans()
    assert spans
    dumped = "\n".join(s.to_json() for s in spans)
    assert emulator.token not in dumped
    assert "secret query" not in dumped


# Trace context on the wire ----------------------------------------------------------


async def test_the_server_sees_the_callers_trace_on_every_request(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("traceparent"))
        if request.method == "GET":
            return web.json_response({"name": "agent", "version": "1"})
        body = await request.json()
        if len(seen) == 1:  # the first call's first attempt: rate limited
            error = {"code": -32003, "message": "Rate limit", "data": {"retryAfter": 0.001}}
            return web.json_response(
                {"jsonrpc": "2.0", "id": body["id"], "error": error}, status=429
            )
        task = {"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "completed"}}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": task})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    async with TestServer(app, host="127.0.0.1") as server:
        base_url = str(server.make_url("/a2a"))
        tracer = tracer_provider.get_tracer("app")
        async with m.AsyncMagisterium(
            token="t",
            base_url=base_url,
            retry_policy=FAST,
            rate_limits=m.RateLimits.unlimited(),
            tracer_provider=tracer_provider,
        ) as client:
            with tracer.start_as_current_span("caller") as caller:
                await client.get_task("t1")
                await client.send_message("x", skill_id="document_search")
                await client.agent_card()
    trace_id = f"{caller.get_span_context().trace_id:032x}"
    assert len(seen) == 4
    assert all(header is not None and header.split("-")[1] == trace_id for header in seen)
    spans = {s.name: s for s in client_spans(exporter)}
    # The two attempts of tasks/get carry its span, the message/send request its own.
    first = f"{spans['tasks/get'].context.span_id:016x}"
    assert [h.split("-")[2] for h in seen[:2] if h] == [first, first]
    assert seen[2] and seen[2].split("-")[2] == f"{spans['message/send'].context.span_id:016x}"


# Nothing without a provider, or without the extra ------------------------------------


async def test_without_a_provider_nothing_is_made_or_sent() -> None:
    # The global providers are OpenTelemetry's proxies here: nothing configured them.
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    transport = MockTransport(lambda r: MockResponse.result(r, _task()))
    current: list[bool] = []

    def watch(event: m.PoolEvent) -> None:  # what is current while the call runs
        current.append(trace.get_current_span().get_span_context().is_valid)

    async with m.AsyncMagisterium(
        token="t", base_url="https://a2a.example/api", transport=transport, on_event=watch
    ) as client:
        await client.get_task("t1")
    assert current and not any(current)  # no span was made, nor made current
    assert "traceparent" not in transport.requests[0].headers


def _task() -> dict[str, Any]:
    return {"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "completed"}}


_SCRIPT = """
import asyncio, json, sys
{before}
import magisterium_async as m
from magisterium_async.testing import MockResponse, MockTransport

async def main():
    task = {task}
    transport = MockTransport(lambda r: MockResponse.result(r, task))
    async with m.AsyncMagisterium(
        token="t", base_url="https://a2a.example/api", transport=transport
    ) as client:
{calls}
    print(json.dumps([r.headers.get("traceparent") is not None for r in transport.requests]))

asyncio.run(main())
"""


def _run(before: str, calls: str) -> list[str]:
    """Run calls through a client of a MockTransport in a fresh interpreter, ``before``
    run first; its output lines, the last one saying which requests had a traceparent."""
    script = _SCRIPT.format(
        before=textwrap.dedent(before),
        task=repr(_task()),
        calls=textwrap.indent(textwrap.dedent(calls), " " * 8),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_client_works_without_the_extra() -> None:
    out = _run(
        'sys.modules["opentelemetry"] = None  # as if the [otel] extra were not installed',
        """
        print((await client.get_task("t1")).id)
        """,
    )
    assert out == ["t1", "[false]"]


def test_a_program_that_does_not_import_opentelemetry_does_not_load_it() -> None:
    out = _run(
        "",
        """
        await client.get_task("t1")
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """,
    )
    assert out == ["[]", "[false]"]


_IMPORT_SDK = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
"""


@pytest.mark.parametrize("imported", ["before the client", "after its first call"])
def test_the_global_provider_is_used_once_configured(imported: str) -> None:
    early = imported == "before the client"
    out = _run(
        _IMPORT_SDK if early else "",
        'await client.get_task("t1")  # no provider yet: no span\n'
        + ("" if early else _IMPORT_SDK)
        + """
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
await client.get_task("t1")
print(json.dumps([s.name for s in exporter.get_finished_spans()]))
""",
    )
    assert out == ['["tasks/get"]', "[false, true]"]


# Logging: one tree, documented ---------------------------------------------------------


def test_every_logger_is_in_the_tree_and_in_the_readme_table() -> None:
    # The README's table, or the table of the docs page of a logger's topic.
    root = Path(m.__file__).parent
    used = {
        name
        for path in root.rglob("*.py")
        for name in re.findall(r'getLogger\("([^"]+)"\)', path.read_text(encoding="utf-8"))
    } | {f"magisterium_async.{topic}" for topic in typing.get_args(Topic)}
    pages = [root.parent / "README.md", *sorted((root.parent / "docs").glob("*.md"))]
    tables = "".join(page.read_text(encoding="utf-8") for page in pages)
    documented = set(re.findall(r"^\| `(magisterium_async[\w.]*)` \|", tables, re.M))
    assert used and all(f"{n}.".startswith("magisterium_async.") for n in used)
    assert used == documented
