"""Quota use: wall time and 429s against a fixed-window server, whatever limit it has.

One ``window`` server (``_server.py``) per scenario, in its own process on 127.0.0.1: a
fixed-window quota (its first window starts when a client starts) answering a one-hit
search, with the exact seconds to the window's end in ``retryAfter``. Every client fires
all its searches at once with 16 in flight at most, and retries until each succeeds. The
scenarios are the issue's (#12) table; ``told`` is the rate the client is configured for:

- right: told 20/s, the server allows 20/s, 0-30 ms of jitter before it counts;
- hidden: told 1000/s, the server allows 10/s;
- shift: told 20/s, the server allows 20/s, 6/s from t=4 s, 20/s again from t=10 s (a
  quota shared with the user's MCP calls for a while);
- spurious: told 100,000/s, no quota, but 5% of answers a 429 (``retryAfter`` 0.2 s).

Clients, side by side in one run:

- ``magisterium_async``: ``AsyncMagisterium(rate_limits=RateLimits(told, told,
  period=1))``, ``max_concurrency=16``, the default ``RetryPolicy``;
- ``botocore adaptive``: what AWS SDKs ship for exactly this, botocore's own
  ``CubicCalculator``, ``RateClocker`` and ``TokenBucket`` driven as its
  ``ClientRateLimiter`` drives them (the bucket is off until the first throttle, then
  ``min(cubic rate, 2 x measured rate)``), and its standard retry delay
  ``rand * min(2**(n-1), 20) s``, raised to the server's wait (up to 5 s more) as it does
  for ``x-amz-retry-after``; retried until success (botocore stops after 3 attempts);
- ``naive``: raw aiohttp, each call that gets a 429 sleeps its ``retryAfter`` and tries
  again.

``ideal`` is the shortest wall time the server allows: the start of the window that
admits the last request (plus the jitter); for spurious there is none, and the yardstick
is the naive loop (a 429 costs every client its 0.2 s). 429s are counted by the server.
``--quick`` runs every scenario in a quarter of the time (windows of 0.25 s, waits and
jitter scaled alike) with fewer requests.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ._report import Row, Section
from ._server import ServerProcess

__all__ = [
    "SCENARIOS",
    "BotocoreAdaptive",
    "Scenario",
    "botocore_delay",
    "drive_loop",
    "message_body",
    "run",
]

OURS = "magisterium_async"
BOTOCORE = "botocore"
NAIVE = "naive"
LABELS = {OURS: OURS, BOTOCORE: "botocore adaptive", NAIVE: "naive retry-after loop"}
CONCURRENCY = 16
MAX_ATTEMPTS = 200


@dataclass(frozen=True)
class Scenario:
    """One row of the issue's table, at scale 1 (windows of one second)."""

    key: str
    title: str
    told: float
    schedule: tuple[tuple[float, int], ...]  # (seconds, limit per window); () = no quota
    requests: int
    quick_requests: int
    jitter: float = 0.0
    spurious: float = 0.0
    spurious_wait: float = 0.2
    max_429: float | None = None  # per success
    max_wall: float | None = None  # x ideal (x the naive loop for spurious)

    def server_args(self, scale: float) -> list[str]:
        period = f"{scale:g}"
        if not self.schedule:
            wait = f"{self.spurious_wait * scale:g}"
            return ["--spurious", str(self.spurious), "--spurious-wait", wait, "--period", period]
        steps = ",".join(f"{at * scale:g}:{limit}" for at, limit in self.schedule)
        return ["--schedule", steps, "--period", period, "--jitter", f"{self.jitter * scale:g}"]

    def ideal(self, requests: int, scale: float) -> float:
        """Seconds until the window that admits the last request opens (plus the jitter)."""
        if not self.schedule:
            return math.nan
        admitted, window = 0, 0
        while True:
            t = window * 1.0
            limit = next(limit for at, limit in reversed(self.schedule) if t >= at)
            if admitted + limit >= requests:
                return (t + self.jitter) * scale
            admitted += limit
            window += 1


