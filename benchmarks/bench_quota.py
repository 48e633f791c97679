"""Quota use: how close a client gets to the server's quota, and how many 429s it costs.

The emulator runs in its own process with a sliding-window quota shortened so a scenario
takes seconds (20 searches and 2 ``catholic_qa`` per 2 s; 80 searches, 30 in ``--quick``),
a fresh process per scenario so every one starts with a full quota. Every request is fired
at once (``asyncio.gather``) and the client's own pacing decides the rest.

- (a) this SDK configured to the server's quota;
- (b) the server allows a tenth of what this SDK believes (the quota is shared with the
  user's MCP calls, or the plan's numbers are wrong);
- (c) ``catholic_qa`` and searches mixed, the SDK configured to the quota;
- naive: the loop users write by hand -- raw aiohttp, 16 requests in flight, and each call
  that gets a 429 sleeps its own ``retryAfter`` and tries again (at most 100 times). It has
  no quota setting, so (a) and (b) are the same run for it.

``ideal`` is the shortest wall time the server's window allows for the requests (a sliding
window of L per P admits N starts in ``floor((N - 1) / L) * P`` seconds at best, plus the
``catholic_qa`` latency); ``utilization = ideal / wall`` (1.0: the quota used as fully as
the server allows). The table also shows requests / rate (``N * P / L``), which ignores
that the first window's quota is there at once. 429s are counted by the server.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from typing import Any

from ._report import Row, Section
from ._server import ServerProcess

__all__ = ["run"]

OURS = "magisterium_async"
NAIVE = "naive"
NAIVE_CONCURRENCY = 16
NAIVE_ATTEMPTS = 100


@dataclass(frozen=True)
class _Quota:
    default: int
    expensive: int
    period: float
    qa_latency: float

    def server_args(self) -> list[str]:
        return [
            "--default",
            str(self.default),
            "--expensive",
            str(self.expensive),
            "--period",
            str(self.period),
            "--qa-latency",
            str(self.qa_latency),
        ]

    def ideal(self, searches: int, asks: int) -> float:
        def window(n: int, limit: int) -> float:
            return math.floor((n - 1) / limit) * self.period if n else 0.0

        expensive = window(asks, self.expensive) + self.qa_latency if asks else 0.0
        return max(window(searches, self.default), expensive)

    def requests_over_rate(self, searches: int, asks: int) -> float:
        """The issue's yardstick, requests / rate: no burst on a full first window."""
        return max(searches / self.default, asks / self.expensive) * self.period


@dataclass(frozen=True)
class _Scenario:
    key: str
    title: str
    searches: int
    asks: int
    belief: float  # the SDK's configured quota, as a multiple of the server's


def _jobs(searches: int, asks: int) -> list[str]:
    """Skills in submission order: the asks spread evenly among the searches."""
    jobs = ["document_search"] * searches
    for i in range(asks):
        jobs.insert((i + 1) * len(jobs) // (asks + 1), "catholic_qa")
    return jobs


async def _ours(server: ServerProcess, quota: _Quota, scenario: _Scenario) -> dict[str, Any]:
    from magisterium_async import AsyncMagisterium, RateLimits

    limits = RateLimits(
        quota.default * scenario.belief, quota.expensive * scenario.belief, period=quota.period
    )
    client = AsyncMagisterium(token=server.token, base_url=server.base_url, rate_limits=limits)
    errors = 0

    async def one(index: int, skill: str) -> None:
        nonlocal errors
        try:
            if skill == "catholic_qa":
                await client.ask(f"question {index} about grace")
            else:
                await client.search(f"grace nature {index}")
        except Exception:
            errors += 1

    async with client:
        started = time.perf_counter()
        jobs = _jobs(scenario.searches, scenario.asks)
        await asyncio.gather(*(one(i, skill) for i, skill in enumerate(jobs)))
        wall = time.perf_counter() - started
        stats = client.stats
    return {
        "wall": wall,
        "errors": errors,
        "client_429": stats.default.rate_limited + stats.expensive.rate_limited,
    }


async def _naive(server: ServerProcess, scenario: _Scenario) -> dict[str, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(NAIVE_CONCURRENCY)
    errors = 0

    async def one(session: aiohttp.ClientSession, index: int, skill: str) -> None:
        nonlocal errors
        text = f"question {index} about grace" if skill == "catholic_qa" else f"grace {index}"
        body = {
            "jsonrpc": "2.0",
            "id": index,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "kind": "message",
                    "messageId": f"naive-{index}-{time.monotonic_ns()}",
                    "parts": [{"kind": "text", "text": text}],
                    "metadata": {"skillId": skill},
                }
            },
        }
        async with gate:
            for _ in range(NAIVE_ATTEMPTS):
                async with session.post(server.base_url, data=json.dumps(body)) as response:
                    answer = json.loads(await response.read())
                if response.status != 429:
                    if "result" not in answer:
                        errors += 1
                    return
                await asyncio.sleep(float(answer["error"]["data"]["retryAfter"]))
            errors += 1

    async with aiohttp.ClientSession(headers=headers) as session:
        started = time.perf_counter()
        jobs = _jobs(scenario.searches, scenario.asks)
        await asyncio.gather(*(one(session, i, skill) for i, skill in enumerate(jobs)))
        wall = time.perf_counter() - started
    return {"wall": wall, "errors": errors}


