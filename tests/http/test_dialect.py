"""The two dialects behind one API: which one is spoken, when the card is read, what each
sends, and that results and errors read the same whichever carried them."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec
import pytest

import magisterium_async as m
from magisterium_async._http import V03, V10, Dialect, offered
from magisterium_async.testing import (
    Emulator,
    EmulatorConfig,
    MockRequest,
    MockResponse,
    MockTransport,
)

TOKEN = "mock-token-0123456789"
BASE = "https://a2a.example/api/v1/a2a"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
V1_TASK = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": "2026-03-19T10:00:00.000Z",
    },
    "artifacts": [
        {
            "artifactId": "a-1",
            "name": "document",
            "parts": [{"text": "The text."}, {"data": {"id": "7", "title": "T"}}],
        }
    ],
    "history": [
        {
            "messageId": "m-1",
            "role": "ROLE_USER",
            "parts": [{"data": {"id": "7"}}],
            "metadata": {"skillId": "document_fetch"},
        },
        {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "T"}]},
    ],
}
V1_CARD = {
    "name": "A 1.0 agent",
    "supportedInterfaces": [
        {"url": BASE, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ],
    "version": "1",
    "capabilities": {"streaming": False, "extendedAgentCard": False},
    "skills": [],
}
V03_CARD = {"name": "A 0.3 agent", "url": BASE, "protocolVersion": "0.3.0", "skills": []}


def client_for(handler: Callable[[MockRequest], Any], **kwargs: Any) -> m.AsyncMagisterium:
    kwargs.setdefault("max_retries", 0)
    return m.AsyncMagisterium(
        token=TOKEN,
        base_url=BASE,
        rate_limits=m.RateLimits.unlimited(),
        transport=MockTransport(handler),
        **kwargs,
    )


def sent(client: m.AsyncMagisterium) -> list[MockRequest]:
    http = client._caller.rpc.http
    assert isinstance(http, MockTransport)
    return list(http.requests)


def pure_v1(card: dict[str, Any] | None = V1_CARD) -> Callable[[MockRequest], MockResponse]:
    """A server of A2A 1.0 alone, as a2a-sdk 1.3 is without its compat layer."""

    def handler(request: MockRequest) -> MockResponse:
        if request.method == "GET":
            if card is None or request.url.endswith("/agent.json"):
                return MockResponse(status=404, content="not here")
            return MockResponse(json=card)
        method = request.json["method"]
        if method not in ("SendMessage", "GetTask", "CancelTask", "ListTasks"):
            return MockResponse.error(request, -32601, "Method not found")
        if request.headers.get("A2A-Version") != "1.0":
            info = {"@type": ERROR_INFO, "reason": "VERSION_NOT_SUPPORTED", "metadata": {}}
            return MockResponse.error(request, -32009, "Version not supported", [info])
        if method == "SendMessage":
            return MockResponse.result(request, {"task": V1_TASK})
        if method == "ListTasks":
            page = {"tasks": [V1_TASK], "nextPageToken": "", "pageSize": 50, "totalSize": 1}
            return MockResponse.result(request, page)
        return MockResponse.result(request, V1_TASK)

    return handler


# Today's service costs nothing more ------------------------------------------------------


class Counter:
    """Every HTTP request the client makes, by method, through aiohttp's tracing."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.config = aiohttp.TraceConfig()
        self.config.on_request_start.append(self._start)

    async def _start(self, session: Any, context: Any, params: Any) -> None:
        self.requests.append((params.method, str(params.url), dict(params.headers)))


