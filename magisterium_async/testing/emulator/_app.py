"""The aiohttp application: the JSON-RPC endpoint, CORS, the agent card, faults."""

from __future__ import annotations

import asyncio

from aiohttp import web

from magisterium_async.testing.emulator._card import CARD_PATH, agent_card
from magisterium_async.testing.emulator._config import EmulatorConfig
from magisterium_async.testing.emulator._faults import Fault
from magisterium_async.testing.emulator._jsonrpc import INTERNAL_ERROR, Call, RPCError, parse_call
from magisterium_async.testing.emulator._service import Reply, Service
from magisterium_async.testing.emulator._v1 import VERSION_HEADER
from magisterium_async.testing.emulator._wire import encode
from magisterium_async.testing.emulator.oauth._routes import add_oauth_routes

__all__ = ["A2A_PATH", "SERVICE", "create_app"]

A2A_PATH = "/api/v1/a2a"
SERVICE = web.AppKey("magisterium_emulator_service", Service)

_JSON = "application/json"
# On every answer, faults and aiohttp's own 404/405 included: a browser refuses to hand a
# cross-origin body (or the waits and challenges in these headers) to the page otherwise.
_CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Retry-After, WWW-Authenticate",
}
_PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
}
# A 1.0 client sends A2A-Version (and may send A2A-Extensions) on every request: a
# browser's preflight must be told they are allowed.
_PREFLIGHT_HEADERS_V1 = {
    **_PREFLIGHT_HEADERS,
    "Access-Control-Allow-Headers": "Content-Type, Authorization, A2A-Version, A2A-Extensions",
}


def _response(reply: Reply) -> web.Response:
    return web.Response(
        body=reply.body, status=reply.status, content_type=_JSON, headers=reply.headers
    )


class _Endpoint:
    """Request handlers bound to one :class:`Service`."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def post(self, request: web.Request) -> web.StreamResponse:
        service = self.service
        arrival = service.arrive()
        call = parse_call(await request.read(), service.methods)
        call.version = request.headers.get(VERSION_HEADER)
        arrival.method = call.counted_as
        arrival.skill = call.skill
        fault, delay = service.faults.decide(call.counted_as, call.skill)
        if fault is not None and fault.kind in ("latency", "none"):
            delay += fault.seconds
            fault = None
        if delay:
            arrival.fault = "latency"
        failure = None
        if fault is not None and fault.kind == "task_failed":
            if call.operation == "message/send":
                arrival.fault = fault.name
                failure = fault.reason
            fault = None
        if fault is not None:
            arrival.fault = fault.name
            if fault.skips_service:
                arrival.input = service.asked(call)  # it did reach the service
                if delay:
                    await asyncio.sleep(delay)
                service.finish(arrival, "fault")
                return self._fault_response(request, call, fault)
        authorization = request.headers.get("Authorization")
        try:
            reply = await service.handle(call, authorization, arrival, failure)
        except Exception as error:  # a bug in the emulator answers as the service would
            detail = {"detail": repr(error)}
            body = service.error_body(call.id, INTERNAL_ERROR, "Internal error", detail)
            reply = Reply(200, body, "error")
        if delay:
            await asyncio.sleep(delay)
        if fault is not None:
            service.finish(arrival, "fault")
            return await self._corrupt(request, reply, fault)
        service.finish(arrival, reply.outcome)
        return _response(reply)

    def _fault_response(self, request: web.Request, call: Call, fault: Fault) -> web.Response:
        if fault.kind == "drop":
            return _drop(request)
        if fault.kind == "rate_limit":
            reply = self.service.rate_limited(call.id, fault.retry_after or 0.0, as_is=True)
            return _response(reply)
        if fault.kind == "jsonrpc_error":
            error = RPCError(fault.code, fault.message)
            body = self.service.error_body(call.id, error.code, error.message, None)
            return web.Response(body=body, status=error.status, content_type=_JSON)
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after else None
        return web.Response(
            body=fault.body, status=fault.status, headers=headers, content_type=fault.content_type
        )

    async def _corrupt(
        self, request: web.Request, reply: Reply, fault: Fault
    ) -> web.StreamResponse:
        if fault.kind == "drop":
            return _drop(request)
        half = reply.body[: len(reply.body) // 2]
        if fault.kind == "malformed":
            return web.Response(body=fault.body or half, status=200, content_type=_JSON)
        response = web.StreamResponse(status=reply.status)
        response.content_type = _JSON
        response.content_length = len(reply.body)
        await response.prepare(request)
        await response.write(half)
        if request.transport is not None:
            request.transport.close()
        return response

    async def card(self, request: web.Request) -> web.Response:
        url = f"{request.scheme}://{request.host}{A2A_PATH}"
        return web.Response(
            body=encode(agent_card(url, self.service.config.protocol)),
            content_type=_JSON,
            headers={"Cache-Control": "public, max-age=3600"},
        )


def _drop(request: web.Request) -> web.Response:
    if request.transport is not None:
        request.transport.close()
    return web.Response()


async def _preflight(request: web.Request) -> web.Response:
    v1 = request.app[SERVICE].v1
    return web.Response(status=204, headers=_PREFLIGHT_HEADERS_V1 if v1 else _PREFLIGHT_HEADERS)


async def _add_cors(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(_CORS_HEADERS)


def create_app(config: EmulatorConfig | None = None) -> web.Application:
    """The emulator as an aiohttp application (``app[SERVICE]`` holds its state).

    Routes: ``POST /api/v1/a2a`` (JSON-RPC), ``OPTIONS /api/v1/a2a`` (CORS preflight),
    ``GET`` of the agent card of the config's ``protocol`` where a server of that protocol
    serves it (``/.well-known/agent.json`` for 0.2.6, ``/.well-known/agent-card.json`` for
    0.3 and 1.0; the other path is a 404), and the OAuth authorization server (see
    :mod:`.oauth._routes`). Every answer carries ``Access-Control-Allow-Origin: *``, as the
    service's do.
    """
    service = Service(config if config is not None else EmulatorConfig())
    endpoint = _Endpoint(service)
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app[SERVICE] = service
    app.on_response_prepare.append(_add_cors)
    app.router.add_post(A2A_PATH, endpoint.post)
    app.router.add_route("OPTIONS", A2A_PATH, _preflight)
    app.router.add_get(CARD_PATH[service.config.protocol], endpoint.card)
    add_oauth_routes(app, service.oauth, service.faults)
    return app