SCENARIOS = (
    Scenario(
        "right", "right: told 20/s, server 20/s, 0-30 ms jitter", 20, ((0, 20),), 200, 60,
        jitter=0.03, max_429=0.02, max_wall=1.15,
    ),
    Scenario(
        "hidden", "hidden: told 1000/s, server 10/s", 1000, ((0, 10),), 300, 60,
        max_429=0.10, max_wall=1.10,
    ),
    Scenario(
        "shift", "shift: told 20/s, server 20 -> 6 (t=4 s) -> 20/s (t=10 s)", 20,
        ((0, 20), (4, 6), (10, 20)), 250, 130, max_429=0.10, max_wall=1.20,
    ),
    Scenario(
        "spurious", "spurious: told 100,000/s, no quota, 5% random 429 (0.2 s)", 100_000,
        (), 400, 100, spurious=0.05, max_wall=2.0,
    ),
)  # fmt: skip


def message_body(index: int, skill: str = "search") -> bytes:
    """A ``message/send`` for a ``document_search`` (``skill="search"``) or a
    ``document_fetch`` (``"fetch"``), as the hand-written clients send it."""
    part: dict[str, Any] = {"kind": "text", "text": f"grace {index}"}
    if skill == "fetch":
        part = {"kind": "data", "data": {"id": str(index)}}
    message = {
        "role": "user",
        "kind": "message",
        "messageId": f"bench-{index}-{time.monotonic_ns()}",
        "parts": [part],
        "metadata": {"skillId": f"document_{skill}"},
    }
    params = {"message": message}
    return json.dumps(
        {"jsonrpc": "2.0", "id": index, "method": "message/send", "params": params}
    ).encode()


async def _reset(server: ServerProcess) -> None:
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.post(server.origin + "/_bench/reset") as response,
    ):
        await response.read()


async def _ours(server: ServerProcess, scenario: Scenario, n: int, scale: float) -> int:
    from magisterium_async import AsyncMagisterium, RateLimits

    limits = RateLimits(scenario.told, scenario.told, period=scale)
    client = AsyncMagisterium(
        token=server.token,
        base_url=server.base_url,
        rate_limits=limits,
        max_concurrency=CONCURRENCY,
    )
    errors = 0

    async def one(index: int) -> None:
        nonlocal errors
        try:
            await client.search(f"grace {index}")
        except Exception:
            errors += 1

    async with client:
        await _reset(server)
        await asyncio.gather(*(one(i) for i in range(n)))
    return errors


class _Clock:
    """botocore's bucket clock, on the monotonic clock."""

    def current_time(self) -> float:
        return time.monotonic()

    def sleep(self, amount: float) -> None:  # never called: the driver sleeps in asyncio
        raise AssertionError("the adaptive driver never blocks")


class BotocoreAdaptive:
    """botocore's adaptive-mode pieces, driven as its ``ClientRateLimiter`` drives them,
    but awaiting the token bucket instead of blocking a thread on it."""

    def __init__(self) -> None:
        from botocore.retries.adaptive import RateClocker
        from botocore.retries.bucket import TokenBucket
        from botocore.retries.throttling import CubicCalculator

        self.clock = _Clock()
        self.cubic = CubicCalculator(starting_max_rate=0, start_time=self.clock.current_time())
        self.bucket = TokenBucket(max_rate=1, clock=self.clock)
        self.clocker = RateClocker(self.clock)
        self.enabled = False

    async def before_send(self) -> None:
        from botocore.exceptions import CapacityNotAvailableError

        while self.enabled:
            try:
                self.bucket.acquire(1, block=False)
                return
            except CapacityNotAvailableError:
                missing = 1 - self.bucket.available_capacity
                await asyncio.sleep(max(missing / self.bucket.max_rate, 0.001))

    def after_response(self, throttled: bool) -> None:
        measured = self.clocker.record()
        now = self.clock.current_time()
        if throttled:
            rate = measured if not self.enabled else min(measured, self.bucket.max_rate)
            new_rate = self.cubic.error_received(rate, now)
            self.enabled = True
        else:
            new_rate = self.cubic.success_received(now)
        if self.enabled:
            self.bucket.max_rate = min(new_rate, 2 * measured)


async def _loop(
    server: ServerProcess,
    n: int,
    *,
    before: Callable[[], Awaitable[None]] | None,
    after: Callable[[bool], None] | None,
    delay: Callable[[int, float], float],
) -> int:
    return await drive_loop(
        server.base_url,
        server.token,
        n,
        before=before,
        after=after,
        delay=delay,
        started=lambda: _reset(server),
    )


