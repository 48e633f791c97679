"""Fault injection: scripted faults over HTTP, and random ones deterministic under a seed."""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import aiohttp
import pytest

from magisterium_async.testing import Fault, FaultConfig, RateLimitConfig
from magisterium_async.testing.emulator._faults import FaultInjector

from ..conftest import JumpClock
from .conftest import StartWire
from .helpers import Wire, text


def _names(
    injector: FaultInjector, count: int, **request: str | None
) -> list[tuple[str | None, float]]:
    decisions = []
    for _ in range(count):
        fault, delay = injector.decide(request.get("method"), request.get("skill"))
        decisions.append((fault.name if fault else None, round(delay, 9)))
    return decisions


def test_random_faults_are_deterministic_under_a_seed() -> None:
    config = FaultConfig(seed=42, error_rate=0.2, drop_rate=0.1, latency=(0.0, 0.5))
    one = _names(FaultInjector(config), 300, method="message/send")
    two = _names(FaultInjector(config), 300, method="message/send")
    other = _names(FaultInjector(FaultConfig(seed=43, error_rate=0.2, drop_rate=0.1)), 300)
    assert one == two
    assert [name for name, _ in one] != [name for name, _ in other]
    assert all(0.0 <= delay <= 0.5 for _, delay in one)


def test_random_fault_rates_are_respected() -> None:
    config = FaultConfig(
        seed=1,
        error_rate=0.2,
        drop_rate=0.1,
        truncate_rate=0.05,
        malformed_rate=0.05,
        rate_limit_rate=0.1,
        internal_error_rate=0.05,
        task_failure_rate=0.05,
    )
    counts = Counter(name for name, _ in _names(FaultInjector(config), 20_000))
    expected = {
        None: 0.4,
        "http_502": 0.1,
        "http_503": 0.1,
        "drop": 0.1,
        "truncated": 0.05,
        "malformed": 0.05,
        "rate_limit": 0.1,
        "jsonrpc_error": 0.05,
        "task_failed": 0.05,
    }
    for name, share in expected.items():
        assert counts[name] / 20_000 == pytest.approx(share, abs=0.015), name


def test_random_faults_only_where_configured() -> None:
    injector = FaultInjector(FaultConfig(seed=0, error_rate=1.0, skills=frozenset({"catholic_qa"})))
    assert injector.decide("message/send", "document_search") == (None, 0.0)
    assert injector.decide("tasks/get", None) == (None, 0.0)
    fault, _ = injector.decide("message/send", "catholic_qa")
    assert fault is not None and fault.kind == "http_error"
    by_method = FaultInjector(FaultConfig(drop_rate=1.0, methods=frozenset({"tasks/get"})))
    assert by_method.decide("message/send", "catholic_qa") == (None, 0.0)
    fault, _ = by_method.decide("tasks/get", None)
    assert fault is not None and fault.kind == "drop"


def test_scripted_faults_come_first_in_order_and_by_filter() -> None:
    injector = FaultInjector()
    injector.script(Fault.http_502(), Fault.drop())
    injector.script(Fault.rate_limit(retry_after=3), skill="document_fetch")
    injector.script(Fault.task_failed())
    assert injector.pending == 4
    assert injector.decide("tasks/get", None)[0] == Fault.http_502()
    assert injector.decide("message/send", "document_fetch")[0] == Fault.drop()
    assert injector.decide("tasks/get", None) == (None, 0.0)
    assert injector.decide("message/send", "document_search")[0] == Fault.task_failed()
    assert injector.decide("message/send", "document_fetch")[0] == Fault.rate_limit(3)
    assert injector.pending == 0
    injector.script(Fault.drop())
    injector.clear()
    assert injector.decide("tasks/get", None) == (None, 0.0)


def test_fault_constructors_are_checked() -> None:
    with pytest.raises(ValueError):
        Fault.http_error(200)
    with pytest.raises(ValueError):
        Fault.latency(-1)
    with pytest.raises(TypeError):
        FaultInjector().script("502")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="add up"):
        FaultConfig(error_rate=0.6, drop_rate=0.6)
    with pytest.raises(ValueError):
        FaultConfig(latency=(2.0, 1.0))
    assert FaultConfig(skills={"catholic_qa"}).skills == frozenset({"catholic_qa"})  # type: ignore[arg-type]
    assert [Fault.http_502().name, Fault.drop().name] == ["http_502", "drop"]


async def test_scripted_faults_over_http(wire: Wire) -> None:
    emu = wire.emu
    emu.script(Fault.http_502(), Fault.drop(), Fault.rate_limit(retry_after=3))

    bad_gateway = await wire.send("document_search", text("x"))
    assert bad_gateway.status == 502
    assert bad_gateway.headers["Content-Type"].startswith("text/html")
    assert b"502 Bad Gateway" in bad_gateway.raw

    with pytest.raises(aiohttp.ServerDisconnectedError):
        await wire.send("document_search", text("x"))

    limited = await wire.send("document_search", text("x"))
    assert limited.status == 429
    assert limited.error == {
        "code": -32003,
        "message": "Rate limit exceeded",
        "data": {"retryAfter": 3},
    }

    assert (await wire.send("document_search", text("x"))).status == 200
    assert emu.pending_faults == 0
    assert emu.stats.count(outcome="fault") == 3
    assert [a.fault for a in emu.arrivals] == ["http_502", "drop", "rate_limit", None]
    assert [a.admitted for a in emu.arrivals] == [False, False, False, True]