async def test_a_call_to_todays_service_is_one_post_and_nothing_more() -> None:
    counter = Counter()
    async with (
        Emulator(EmulatorConfig(rate_limits=None)) as emulator,
        m.AsyncMagisterium(
            token=emulator.token,
            base_url=emulator.base_url,
            rate_limits=m.RateLimits.unlimited(),
            trace_configs=[counter.config],
        ) as client,
    ):
        hits = await client.search("grace")
        assert await client.fetch(hits[0].id) is not None
        task = await client.get_task((await client.send_message("grace")).id)
        with pytest.raises(m.InvalidParamsError):
            await client.cancel_task(task.id)
        with pytest.raises(m.SkillNotFoundError):
            await client.send_message("x", skill_id="no_such_skill")
        with pytest.raises(m.TaskNotFoundError):
            await client.get_task("no-such-task")
        served = emulator.stats.total
    assert [method for method, _, _ in counter.requests] == ["POST"] * 7  # no card GET
    assert served == 7
    assert all("A2A-Version" not in headers for _, _, headers in counter.requests)
    assert {url for _, url, _ in counter.requests} == {emulator.base_url}
    assert client.protocol == "0.3"


async def test_a_failing_card_endpoint_never_breaks_todays_calls() -> None:
    def handler(request: MockRequest) -> MockResponse:
        if request.method == "GET":
            return MockResponse(status=503, content="card store down")
        method = request.json["method"]
        if method == "tasks/get":
            task = {**V1_TASK, "kind": "task", "status": {"state": "completed"}}
            return MockResponse.result(request, {**task, "artifacts": [], "history": []})
        return MockResponse.error(request, -32601, "Method not found")

    async with client_for(handler) as client:
        assert (await client.get_task("t-1")).state == "completed"
        with pytest.raises(m.MethodNotFoundError):  # the card could not say otherwise
            await client.cancel_task("t-1")
        assert client.protocol == "0.3"
        with pytest.raises(m.UnexpectedStatusError):  # list_tasks needs the card: its error
            await client.list_tasks()
    methods = [r.method for r in sent(client)]
    assert methods.count("POST") == 2


# Found from the card, no configuration ---------------------------------------------------


async def test_auto_finds_1_0_after_method_not_found_and_sends_again() -> None:
    async with client_for(pure_v1()) as client:
        document = await client.fetch("7")
        assert document is not None and (document.id, document.text) == ("7", "The text.")
        assert client.protocol == "1.0"
        await client.get_task("t-1")
    calls = [(r.method, r.json["method"] if r.json else r.url) for r in sent(client)]
    assert calls == [
        ("POST", "message/send"),
        ("GET", "https://a2a.example/.well-known/agent.json"),
        ("GET", "https://a2a.example/.well-known/agent-card.json"),
        ("POST", "SendMessage"),
        ("POST", "GetTask"),
    ]
    assert all(r.headers.get("A2A-Version") == "1.0" for r in sent(client)[3:])


async def test_auto_finds_1_0_after_version_not_supported() -> None:
    # A server that knows 0.3's names but serves only 1.0 refuses with -32009.
    v1 = pure_v1()

    def handler(request: MockRequest) -> MockResponse:
        if request.method == "POST" and request.json["method"] == "tasks/get":
            info = {"@type": ERROR_INFO, "reason": "VERSION_NOT_SUPPORTED", "metadata": {}}
            return MockResponse.error(request, -32009, "Version not supported", [info])
        return v1(request)

    async with client_for(handler) as client:
        assert (await client.get_task("t-1")).state == "completed"
    assert [r.json["method"] for r in sent(client) if r.method == "POST"] == [
        "tasks/get",
        "GetTask",
    ]


async def test_concurrent_refused_calls_read_the_card_once() -> None:
    async with client_for(pure_v1()) as client:
        import asyncio

        tasks = await asyncio.gather(*(client.get_task(f"t-{i}") for i in range(5)))
    assert len(tasks) == 5
    gets = [r for r in sent(client) if r.method == "GET"]
    assert len(gets) == 2  # agent.json (404), then agent-card.json, once


async def test_reading_the_card_picks_the_dialect_before_any_call() -> None:
    async with client_for(pure_v1()) as client:
        await client.agent_card()
        assert client.protocol == "1.0"
        await client.send_message("hello")
    assert [r.json["method"] for r in sent(client) if r.method == "POST"] == ["SendMessage"]