def _measure(quota: _Quota, scenario: _Scenario, client: str) -> dict[str, Any]:
    ideal = quota.ideal(scenario.searches, scenario.asks)
    limit = max(30.0, 8 * ideal)
    with ServerProcess("emulator", *quota.server_args()) as server:
        work = _ours(server, quota, scenario) if client == OURS else _naive(server, scenario)
        try:
            result = asyncio.run(asyncio.wait_for(work, timeout=limit))
        except asyncio.TimeoutError:
            return {"error": f"did not finish within {limit:g} s"}
        outcomes = server.stats()["by_outcome"]
    result["ok"] = outcomes.get("ok", 0)
    result["rate_limited"] = outcomes.get("rate_limited", 0)
    result["ideal"] = ideal
    result["requests_over_rate"] = quota.requests_over_rate(scenario.searches, scenario.asks)
    result["utilization"] = ideal / result["wall"] if result["wall"] > 0 else math.nan
    wanted = scenario.searches + scenario.asks
    if result["errors"] or result["ok"] != wanted:
        result["error"] = (
            f"{result['ok']} of {wanted} requests answered, {result['errors']} client errors"
        )
    return result


def run(quick: bool) -> Section:
    if quick:
        quota = _Quota(default=20, expensive=2, period=2.0, qa_latency=0.1)
        searches, asks = 30, 3
    else:
        quota = _Quota(default=20, expensive=2, period=2.0, qa_latency=0.2)
        searches, asks = 80, 6
    scenarios = (
        _Scenario("a", "(a) client = server quota", searches, 0, 1.0),
        _Scenario("b", "(b) server allows 1/10 of client's", searches, 0, 10.0),
        _Scenario("c", "(c) catholic_qa + searches", searches, asks, 1.0),
    )
    section = Section(
        "quota",
        "Quota use (scheduler) against windowed limits",
        setup=(
            f"emulator in its own process, sliding window {quota.default} searches and "
            f"{quota.expensive} catholic_qa per {quota.period:g} s (shortened from the Pro "
            f"plan's per-minute quota so it runs in seconds), retryAfter in whole seconds, "
            f"catholic_qa latency {quota.qa_latency:g} s; {searches} searches (+{asks} "
            f"catholic_qa in c) fired at once; naive = raw aiohttp, {NAIVE_CONCURRENCY} in "
            "flight, each call retried after its own retryAfter"
        ),
    )
    data: dict[str, dict[str, Any]] = {}
    naive_searches: dict[str, Any] | None = None
    for scenario in scenarios:
        data[scenario.key] = {}
        ours = _measure(quota, scenario, OURS)
        data[scenario.key][OURS] = ours
        if "error" in ours:
            section.fail(f"{scenario.title}: {ours['error']}")
        if scenario.key == "b" and naive_searches is not None:
            naive = naive_searches
        else:
            naive = _measure(quota, scenario, NAIVE)
            if scenario.key == "a":
                naive_searches = naive
        data[scenario.key][NAIVE] = naive
        for client, result in ((OURS, ours), (NAIVE, naive)):
            label = OURS if client == OURS else "naive aiohttp loop"
            if "wall" not in result:
                section.rows.append(Row(scenario.title, label, "error", result["error"]))
                continue
            detail = (
                f"{result['rate_limited']} x 429; wall {result['wall']:.1f} s vs ideal "
                f"{result['ideal']:.1f} s (requests/rate: {result['requests_over_rate']:.1f} s)"
            )
            if client == NAIVE and scenario.key == "b":
                detail += " (same run as (a): no quota setting)"
            if "error" in result:
                detail += f"; {result['error']}"
            section.rows.append(
                Row(scenario.title, label, f"{result['utilization']:.0%} utilization", detail)
            )
    section.data = {"scenarios": data, "quota": quota.__dict__}
    a = data["a"][OURS]
    if "wall" in a:
        section.goal(
            "configured to the quota: no 429 and near-ideal wall time",
            a["rate_limited"] == 0 and a["utilization"] >= 0.85,
            f"{a['rate_limited']} x 429, {a['utilization']:.0%} utilization",
        )
    b = data["b"][OURS]
    if "wall" in b:
        section.note(
            f"(b): the adaptive pool met {b['rate_limited']} x 429 "
            f"({b['client_429']} seen by the client) and reached {b['utilization']:.0%}"
        )
    return section