async def drive_loop(
    base_url: str,
    token: str,
    n: int,
    *,
    before: Callable[[], Awaitable[None]] | None,
    after: Callable[[bool], None] | None,
    delay: Callable[[int, float], float],
    started: Callable[[], Awaitable[None]],
    skill: str = "search",
) -> int:
    """Send ``n`` requests, ``CONCURRENCY`` in flight, each retried until it succeeds:
    ``before`` each attempt, ``after(throttled)`` each answer, ``delay(attempt,
    retry_after)`` after a 429. ``started`` is awaited once the session is open (the
    server's reset, or the cue that every process starts together). Returns the errors."""
    import aiohttp

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(CONCURRENCY)
    errors = 0

    async def one(session: aiohttp.ClientSession, index: int) -> None:
        nonlocal errors
        body = message_body(index, skill)
        async with gate:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                if before is not None:
                    await before()
                async with session.post(base_url, data=body) as response:
                    answer = json.loads(await response.read())
                throttled = response.status == 429
                if after is not None:
                    after(throttled)
                if not throttled:
                    if "result" not in answer:
                        errors += 1
                    return
                await asyncio.sleep(delay(attempt, float(answer["error"]["data"]["retryAfter"])))
            errors += 1

    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        await started()
        await asyncio.gather(*(one(session, i) for i in range(n)))
    return errors


def botocore_delay(seed: int = 7) -> Callable[[int, float], float]:
    """botocore's standard retry delay, raised to the server's wait (up to 5 s more)."""
    rng = random.Random(seed)

    def delay(attempt: int, retry_after: float) -> float:
        backoff = rng.random() * min(2.0 ** (attempt - 1), 20.0)
        return max(backoff, min(retry_after, backoff + 5.0))

    return delay


async def _botocore(server: ServerProcess, scenario: Scenario, n: int, scale: float) -> int:
    adaptive = BotocoreAdaptive()
    return await _loop(
        server,
        n,
        before=adaptive.before_send,
        after=adaptive.after_response,
        delay=botocore_delay(),
    )


async def _naive(server: ServerProcess, scenario: Scenario, n: int, scale: float) -> int:
    return await _loop(server, n, before=None, after=None, delay=lambda _, wait: wait)


CLIENTS = {OURS: _ours, BOTOCORE: _botocore, NAIVE: _naive}


def _measure(
    server: ServerProcess, scenario: Scenario, client: str, n: int, scale: float
) -> dict[str, Any]:
    ideal = scenario.ideal(n, scale)
    limit = max(30.0 * scale, 4 * ideal) if math.isfinite(ideal) else 20.0 * scale
    started = time.perf_counter()
    try:
        errors = asyncio.run(asyncio.wait_for(CLIENTS[client](server, scenario, n, scale), limit))
    except ImportError as exc:
        return {"unavailable": f"{exc}"}
    except asyncio.TimeoutError:
        stats = server.stats()
        return {
            "error": f"{stats['ok']} of {n} done when stopped after {limit:g} s "
            f"({stats['rate_limited']} x 429)",
            "stopped": {"after": limit, **stats},
        }
    wall = time.perf_counter() - started
    stats = server.stats()
    result: dict[str, Any] = {
        "wall": wall,
        "ideal": ideal,
        "ok": stats["ok"],
        "rate_limited": stats["rate_limited"],
        "errors": errors,
    }
    result["per_success"] = result["rate_limited"] / max(result["ok"], 1)
    result["x_ideal"] = wall / ideal if math.isfinite(ideal) and ideal > 0 else math.nan
    if errors or result["ok"] != n:
        result["error"] = f"{result['ok']} of {n} requests answered, {errors} client errors"
    return result


def _beats(scenario: Scenario, ours: dict[str, Any], peer: dict[str, Any], key: str) -> bool:
    if scenario.spurious and key == "rate_limited":
        # Random 429s cost every client alike: a tie within the noise counts.
        return bool(ours[key] <= 1.15 * peer[key] + 2)
    return bool(ours[key] <= peer[key])


