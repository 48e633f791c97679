"""The agent card: discovery (the protocol's path, the other after a 404), decoding, caching."""

from __future__ import annotations

import platform

import aiohttp
import pytest
from aiohttp import web

import magisterium_async as m
from magisterium_async._http import ACCEPT_ENCODING, max_age
from tests.conftest import CARD, TOKEN, JumpClock, ScriptedServer, task_json


async def test_agent_card_is_decoded_cached_and_spends_no_quota(
    client: m.AsyncMagisterium, server: ScriptedServer, clock: JumpClock
) -> None:
    hits: list[dict[str, str]] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(dict(request.headers))
        return web.json_response(CARD, headers={"Cache-Control": "public, max-age=60"})

    server.extra_routes["/.well-known/agent.json"] = serve
    card = await client.agent_card()
    assert (card.name, card.protocol_version, card.skills[0].id) == (
        "Magisterium AI",
        "0.3.0",
        "catholic_qa",
    )
    await client.agent_card()
    assert len(hits) == 1
    assert "Authorization" not in hits[0]
    clock.time += 61
    await client.agent_card()
    assert len(hits) == 2
    assert server.requests == []


async def test_agent_card_is_retried_on_a_5xx(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    answers = [web.Response(status=502, text="<html>bad gateway</html>"), web.json_response(CARD)]

    async def serve(request: web.Request) -> web.StreamResponse:
        return answers.pop(0)

    server.extra_routes["/.well-known/agent.json"] = serve
    assert (await client.agent_card()).name == "Magisterium AI"
    assert answers == []


async def test_agent_card_malformed(client: m.AsyncMagisterium, server: ScriptedServer) -> None:
    async def serve(request: web.Request) -> web.StreamResponse:
        return web.json_response({"skills": "none"})

    server.extra_routes["/.well-known/agent.json"] = serve
    with pytest.raises(m.MalformedResponseError, match="agent card"):
        await client.agent_card()


async def not_found(request: web.Request) -> web.StreamResponse:
    return web.Response(status=404, text="Not Found")


async def test_agent_card_falls_back_to_the_a2a_0_3_path_and_keeps_it(
    client: m.AsyncMagisterium, server: ScriptedServer, clock: JumpClock
) -> None:
    hits: list[str] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        if request.path == "/.well-known/agent.json":
            return web.Response(status=404, text="Not Found")
        return web.json_response(CARD, headers={"Cache-Control": "max-age=10"})

    server.extra_routes["/.well-known/agent.json"] = serve
    server.extra_routes["/.well-known/agent-card.json"] = serve
    assert (await client.agent_card()).name == "Magisterium AI"
    assert client.agent_card_url.endswith("/.well-known/agent-card.json")
    clock.time += 11
    await client.agent_card()
    assert hits == [
        "/.well-known/agent.json",
        "/.well-known/agent-card.json",
        "/.well-known/agent-card.json",
    ]


@pytest.mark.parametrize(
    ("protocol", "first", "then"),
    [
        ("auto", "agent.json", "agent-card.json"),  # the service's (0.2.6) path first
        ("0.3", "agent.json", "agent-card.json"),  # the service's dialect: the same
        ("1.0", "agent-card.json", "agent.json"),  # where every 1.0 server serves it
    ],
)
async def test_agent_card_is_looked_for_where_the_protocol_s_servers_serve_it(
    server: ScriptedServer, clock: JumpClock, protocol: m.ProtocolVersion, first: str, then: str
) -> None:
    hits: list[str] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(request.path.rsplit("/", 1)[1])
        if len(hits) == 1:
            return web.Response(status=404, text="Not Found")
        return web.json_response(CARD)

    server.extra_routes["/.well-known/agent.json"] = serve
    server.extra_routes["/.well-known/agent-card.json"] = serve
    async with m.AsyncMagisterium(
        token=TOKEN, base_url=server.url, protocol=protocol, clock=clock
    ) as client:
        assert client.agent_card_url.endswith(f"/.well-known/{first}")  # before reading
        # A view speaking another dialect shares the card, and the order it is looked for in.
        other = client.with_options(protocol="1.0" if protocol != "1.0" else "0.3")
        assert (await other.agent_card()).name == "Magisterium AI"
        assert client.agent_card_url.endswith(f"/.well-known/{then}")  # what answered
        await client.agent_card()
    assert hits == [first, then]


async def test_agent_card_missing_at_both_paths_names_both(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    server.extra_routes["/.well-known/agent.json"] = not_found
    server.extra_routes["/.well-known/agent-card.json"] = not_found
    with pytest.raises(m.UnexpectedStatusError, match=r"agent-card\.json.*also at.*agent\.json"):
        await client.agent_card()


@pytest.mark.parametrize(
    ("cache_control", "fresh_after"),
    [("max-age=" + "9" * 400, 10**6), ("public, max-age=0", 0.0), ("no-cache", 10**6)],
)
async def test_agent_card_max_age_of_any_size(
    client: m.AsyncMagisterium,
    server: ScriptedServer,
    clock: JumpClock,
    cache_control: str,
    fresh_after: float,
) -> None:
    hits: list[int] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(1)
        return web.json_response(CARD, headers={"Cache-Control": cache_control})

    server.extra_routes["/.well-known/agent.json"] = serve
    await client.agent_card()
    clock.time += fresh_after
    await client.agent_card()
    assert len(hits) == (2 if fresh_after == 0 else 1)


async def test_a_deeply_nested_agent_card_is_malformed(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    async def serve(request: web.Request) -> web.StreamResponse:
        body = '{"name": "x", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
        return web.Response(text=body, content_type="application/json")

    server.extra_routes["/.well-known/agent.json"] = serve
    with pytest.raises(m.MalformedResponseError, match="nested too deeply"):
        await client.agent_card()


@pytest.mark.parametrize(
    ("cache_control", "seconds"),
    [
        (None, float("inf")),
        ("no-store", float("inf")),
        ("public, max-age=60", 60.0),
        ('max-age="30"', 30.0),
        ("max-age=" + "9" * 11, float(2**31)),
    ],
)
def test_max_age_reads_cache_control(cache_control: str | None, seconds: float) -> None:
    assert max_age(cache_control) == seconds


async def test_the_agent_card_get_and_a_call_send_exactly_their_headers(
    client: m.AsyncMagisterium, server: ScriptedServer
) -> None:
    hits: list[dict[str, str]] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        hits.append(dict(request.headers))
        return web.json_response(CARD)

    server.extra_routes["/.well-known/agent.json"] = serve
    await client.agent_card()
    server.default = server.result(task_json())
    await client.get_task("task-1")
    common = {
        "Accept": "application/json",
        "Accept-Encoding": ACCEPT_ENCODING,
        "User-Agent": f"magisterium-async/{m.__version__} "
        f"python/{platform.python_version()} aiohttp/{aiohttp.__version__}",
    }
    get = {k: v for k, v in hits[0].items() if k != "Host"}
    assert get == common  # no token, no Content-Type: the public GET
    rpc = {k: v for k, v in server.headers[0].items() if k not in ("Host", "Content-Length")}
    assert rpc == {**common, "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
