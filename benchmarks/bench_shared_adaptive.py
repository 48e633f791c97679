"""Adaptive across processes: four processes share one token's quota through one real Redis
while the server allows something other than what they were told.

One ``window`` server (``_server.py``) per scenario, in its own process: a fixed-window
quota whose first window starts at the reset made just before the workers are released.
Four worker processes (``_quota_worker.py``, kept for the whole benchmark) split the
work evenly, are released together, and fire their share at once, 16 in flight each.
Clients, each as four processes:

- ``magisterium_async``: ``AsyncMagisterium(shared_quota=SharedQuota(redis_url,
  workers=4), rate_limits=RateLimits(told, told, period=1))``, and the same with the URL
  alone (``SharedQuota(redis_url)``: no hint of how many share the quota); Redis is
  flushed before each run, so nothing learnt in one carries into the next;
- ``botocore adaptive``: ``bench_quota``'s driver of botocore's CUBIC limiter, one per
  process (botocore has no shared mode);
- ``naive``: the retry-after loop.

Rows: *hidden*, 200 fetches, told 40/s in all, the server allows 10/s;
*shift*, 200 searches, told 20/s, the server allows 20/s, 6/s from t=4 s, 20/s from
t=10 s; *right*, 200 searches, told 20/s, the server 20/s with 0-30 ms of jitter. Figures,
from the server: 429s per success, and the *span* from the first to the last accepted
request against the ideal span (the start of the window that admits the last request).
``--quick``: every time scaled by 0.25, fewer requests.
"""

from __future__ import annotations

import math
import shutil
from typing import Any

from ._quota_worker import Workers
from ._report import Row, Section
from ._server import ROOT, RedisServer, ServerProcess
from .bench_quota import Scenario

__all__ = ["SCENARIOS", "run"]

WORKERS = 4
CONCURRENCY = 16  # per process, as bench_quota's one process
CLIENTS = {
    "magisterium": "magisterium_async + Redis (workers=4)",
    "magisterium_url": "magisterium_async + Redis (URL alone)",
    "botocore": "botocore adaptive (one per process)",
    "naive": "naive retry-after loop",
}

SCENARIOS = (  # (scenario, skill); max_wall here bounds the server-side span / ideal
    (Scenario(
        "hidden", "hidden: 200 fetches, told 40/s in all, server 10/s", 40, ((0, 10),),
        200, 40, max_429=0.10, max_wall=1.10,
    ), "fetch"),
    (Scenario(
        "shift", "shift: 200 searches, told 20/s, server 20 -> 6 (t=4 s) -> 20/s (t=10 s)",
        20, ((0, 20), (4, 6), (10, 20)), 200, 130, max_429=0.10, max_wall=1.20,
    ), "search"),
    (Scenario(
        "right", "right: 200 searches, told 20/s, server 20/s, 0-30 ms jitter", 20,
        ((0, 20),), 200, 60, jitter=0.03, max_429=0.0, max_wall=1.15,
    ), "search"),
)  # fmt: skip