def run(quick: bool) -> Section:
    scale = 0.25 if quick else 1.0
    section = Section(
        "quota",
        "Quota use against a fixed-window server: 429s and wall time",
        setup=(
            f"window server in its own process, windows of {scale:g} s"
            + (" (--quick: every time scaled by 0.25)" if quick else "")
            + f"; all requests fired at once, {CONCURRENCY} in flight; clients: "
            "magisterium_async, botocore adaptive (CubicCalculator + RateClocker + "
            "TokenBucket), naive retry-after loop; 429s counted by the server"
        ),
    )
    data: dict[str, dict[str, Any]] = {}
    for scenario in SCENARIOS:
        n = scenario.quick_requests if quick else scenario.requests
        results: dict[str, Any] = {}
        with ServerProcess("window", *scenario.server_args(scale)) as server:
            for client in CLIENTS:
                results[client] = _measure(server, scenario, client, n, scale)
        data[scenario.key] = {"requests": n, **results}
        ours = results[OURS]
        if "error" in ours or "unavailable" in ours:
            section.fail(f"{scenario.key}: {ours.get('error') or ours.get('unavailable')}")
        naive_wall = results[NAIVE].get("wall", math.nan)
        for client, result in results.items():
            label = LABELS[client]
            if "wall" not in result:
                message = result.get("error") or result.get("unavailable", "")
                section.rows.append(Row(scenario.title, label, "n/a", message))
                continue
            if scenario.spurious:
                versus = f"wall {result['wall'] / naive_wall:.2f}x the naive loop's"
            else:
                versus = f"wall {result['x_ideal']:.2f}x ideal ({result['ideal']:.2f} s)"
            detail = f"{result['rate_limited']} x 429 for {result['ok']}; {result['wall']:.2f} s"
            if "error" in result:
                detail += f"; {result['error']}"
            text = f"{result['per_success']:.3f} 429s/success, {versus}"
            section.rows.append(Row(scenario.title, label, text, detail))
        _goals(section, scenario, results)
    section.data = {"scenarios": data, "scale": scale, "concurrency": CONCURRENCY}
    return section


def _goals(section: Section, scenario: Scenario, results: dict[str, Any]) -> None:
    ours = results[OURS]
    if "wall" not in ours:
        return
    checks: list[tuple[str, bool]] = []
    if scenario.max_429 is not None:
        checks.append(
            (f"<= {scenario.max_429:g} 429s/success", ours["per_success"] <= scenario.max_429)
        )
    if scenario.max_wall is not None:
        if scenario.spurious:
            naive = results[NAIVE]
            ok = "wall" in naive and ours["wall"] <= scenario.max_wall * naive["wall"]
            checks.append((f"wall <= {scenario.max_wall:g}x the naive loop", ok))
        else:
            ok = ours["x_ideal"] <= scenario.max_wall
            checks.append((f"wall <= {scenario.max_wall:g}x ideal", ok))
    peers = []
    for client, keys in ((BOTOCORE, ("rate_limited", "wall")), (NAIVE, ("rate_limited",))):
        peer = results[client]
        if "wall" in peer:
            met = all(_beats(scenario, ours, peer, key) for key in keys)
            peers.append(met)
            what = "429s and wall" if len(keys) == 2 else "429s"
            checks.append((f"beats {LABELS[client]} on {what}", met))
    detail = (
        f"{ours['per_success']:.3f} 429s/success, "
        + (f"wall {ours['x_ideal']:.2f}x ideal" if not scenario.spurious else "")
        + (
            f"wall {ours['wall'] / results[NAIVE]['wall']:.2f}x naive"
            if scenario.spurious and "wall" in results[NAIVE]
            else ""
        )
        + "; vs botocore "
        + _versus(ours, results[BOTOCORE])
        + ", vs naive "
        + _versus(ours, results[NAIVE])
    )
    section.goal(
        f"{scenario.key}: " + "; ".join(text for text, _ in checks),
        all(met for _, met in checks),
        detail,
    )


def _versus(ours: dict[str, Any], peer: dict[str, Any]) -> str:
    if "wall" not in peer:
        return "n/a"
    walls = f"{ours['wall']:.2f} vs {peer['wall']:.2f} s"
    return f"{ours['rate_limited']} vs {peer['rate_limited']} x 429, {walls}"
