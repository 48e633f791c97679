"""Shared fixtures: a scripted JSON-RPC server on 127.0.0.1 and helpers to build answers."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.helpers.redis_server import RedisServer, ci, redis_unavailable
from tests.helpers.refresh_log import RefreshLog, counted_refreshes

TOKEN = "sk-test-0123456789abcdef"


CARD = {  # an agent card as the service serves it
    "name": "Magisterium AI",
    "version": "1.0",
    "protocolVersion": "0.3.0",
    "url": "https://www.magisterium.com/api/v1/a2a",
    "skills": [{"id": "catholic_qa", "name": "Q&A", "description": "Ask", "tags": []}],
    "capabilities": {"streaming": False},
}


def task_json(
    *,
    artifacts: list[dict[str, Any]] | None = None,
    state: str = "completed",
    reason: str | None = None,
    task_id: str = "task-1",
    context_id: str = "ctx-1",
) -> dict[str, Any]:
    """A Task in the service's wire shape."""
    status: dict[str, Any] = {"state": state}
    if reason is not None:
        status["message"] = {
            "role": "agent",
            "kind": "message",
            "messageId": "m-2",
            "parts": [{"kind": "text", "text": reason}],
        }
    return {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": status,
        "artifacts": artifacts or [],
        "history": [],
    }


def artifact(name: str, *parts: dict[str, Any]) -> dict[str, Any]:
    """An artifact with the given parts."""
    return {"artifactId": f"a-{name}", "name": name, "parts": list(parts)}


def text(value: str) -> dict[str, Any]:
    """A text part."""
    return {"kind": "text", "text": value}


def data(value: dict[str, Any]) -> dict[str, Any]:
    """A data part."""
    return {"kind": "data", "data": value}


@dataclass
class Reply:
    """One scripted answer: an HTTP status and a body (a dict is sent as JSON)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hang: bool = False


Responder = Callable[[dict[str, Any]], Reply]


class ScriptedServer:
    """A JSON-RPC endpoint that answers from a script and records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: list[Reply | Responder] = []
        self.default: Responder | None = None
        self.extra_routes: dict[str, Callable[[web.Request], web.StreamResponse]] = {}
        self.server: TestServer | None = None
        self.hang_forever: Any = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("/api/v1/a2a"))

    def reply(self, *replies: Reply | Responder) -> None:
        """Queue answers, used in order; after them :attr:`default` answers."""
        self.script.extend(replies)

    def result(self, result: dict[str, Any]) -> Responder:
        """A responder echoing the request id with ``result``."""
        return lambda req: Reply(body={"jsonrpc": "2.0", "id": req.get("id"), "result": result})

    def error(self, code: int, message: str, data: Any = None, status: int = 200) -> Responder:
        """A responder answering a JSON-RPC error."""

        def respond(req: dict[str, Any]) -> Reply:
            err: dict[str, Any] = {"code": code, "message": message}
            if data is not None:
                err["data"] = data
            return Reply(status=status, body={"jsonrpc": "2.0", "id": req.get("id"), "error": err})

        return respond

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = {"_raw": raw.decode("utf-8", "replace")}
        self.requests.append(payload)
        self.headers.append(dict(request.headers))
        step = self.script.pop(0) if self.script else self.default
        if step is None:
            return web.Response(status=500, text="no scripted reply")
        reply = step if isinstance(step, Reply) else step(payload)
        if reply.drop:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if reply.hang:
            await self.hang_forever.wait()
        body = reply.body
        if isinstance(body, (dict, list)):
            return web.json_response(body, status=reply.status, headers=reply.headers)
        raw_body = body.encode() if isinstance(body, str) else (body or b"")
        return web.Response(
            body=raw_body, status=reply.status, headers=reply.headers, content_type="text/html"
        )


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    """A scripted JSON-RPC server on a free 127.0.0.1 port."""
    import asyncio

    scripted = ScriptedServer()
    scripted.hang_forever = asyncio.Event()
    app = web.Application()
    app.router.add_post("/api/v1/a2a", scripted.handle)

    async def route(request: web.Request) -> web.StreamResponse:
        return await scripted.extra_routes[request.path](request)

    app.router.add_get("/{tail:.*}", route)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    scripted.server = test_server
    try:
        yield scripted
    finally:
        scripted.hang_forever.set()
        await test_server.close()


def _running(server: RedisServer) -> Iterator[RedisServer]:
    reason = redis_unavailable()
    if reason is not None:
        if ci():
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A private ``redis-server``; the test skips without one (and fails when ``CI=true``)."""
    yield from _running(RedisServer())


@pytest.fixture
def persistent_redis(tmp_path_factory: Any) -> Iterator[RedisServer]:
    """A private ``redis-server`` with ``appendonly yes``: it keeps its data through a
    restart."""
    directory = str(tmp_path_factory.mktemp("aof"))
    yield from _running(RedisServer(("--appendonly", "yes", "--dir", directory)))


class JumpClock:
    """A clock whose ``sleep`` returns at once and moves time forward by what was asked.

    For sequential tests of retry waits: every wait is recorded in :attr:`sleeps`.
    """

    def __init__(self) -> None:
        self.time = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.sleeps.append(seconds)
        self.time += max(seconds, 0.0)
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> JumpClock:
    """A :class:`JumpClock`."""
    return JumpClock()


@pytest.fixture
async def client(server: ScriptedServer, clock: JumpClock) -> AsyncIterator[Any]:
    """A client of the scripted server with limits lifted and waits in jump time."""
    from magisterium_async import AsyncMagisterium, RateLimits

    async with AsyncMagisterium(
        token=TOKEN, base_url=server.url, rate_limits=RateLimits.unlimited(), clock=clock
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_stored_sign_in(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: Any) -> None:
    """No test reads the developer's own credentials: the config dir is an empty one."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.delenv("MAGISTERIUM_CREDENTIALS", raising=False)


@pytest.fixture(autouse=True)
def _no_quota_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``$MAGISTERIUM_QUOTA`` the developer exported (for the emulator) is not a test's."""
    monkeypatch.delenv("MAGISTERIUM_QUOTA", raising=False)


@pytest.fixture(autouse=True)
def _no_cache_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor is a ``$MAGISTERIUM_CACHE``: a test's client has the cache it names, or none."""
    monkeypatch.delenv("MAGISTERIUM_CACHE", raising=False)


PROXY_VARIABLES = tuple(
    name
    for base in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    for name in (base, base.upper())
)


@pytest.fixture(autouse=True)
def _no_proxy_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to loopback directly: a proxy set on the developer's machine or in CI
    is not theirs (the proxy tests set their own)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak tests (a minute of load, or of CPU, each) run only when asked:
    ``MAGISTERIUM_SOAK=1``. CI runs them once, alone, last; the README's test command on a
    laptop or another Python skips them."""
    if os.environ.get("MAGISTERIUM_SOAK") == "1":
        return
    skip = pytest.mark.skip(reason="a soak test: set MAGISTERIUM_SOAK=1 to run it")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def memory_redis() -> object:
    """An in-memory Redis server (fakeredis, running the same Lua) for virtual-time tests."""
    fakeredis = pytest.importorskip("fakeredis", reason="needs fakeredis[lua]")
    pytest.importorskip("lupa", reason="needs fakeredis[lua]")
    return fakeredis.FakeServer()


@pytest.fixture
def refreshes() -> Iterator[RefreshLog]:
    """The refreshes this process sends during the test, counted from the library's log."""
    with counted_refreshes() as log:
        yield log