async def test_a_0_3_card_keeps_todays_dialect() -> None:
    def handler(request: MockRequest) -> MockResponse:
        if request.method == "GET":
            return MockResponse(json=V03_CARD)
        return MockResponse.error(request, -32601, "Method not found")

    async with client_for(handler) as client:
        with pytest.raises(m.MethodNotFoundError):
            await client.get_task("t-1")
        assert client.protocol == "0.3"
        with pytest.raises(m.NotSupportedError, match=r"names no A2A 1\.0 JSON-RPC interface"):
            await client.list_tasks()
    assert [r.method for r in sent(client)].count("POST") == 1


async def test_named_protocols_never_read_the_card() -> None:
    async with client_for(pure_v1(), protocol="1.0") as client:
        assert client.protocol == "1.0"
        await client.get_task("t-1")
        page = await client.list_tasks()
        assert [t.id for t in page.tasks] == ["t-1"] and page.next_page_token is None
    assert [r.method for r in sent(client)] == ["POST", "POST"]

    async with client_for(pure_v1(), protocol="0.3") as client:
        with pytest.raises(m.MethodNotFoundError):
            await client.get_task("t-1")
        with pytest.raises(m.NotSupportedError, match=r'protocol="0\.3"'):
            await client.list_tasks()
    assert [r.method for r in sent(client)] == ["POST"]

    with pytest.raises(ValueError, match="protocol must be one of"):
        m.AsyncMagisterium(token=TOKEN, protocol="2.0")  # type: ignore[arg-type]


async def test_the_extensions_header_in_each_dialect() -> None:
    for protocol, name in (("0.3", "X-A2A-Extensions"), ("1.0", "A2A-Extensions")):
        async with client_for(
            pure_v1(), protocol=protocol, extensions=["https://ext.example/a", "urn:b"]
        ) as client:
            try:
                await client.get_task("t-1")
            except m.MethodNotFoundError:
                assert protocol == "0.3"  # the pure 1.0 server knows no tasks/get
        (request,) = sent(client)
        assert request.headers[name] == "https://ext.example/a, urn:b"
    with pytest.raises(TypeError, match="extensions"):
        m.AsyncMagisterium(token=TOKEN, extensions="urn:b")


