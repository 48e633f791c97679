"""Send N ``document_search`` requests at concurrency C with one client; run as a script.

Usage: ``python _client_worker.py '{"client", "url", "token", "n", "concurrency",
"warmup", "pattern"}'``. Prints one JSON object: ``{"rps", "cpu_us", "wall", "cpu", "n",
"gc"}`` (``gc``: the cyclic GC's collections per generation over the ``n``) or
``{"error": ...}``.

Two patterns, as users write them (``pattern``, default ``"workers"``):

- ``workers``: ``concurrency`` worker tasks, each awaiting one call after another;
- ``gather``: ``asyncio.gather`` of all ``n`` calls at once. This SDK is given them all
  (its ``max_concurrency`` holds the rest back); the other clients each take an
  ``asyncio.Semaphore(concurrency)`` around the call, as their users must.

Standalone (stdlib at the top, each client's imports inside it) so that the same file runs
in our environment and in a2a-sdk 0.3's. After ``warmup`` requests (connections opened,
code paths warm), ``n`` requests run through ``concurrency`` workers; the wall time and
this process's CPU time (``time.process_time()``: user + system, all threads) are taken
around those ``n`` only. Every answer is checked to hold the 10 hits of the canned Task.
Every call of every client asks its own query (:func:`_query`), so none is shared with an
identical call in flight: each request is paid for.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

QUERY = "grace and nature"
HITS = 10
Call = Callable[[], Awaitable[int]]
_QUERIES = itertools.count(1)


def _query() -> str:
    """A query no call asked before: ``grace and nature 17``."""
    return f"{QUERY} {next(_QUERIES)}"


def _request_body(request_id: int) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "kind": "message",
                    "messageId": str(uuid.uuid4()),
                    "parts": [{"kind": "text", "text": _query()}],
                    "metadata": {"skillId": "document_search"},
                }
            },
        }
    ).encode()


def _hits(answer: dict[str, Any], request_id: int) -> int:
    """What a hand-written client reads out of the answer: the (id, url, title) of each hit."""
    if answer.get("id") != request_id or "result" not in answer:
        raise RuntimeError(f"bad answer: {str(answer)[:200]}")
    for artifact in answer["result"]["artifacts"]:
        if artifact.get("name") == "search_results":
            for part in artifact["parts"]:
                if part["kind"] == "data" and "results" in part["data"]:
                    hits = [(str(r["id"]), r["url"], r["title"]) for r in part["data"]["results"]]
                    return len(hits)
    raise RuntimeError("no search_results artifact")


@asynccontextmanager
async def _magisterium(spec: dict[str, Any]) -> AsyncIterator[Call]:
    """This SDK with its limits lifted: ``client.search(query)``."""
    from magisterium_async import AsyncMagisterium, RateLimits

    client = AsyncMagisterium(
        token=spec["token"],
        base_url=spec["url"],
        rate_limits=RateLimits.unlimited(),
        max_concurrency=spec["concurrency"],
    )

    async def call() -> int:
        return len(await client.search(_query()))

    async with client:
        yield call


@asynccontextmanager
async def _aiohttp(spec: dict[str, Any]) -> AsyncIterator[Call]:
    """The floor: one aiohttp session, ``json.dumps`` out, ``json.loads`` in."""
    import aiohttp

    headers = {"Authorization": f"Bearer {spec['token']}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=spec["concurrency"])
    ids = iter(range(1, 1 << 62))

    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def call() -> int:
            request_id = next(ids)
            async with session.post(spec["url"], data=_request_body(request_id)) as response:
                payload = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
            return _hits(json.loads(payload), request_id)

        yield call


@asynccontextmanager
async def _httpx(spec: dict[str, Any]) -> AsyncIterator[Call]:
    """httpx's AsyncClient, ``json.dumps`` out, ``json.loads`` in."""
    import httpx

    headers = {"Authorization": f"Bearer {spec['token']}", "Content-Type": "application/json"}
    limits = httpx.Limits(
        max_connections=spec["concurrency"], max_keepalive_connections=spec["concurrency"]
    )
    ids = iter(range(1, 1 << 62))

    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30.0) as http:

        async def call() -> int:
            request_id = next(ids)
            response = await http.post(spec["url"], content=_request_body(request_id))
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}")
            return _hits(json.loads(response.content), request_id)

        yield call