def _shares(n: int) -> list[int]:
    return [n // WORKERS + (i < n % WORKERS) for i in range(WORKERS)]


def _measure(
    workers: Workers,
    redis: RedisServer,
    server: ServerProcess,
    scenario: Scenario,
    skill: str,
    client: str,
    n: int,
    scale: float,
) -> dict[str, Any]:
    ideal = scenario.ideal(n, scale) - scenario.jitter * scale  # first to last accepted
    # A peer that gets stuck is stopped, its 429s kept. botocore's backoff is not scaled
    # by --quick: its quick runs are bounded tighter.
    limit = max(12.0 * scale, (2 if scale < 1 else 4) * ideal)
    redis.flushall()
    jobs = {
        i: {
            "task": "calls",
            "client": "magisterium" if client.startswith("magisterium") else client,
            "base_url": server.base_url,
            "token": server.token,
            "redis_url": redis.url,
            "workers": None if client == "magisterium_url" else WORKERS,
            "default": scenario.told,
            "expensive": scenario.told,
            "period": scale,
            "max_concurrency": CONCURRENCY,
            "skill": skill,
            "n": share,
            "limit": limit,
        }
        for i, share in enumerate(_shares(n))
    }
    workers.start(jobs)
    server.reset()
    workers.go(list(jobs))
    results = [workers.result(i, limit + 30) for i in jobs]
    stats = server.stats()
    accepted = stats["accepted"]
    span = accepted[-1] - accepted[0] if accepted else math.nan
    result: dict[str, Any] = {
        "ok": stats["ok"],
        "rate_limited": stats["rate_limited"],
        "per_success": stats["rate_limited"] / max(stats["ok"], 1),
        "span": span,
        "ideal": ideal,
        "x_ideal": span / ideal if ideal > 0 else math.nan,
        "wall": max(r["wall"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "stopped": any(r["stopped"] for r in results),
    }
    if result["stopped"]:
        result["error"] = f"{stats['ok']} of {n} done when stopped after {limit:g} s"
    elif result["errors"] or stats["ok"] != n:
        result["error"] = f"{stats['ok']} of {n} answered, {result['errors']} client errors"
    return result


def run(quick: bool) -> Section:
    scale = 0.25 if quick else 1.0
    section = Section(
        "shared_adaptive",
        "Adaptive across processes: four processes over one Redis vs a fixed-window server",
        setup=(
            f"window server in its own process, windows of {scale:g} s"
            + (" (--quick: every time scaled by 0.25)" if quick else "")
            + f"; {WORKERS} worker processes released together, the work split evenly, "
            f"{CONCURRENCY} in flight each; private redis-server on loopback, flushed before "
            "each run; 429s and the span (first to last accepted request) as the server saw "
            "them; ideal span = start of the window that admits the last request"
        ),
    )
    if shutil.which("redis-server") is None:
        section.fail("redis-server is not installed")
        return section
    data: dict[str, Any] = {}
    with RedisServer() as redis, Workers(WORKERS, cwd=ROOT) as workers:
        for scenario, skill in SCENARIOS:
            n = scenario.quick_requests if quick else scenario.requests
            results: dict[str, Any] = {}
            with ServerProcess("window", *scenario.server_args(scale)) as server:
                for client in CLIENTS:
                    try:
                        results[client] = _measure(
                            workers, redis, server, scenario, skill, client, n, scale
                        )
                    except Exception as exc:
                        results[client] = {"error": f"{type(exc).__name__}: {exc}"}
            data[scenario.key] = {"requests": n, **results}
            _rows(section, scenario, results)
            _goal(section, scenario, results)
    section.data = {"scenarios": data, "scale": scale, "workers": WORKERS}
    return section


OURS = ("magisterium", "magisterium_url")


def _rows(section: Section, scenario: Scenario, results: dict[str, Any]) -> None:
    for name in OURS:
        if "error" in results[name]:
            section.fail(f"{scenario.key} ({CLIENTS[name]}): {results[name]['error']}")
    for client, label in CLIENTS.items():
        result = results[client]
        if "span" not in result:
            section.rows.append(Row(scenario.title, label, "n/a", result.get("error", "")))
            continue
        text = (
            f"{result['per_success']:.3f} 429s/success, span {result['x_ideal']:.2f}x ideal "
            f"({result['ideal']:.2f} s)"
        )
        detail = (
            f"{result['rate_limited']} x 429 for {result['ok']}; span {result['span']:.2f} s, "
            f"wall {result['wall']:.2f} s"
        )
        if "error" in result:
            detail += f"; {result['error']}"
        section.rows.append(Row(scenario.title, label, text, detail))


def _goal(section: Section, scenario: Scenario, results: dict[str, Any]) -> None:
    for name in OURS:
        _goal_of(section, scenario, results, name)


def _goal_of(section: Section, scenario: Scenario, results: dict[str, Any], name: str) -> None:
    ours, how = results[name], "workers=4" if name == "magisterium" else "URL alone"
    if "span" not in ours or "error" in ours:
        section.goal(
            f"{scenario.key} ({how}): the issue's goals", False, ours.get("error", "no run")
        )
        return
    max_429, max_span = scenario.max_429 or 0.0, scenario.max_wall or math.inf
    checks = [
        (
            f"<= {max_429:g} 429s/success" if max_429 else "0 429s",
            ours["per_success"] <= max_429,
        ),
        (f"span <= {max_span:g}x ideal", ours["x_ideal"] <= max_span),
    ]
    versus = []
    for client in ("botocore", "naive"):
        peer = results[client]
        if "per_success" not in peer:
            checks.append((f"beats {CLIENTS[client]} on 429s", False))
            versus.append(f"{client} n/a")
            continue
        beats = ours["per_success"] <= peer["per_success"] and (
            ours["rate_limited"] < peer["rate_limited"] or peer["rate_limited"] == 0
        )
        checks.append((f"beats {CLIENTS[client]} on 429s", beats))
        versus.append(f"{client} {peer['per_success']:.3f}")
    section.goal(
        f"{scenario.key} (four processes, {how}): " + "; ".join(text for text, _ in checks),
        all(met for _, met in checks),
        f"{ours['per_success']:.3f} 429s/success ({ours['rate_limited']} x 429), span "
        f"{ours['x_ideal']:.2f}x ideal; 429s/success vs " + ", ".join(versus),
    )