def test_offered_reads_both_card_shapes() -> None:
    def card(**fields: Any) -> m.AgentCard:
        return msgspec.json.decode(msgspec.json.encode({"name": "x", **fields}), type=m.AgentCard)

    assert offered(card(**V03_CARD), BASE) == V03
    assert offered(card(url=BASE, protocolVersion="0.2.6"), BASE) == V03
    assert offered(card(), BASE) == V03
    assert offered(card(supportedInterfaces=V1_CARD["supportedInterfaces"]), BASE) == V10
    both = [
        {"url": BASE, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": BASE + "/v1", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": BASE + "/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]
    chosen = offered(card(supportedInterfaces=both), BASE)
    assert (chosen.version, chosen.url) == ("1.0", BASE + "/v1")
    assert offered(card(supportedInterfaces=both[:2]), BASE) == V03
    assert offered(card(url=BASE, protocolVersion="1.0"), BASE) == V10
    tenant = [{"url": BASE, "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t"}]
    assert offered(card(supportedInterfaces=tenant), BASE) == Dialect("1.0", tenant="t")


@pytest.mark.parametrize(
    "url",
    [
        "https://elsewhere.example/api/v1/a2a",  # another origin: the token stays home
        "http://a2a.example/api/v1/a2a",  # plain http to a non-loopback host
        "not a url",
    ],
)
def test_offered_keeps_the_base_url_for_an_endpoint_it_may_not_use(url: str) -> None:
    interfaces = [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    decoded = msgspec.json.decode(
        msgspec.json.encode({"name": "x", "supportedInterfaces": interfaces}), type=m.AgentCard
    )
    assert offered(decoded, BASE) == V10  # 1.0, at the base URL


async def test_the_card_s_endpoint_and_tenant_are_used() -> None:
    card = {
        **V1_CARD,
        "supportedInterfaces": [
            {
                "url": "https://a2a.example/v1/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
                "tenant": "acme",
            }
        ],
    }
    async with client_for(pure_v1(card)) as client:
        await client.agent_card()
        await client.get_task("t-1")
    post = sent(client)[-1]
    assert post.url == "https://a2a.example/v1/rpc"
    assert post.json["params"] == {"id": "t-1", "tenant": "acme"}


# The 1.0 wire, both ways -----------------------------------------------------------------


async def test_1_0_requests_carry_parts_by_field() -> None:
    raw = base64.b64encode(b"%PDF").decode()
    parts: list[m.Part] = [
        m.TextPart(text="hello", metadata={"k": 1}),
        m.DataPart(data={"id": "7"}),
        m.FilePart(file=m.FileContent(name="a.pdf", mime_type="application/pdf", bytes=raw)),
        m.FilePart(file=m.FileContent(uri="https://x.example/b.txt")),
    ]
    async with client_for(pure_v1(), protocol="1.0") as client:
        await client.send_message(parts, skill_id="document_fetch", context_id="c-9")
    (request,) = sent(client)
    assert request.headers["A2A-Version"] == "1.0"
    body = request.json
    assert body["method"] == "SendMessage"
    message = body["params"]["message"]
    assert message["role"] == "ROLE_USER"
    assert (message["contextId"], message["metadata"]) == ("c-9", {"skillId": "document_fetch"})
    assert "kind" not in str(body)
    assert message["parts"] == [
        {"text": "hello", "metadata": {"k": 1}},
        {"data": {"id": "7"}},
        {"raw": raw, "filename": "a.pdf", "mediaType": "application/pdf"},
        {"url": "https://x.example/b.txt"},
    ]


async def test_1_0_results_read_as_0_3_ones() -> None:
    file_task = {
        **V1_TASK,
        "status": {"state": 6, "message": {"messageId": "q", "role": 2, "parts": [{"text": "?"}]}},
        "artifacts": [
            {
                "artifactId": "a",
                "parts": [
                    {"raw": "JVBERg==", "mediaType": "application/pdf", "filename": "a.pdf"},
                    {"url": "https://x.example/b", "mediaType": "text/plain"},
                ],
            }
        ],
    }

    def handler(request: MockRequest) -> MockResponse:
        return MockResponse.result(request, file_task)

    async with client_for(handler, protocol="1.0") as client:
        task = await client.get_task("t-1")
    assert task.state == m.TaskState.INPUT_REQUIRED  # protobuf's number 6
    assert task.status.message is not None and task.status.message.role == "agent"
    assert task.failure_reason == "?"
    raw, url = task.artifacts[0].parts
    assert isinstance(raw, m.FilePart) and isinstance(url, m.FilePart)
    assert (raw.file.bytes, raw.file.mime_type, raw.file.name) == (
        "JVBERg==",
        "application/pdf",
        "a.pdf",
    )
    assert (url.file.uri, url.file.mime_type, url.file.bytes) == (
        "https://x.example/b",
        "text/plain",
        None,
    )


async def test_every_skill_s_typed_result_is_the_same_in_both_dialects() -> None:
    results: dict[str, Any] = {}
    for protocol in ("0.2.6", "1.0"):
        config = EmulatorConfig(
            rate_limits=None, protocol=protocol, today=lambda: dt.date(2026, 3, 19)
        )
        async with (
            Emulator(config) as emulator,
            m.AsyncMagisterium(
                token=emulator.token,
                base_url=emulator.base_url,
                rate_limits=m.RateLimits.unlimited(),
            ) as client,
        ):
            answer = await client.ask("What is grace?")
            hits = await client.search("Lumen Gentium")
            document = await client.fetch(hits[0].id)
            results[protocol] = (
                answer.text,
                answer.citations,
                answer.related_questions,
                hits,
                document,
                await client.fetch("999999999"),
                await client.mass_readings("Easter Sunday 2026"),
                await client.saints(dt.date(2026, 3, 19)),
                await client.saints("the day after never"),
            )
            assert client.protocol == ("1.0" if protocol == "1.0" else "0.3")
            task = await client.get_task(answer.task.id)
            user = task.history[0]
            assert (user.role, user.text) == ("user", "What is grace?")
    assert results["0.2.6"] == results["1.0"]


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (
            {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": []}},
            "a message, not a task",
        ),
        ({}, "is not a SendMessage result"),
        ({"task": {**V1_TASK, "artifacts": [{"parts": [{"text": "a", "data": {}}]}]}}, "not one"),
        ({"task": {**V1_TASK, "artifacts": [{"parts": [{"data": [1]}]}]}}, "Expected `object`"),
        ({"task": {"contextId": "c"}}, "not an A2A 1.0 Task: Object missing required field `id`"),
        ([], "is not a SendMessage result"),
    ],
)
async def test_a_1_0_result_that_is_no_task_is_malformed(result: Any, problem: str) -> None:
    def handler(request: MockRequest) -> MockResponse:
        return MockResponse.result(request, result)

    async with client_for(handler, protocol="1.0") as client:
        with pytest.raises(m.MalformedResponseError, match="message/send: ") as caught:
            await client.send_message("hello")
    assert problem in str(caught.value)


# Errors: ErrorInfo's reason first ---------------------------------------------------------


def _error_handler(
    code: int, reason: str | None, metadata: dict[str, Any], status: int = 200, **extra: Any
) -> Callable[[MockRequest], MockResponse]:
    details: list[Any] = [dict(extra)] if extra else []
    if reason is not None:
        details.insert(0, {"@type": ERROR_INFO, "reason": reason, "metadata": metadata})

    def handler(request: MockRequest) -> MockResponse:
        return MockResponse.error(request, code, "said the server", details, status=status)

    return handler


@pytest.mark.parametrize(
    ("code", "reason", "status", "cls"),
    [
        (-32001, "TASK_NOT_FOUND", 200, m.TaskNotFoundError),
        (-32002, "TASK_NOT_CANCELABLE", 200, m.TaskNotCancelableError),
        (-32002, "SKILL_NOT_FOUND", 200, m.SkillNotFoundError),
        (-32004, "UNSUPPORTED_OPERATION", 200, m.JSONRPCError),  # generic A2A: no auth error
        (-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 200, m.JSONRPCError),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED", 200, m.JSONRPCError),
        (-32004, "UNAUTHENTICATED", 401, m.AuthenticationError),
        (-32005, "PAID_PLAN_REQUIRED", 403, m.PlanRequiredError),
        (-32602, "INVALID_PARAMS", 200, m.InvalidParamsError),
        (-32009, "VERSION_NOT_SUPPORTED", 200, m.VersionNotSupportedError),
        (-32002, "SOMETHING_NEW", 200, m.SkillNotFoundError),  # unknown reason: the code
        (-32002, None, 200, m.SkillNotFoundError),
    ],
)
async def test_1_0_errors_map_by_reason(
    code: int, reason: str | None, status: int, cls: type[m.JSONRPCError]
) -> None:
    async with client_for(_error_handler(code, reason, {}, status), protocol="1.0") as client:
        with pytest.raises(m.JSONRPCError) as caught:
            await client.send_message("hello", skill_id="document_search")
    assert type(caught.value) is cls
    assert (caught.value.code, caught.value.reason) == (code, reason)
    assert isinstance(caught.value.data, list)  # kept as sent


async def test_1_0_error_metadata_reads_as_0_3_data() -> None:
    handler = _error_handler(-32002, "SKILL_NOT_FOUND", {"skillId": "nope"})
    async with client_for(handler, protocol="1.0") as client:
        with pytest.raises(m.SkillNotFoundError) as skill:
            await client.send_message("hello", skill_id="other")
    assert skill.value.skill_id == "nope"

    for metadata, extra in (
        ({"retryAfter": "7"}, {}),
        ({}, {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}),
    ):
        handler = _error_handler(-32003, "RATE_LIMIT_EXCEEDED", metadata, 429, **extra)
        async with client_for(
            handler, protocol="1.0", retry_policy=m.RetryPolicy(max_retries=0, rate_limit_budget=1)
        ) as client:
            with pytest.raises(m.RateLimitError) as limited:
                await client.search("grace")
        assert limited.value.retry_after == 7.0
        assert limited.value.reason == "RATE_LIMIT_EXCEEDED"