@asynccontextmanager
async def _a2a03(spec: dict[str, Any]) -> AsyncIterator[Call]:
    """a2a-sdk 0.3's client as its docs show it: ``ClientFactory(...).create(card)`` and
    ``send_message``, on an httpx client with the same connection limits."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        DataPart,
        Message,
        Part,
        Role,
        Task,
        TextPart,
        TransportProtocol,
    )

    card = AgentCard(
        name="benchmark",
        description="the canned benchmark server",
        url=spec["url"],
        version="1",
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
        skills=[],
    )
    headers = {"Authorization": f"Bearer {spec['token']}"}
    limits = httpx.Limits(
        max_connections=spec["concurrency"], max_keepalive_connections=spec["concurrency"]
    )
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30.0) as http:
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_transports=[TransportProtocol.jsonrpc]
        )
        client = ClientFactory(config).create(card)

        async def call() -> int:
            message = Message(
                role=Role.user,
                parts=[Part(root=TextPart(text=_query()))],
                message_id=str(uuid.uuid4()),
                metadata={"skillId": "document_search"},
            )
            async for event in client.send_message(message):
                task = event[0] if isinstance(event, tuple) else event
                if not isinstance(task, Task):
                    raise RuntimeError(f"not a task: {type(task).__name__}")
                for part in task.artifacts[0].parts:
                    if isinstance(part.root, DataPart) and "results" in part.root.data:
                        results = part.root.data["results"]
                        return len([(str(r["id"]), r["url"], r["title"]) for r in results])
            raise RuntimeError("no search results")

        try:
            yield call
        finally:
            await client.close()


CLIENTS = {"magisterium": _magisterium, "aiohttp": _aiohttp, "httpx": _httpx, "a2a03": _a2a03}


async def _drive(call: Call, n: int, concurrency: int) -> None:
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            hits = await call()
            if hits != HITS:
                raise RuntimeError(f"expected {HITS} hits, got {hits}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _gather(call: Call, n: int, concurrency: int | None) -> None:
    """All ``n`` calls at once; behind a semaphore of ``concurrency`` unless ``None``."""
    gate = asyncio.Semaphore(concurrency) if concurrency is not None else None

    async def one() -> None:
        if gate is None:
            hits = await call()
        else:
            async with gate:
                hits = await call()
        if hits != HITS:
            raise RuntimeError(f"expected {HITS} hits, got {hits}")

    await asyncio.gather(*(one() for _ in range(n)))


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    concurrency = spec["concurrency"]
    if spec.get("pattern", "workers") == "gather":
        gate = None if spec["client"] == "magisterium" else concurrency

        async def drive(call: Call, n: int) -> None:
            await _gather(call, n, gate)

    else:

        async def drive(call: Call, n: int) -> None:
            await _drive(call, n, concurrency)

    async with CLIENTS[spec["client"]](spec) as call:
        await drive(call, spec["warmup"])
        collections = [generation["collections"] for generation in gc.get_stats()]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        await drive(call, spec["n"])
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        # The cyclic GC's runs (generations 0, 1, 2) over the n requests: the objects a
        # client keeps alive per queued call show here when thousands queue at once.
        after = gc.get_stats()
        collections = [g["collections"] - c for g, c in zip(after, collections, strict=True)]
    n = spec["n"]
    return {
        "rps": n / wall,
        "cpu_us": cpu / n * 1e6,
        "wall": wall,
        "cpu": cpu,
        "n": n,
        "gc": collections,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    try:
        result = asyncio.run(run(spec))
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
