"""The call path: a refused token renewed once, the resend in a slot of its own."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable

import pytest

import magisterium_async as m
from magisterium_async._calls import Calls
from magisterium_async._config import DEFAULT_CALL_OPTIONS, DEFAULT_RETRY_POLICY
from magisterium_async._http._jsonrpc import Transport
from magisterium_async._message import SendParams
from magisterium_async._ratelimit import Scheduler
from magisterium_async._telemetry import Telemetry
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock
from tests.conftest import task_json

URL = "http://127.0.0.1:1/a2a"


class Tokens:
    """A token source that has a new token ready after each refusal (``renews``)."""

    identity = "test"

    def __init__(self, renews: bool = True) -> None:
        self.current = "old"
        self.renews = renews
        self.refused: list[str] = []

    async def token(self) -> str:
        return self.current

    async def rejected(self, token: str) -> bool:
        self.refused.append(token)
        if self.renews:
            self.current = "new"
        return self.renews

    async def aclose(self) -> None:
        return None


def refusing(*refused: str) -> MockTransport:
    def answer(request: MockRequest) -> MockResponse:
        if request.headers["Authorization"].removeprefix("Bearer ") in refused:
            return MockResponse.error(request, -32004, "Unauthorized", status=401)
        return MockResponse.result(request, task_json())

    return MockTransport(answer)


def calls_over(http: MockTransport, tokens: Tokens) -> tuple[Calls, Scheduler]:
    clock = VirtualClock()
    scheduler = Scheduler(m.RateLimits.unlimited(), max_concurrency=4, clock=clock)
    transport = Transport(URL, None, max_concurrency=4, connect_timeout=5.0, clock=clock, http=http)
    return Calls(transport, scheduler, clock, tokens, Telemetry(URL)), scheduler


async def call(calls: Calls) -> m.Task:
    return await calls.rpc(
        "tasks/get",
        {"id": "t"},
        "default",
        timeout=5.0,
        policy=DEFAULT_RETRY_POLICY,
        options=DEFAULT_CALL_OPTIONS,
    )


async def test_the_resend_after_a_renewed_token_takes_a_slot_the_pool_counts() -> None:
    http, tokens = refusing("old"), Tokens()
    calls, scheduler = calls_over(http, tokens)
    task = await call(calls)
    assert task.id == "task-1"
    assert [r.headers["Authorization"] for r in http.requests] == ["Bearer old", "Bearer new"]
    assert tokens.refused == ["old"]
    stats = scheduler.stats.default
    assert (stats.sent, stats.retries) == (2, 0)  # seen by the pool; not a retry


async def test_a_renewed_token_refused_again_is_final() -> None:
    http, tokens = refusing("old", "new"), Tokens()
    calls, scheduler = calls_over(http, tokens)
    with pytest.raises(m.AuthenticationError):
        await call(calls)
    assert len(http.requests) == 2 and tokens.refused == ["old"]
    assert scheduler.stats.default.sent == 2


async def test_no_resend_when_the_source_has_no_new_token() -> None:
    http, tokens = refusing("old"), Tokens(renews=False)
    calls, scheduler = calls_over(http, tokens)
    with pytest.raises(m.AuthenticationError):
        await call(calls)
    assert len(http.requests) == 1 and scheduler.stats.default.sent == 1


async def test_a_waiting_call_keeps_its_params_encoded_and_every_try_sends_the_same() -> None:
    gate = asyncio.Event()
    answers = iter([503, 200])

    async def answer(request: MockRequest) -> MockResponse:
        await gate.wait()
        status = next(answers, 200)
        if status != 200:
            return MockResponse(status=status, content=b"busy")
        return MockResponse.result(request, task_json())

    http = MockTransport(answer)
    clock = VirtualClock()
    scheduler = Scheduler(m.RateLimits.unlimited(), max_concurrency=1, clock=clock)
    transport = Transport(URL, None, max_concurrency=1, connect_timeout=5.0, clock=clock, http=http)
    calls = Calls(transport, scheduler, clock, None, Telemetry(URL))

    def send(text: str) -> Awaitable[m.Task]:
        message = m.Message(role="user", parts=[m.TextPart(text=text)], message_id=text)
        return calls.rpc(
            "message/send",
            SendParams(message),
            "default",
            timeout=5.0,
            policy=m.RetryPolicy(max_retries=1),
            options=DEFAULT_CALL_OPTIONS,
        )

    pending = [asyncio.ensure_future(send(f"waiting-{i}")) for i in range(50)]
    for _ in range(5):
        await asyncio.sleep(0)
    # Fifty calls made, one in flight and the rest waiting: none keeps its message object.
    kept = [o for o in gc.get_objects() if isinstance(o, m.Message)]
    assert not [o for o in kept if o.message_id.startswith("waiting-")]
    gate.set()
    await clock.run_until_idle()  # the 503's backoff, in virtual time
    await asyncio.gather(*pending)
    first_call = "waiting-0"
    tries = [
        r.content for r in http.requests if r.json["params"]["message"]["messageId"] == first_call
    ]
    assert len(tries) == 2  # the 503, then its retry
    first, retried = (json.loads(t) for t in tries)
    assert first["params"] == retried["params"] and first["id"] != retried["id"]