async def test_503_with_retry_after_and_500(wire: Wire) -> None:
    wire.emu.script(Fault.http_503(retry_after=7), Fault.http_500())
    unavailable = await wire.call("tasks/get", {"id": "x"})
    assert unavailable.status == 503
    assert unavailable.headers["Retry-After"] == "7"
    assert (await wire.call("tasks/get", {"id": "x"})).status == 500


async def test_custom_http_error_body(wire: Wire) -> None:
    wire.emu.script(Fault.http_error(504, "upstream timed out", content_type="text/plain"))
    answer = await wire.call("tasks/get", {"id": "x"})
    assert (answer.status, answer.raw) == (504, b"upstream timed out")


async def test_truncated_body(wire: Wire) -> None:
    wire.emu.script(Fault.truncated())
    with pytest.raises(aiohttp.ClientPayloadError):
        await wire.send("document_search", text("x"))
    [arrival] = wire.emu.arrivals
    assert (arrival.outcome, arrival.fault, arrival.admitted) == ("fault", "truncated", True)


async def test_malformed_body(wire: Wire) -> None:
    wire.emu.script(Fault.malformed(), Fault.malformed(b"<html>oops</html>"))
    first = await wire.send("document_search", text("x"))
    assert first.status == 200
    assert first.headers["Content-Type"] == "application/json"
    assert first.body is None
    assert first.raw.startswith(b'{"jsonrpc":"2.0","id":1,')
    second = await wire.send("document_search", text("x"))
    assert second.raw == b"<html>oops</html>"


async def test_internal_and_other_jsonrpc_errors(wire: Wire) -> None:
    wire.emu.script(Fault.internal_error(), Fault.jsonrpc_error(-32004, "Token revoked"))
    internal = await wire.send("document_search", text("x"), token=None)
    assert internal.status == 200
    assert internal.error == {"code": -32603, "message": "Internal error"}
    revoked = await wire.send("document_search", text("x"))
    assert revoked.status == 401
    assert revoked.error["message"] == "Token revoked"


async def test_task_failed_fault(wire: Wire) -> None:
    wire.emu.script(Fault.task_failed("model overloaded"))
    assert (await wire.call("tasks/get", {"id": "x"})).error["code"] == -32001
    task = (await wire.send("catholic_qa", text("grace"))).result
    assert task["status"]["state"] == "failed"
    assert task["status"]["message"]["parts"] == [{"kind": "text", "text": "model overloaded"}]
    arrival = wire.emu.arrivals[-1]
    assert (arrival.outcome, arrival.fault) == ("failed", "task_failed")


async def test_drop_after_processing_stores_the_task(wire: Wire) -> None:
    wire.emu.script(Fault.drop(processed=True))
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await wire.send("document_search", text("x"), context_id="lost")
    [arrival] = wire.emu.arrivals
    assert arrival.admitted
    assert wire.emu.stats.count(outcome="fault") == 1


async def test_scripted_latency_and_filters(wire: Wire) -> None:
    wire.emu.script(Fault.http_502(), skill="document_fetch")
    wire.emu.script(Fault.latency(0.01), Fault.none())
    assert (await wire.send("document_search", text("x"))).status == 200
    assert (await wire.send("document_search", text("x"))).status == 200
    assert (await wire.send("document_fetch", text("10234"))).status == 502
    assert [a.fault for a in wire.emu.arrivals] == ["latency", None, "http_502"]


async def test_faults_in_front_of_the_service_spend_no_quota(
    start_wire: StartWire, clock: JumpClock
) -> None:
    wire = await start_wire(clock=clock, rate_limits=RateLimitConfig(default=1, expensive=1))
    wire.emu.script(Fault.http_502(), Fault.drop(), Fault.rate_limit(), Fault.internal_error())
    for _ in range(4):
        with contextlib.suppress(aiohttp.ServerDisconnectedError):
            await wire.send("document_search", text("x"))
    assert (await wire.send("document_search", text("x"))).status == 200


async def test_random_faults_over_http_are_reproducible(start_wire: StartWire) -> None:
    config = FaultConfig(seed=9, error_rate=0.3, malformed_rate=0.1, rate_limit_rate=0.1)

    async def run() -> list[int]:
        wire = await start_wire(faults=config)
        statuses = []
        for n in range(40):
            answer = await wire.send("document_search", text(f"q{n}"))
            statuses.append(answer.status if answer.body is not None else -answer.status)
        return statuses

    first, second = await run(), await run()
    assert first == second
    assert {200, -200, 429} <= set(first)
    assert {-502, -503} & set(first)


async def test_random_rate_limit_uses_the_configured_retry_after(start_wire: StartWire) -> None:
    wire = await start_wire(faults=FaultConfig(rate_limit_rate=1.0, rate_limit_retry_after=12))
    answer = await wire.send("document_search", text("x"))
    assert answer.status == 429
    assert json.loads(answer.raw)["error"]["data"] == {"retryAfter": 12}


async def test_forced_rate_limit_sends_retry_after_as_given(wire: Wire) -> None:
    wire.emu.script(Fault.rate_limit(0), Fault.rate_limit(2.5))
    first = await wire.send("document_search", text("x"))
    second = await wire.send("document_search", text("x"))
    assert first.error["data"] == {"retryAfter": 0}
    assert second.error["data"] == {"retryAfter": 2.5}
