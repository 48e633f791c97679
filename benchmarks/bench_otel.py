"""What the telemetry hooks cost with no provider configured: client CPU per call, before
and after.

``python -m benchmarks.bench_otel [--calls N] [--rounds R] [--base REV]``

Each mode runs in a fresh process: N ``document_search`` calls (20 at a time) through
``MockTransport`` answering the canned 10-hit search Task, so no socket and no server
share the CPU and the client's own cost is all that is measured (the harshest case for
any overhead: over real HTTP each call costs more and the hooks' share is smaller).

- ``base``: the package as it was at ``REV`` (default: where this branch left main),
  extracted with ``git archive``: the client before the hooks;
- ``head``: this tree, opentelemetry-api installed, no provider configured (the default
  for every user who does not ask for telemetry);
- ``head, no extra``: this tree as if opentelemetry were not installed;
- ``head, SDK provider``: for scale, tracing and metrics on (spans to a no-op exporter).

Rounds are interleaved and the median kept; the figure that matters is ``head`` over
``base``, at most 1.03. On a loaded machine two processes' CPU per call differ by more
than that from noise alone, so the hooks are also timed by themselves (``timeit`` of
exactly what a call without a provider runs more than before) and set against a call's
CPU: that share is the steadier figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("base", "head", "head, no extra", "head, SDK provider")

_HITS = [
    {"id": str(10000 + i), "url": f"https://www.magisterium.com/d/{i}", "title": f"Doc {i}"}
    for i in range(10)
]
_TASK = {
    "kind": "task",
    "id": "t",
    "contextId": "c",
    "status": {"state": "completed"},
    "artifacts": [
        {
            "artifactId": "a",
            "name": "search_results",
            "parts": [{"kind": "data", "data": {"results": _HITS}}],
        }
    ],
}


async def _calls(n: int, mode: str) -> float:
    import magisterium_async as m
    from magisterium_async.testing import MockResponse, MockTransport

    options: dict[str, Any] = {}
    if mode == "head, SDK provider":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        options = {"tracer_provider": TracerProvider(), "meter_provider": MeterProvider()}
    transport = MockTransport(lambda request: MockResponse.result(request, _TASK))
    async with m.AsyncMagisterium(
        token="t",
        base_url="https://a2a.example/api",
        transport=transport,
        rate_limits=m.RateLimits.unlimited(),
        **options,
    ) as client:

        async def batch(size: int) -> None:
            await asyncio.gather(*(client.search("grace") for _ in range(size)))

        for _ in range(10):  # warm up: imports, caches, the first pool round
            await batch(20)
        started = time.process_time()
        for _ in range(n // 20):
            await batch(20)
        return (time.process_time() - started) / (n // 20 * 20) * 1e6


def _hooks_us(n: int = 100_000) -> float:
    """Microseconds per call of the code telemetry adds when no provider is configured:
    its subscriber hearing one call's events (begun, a request sent and answered, ended)
    and the trace-context check of the request, timed inside a running loop."""
    import timeit

    from magisterium_async._events import AnswerEvent, CallEvent, PoolEvent
    from magisterium_async._telemetry import Telemetry, with_trace_context

    telemetry = Telemetry("https://a2a.example/api")
    headers = {"Content-Type": "application/json"}
    call = (
        CallEvent("call_started", "default", 0.0, 0.0, "message/send", None),
        PoolEvent("sent", "default", 0.0, 0.0),
        AnswerEvent("answered", "default", 0.0, 0.1, "message/send", "ok", None),
        CallEvent("call_ended", "default", 0.1, 0.1, "message/send", None),
    )

    def hooks() -> None:
        for event in call:
            telemetry(event)
        with_trace_context(headers)

    async def measure() -> float:
        cpu = timeit.repeat(hooks, number=n, repeat=5, timer=time.process_time)
        return min(cpu) / n * 1e6

    return asyncio.run(measure())


def _worker(mode: str, n: int) -> None:
    if mode == "head, no extra":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    print(json.dumps({"us_per_call": asyncio.run(_calls(n, mode))}))


def _base_tree(rev: str, into: Path) -> Path:
    base = subprocess.run(
        ["git", "merge-base", "HEAD", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", base, "magisterium_async"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_otel", description=__doc__)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", default="main")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.calls)
        return 0
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_tree(args.base, Path(tmp))
        for _ in range(args.rounds):
            for mode in MODES:
                path = str(base if mode == "base" else ROOT)
                env = {**os.environ, "PYTHONPATH": path}
                done = subprocess.run(
                    [sys.executable, __file__, "--worker", mode, "--calls", str(args.calls)],
                    cwd=tmp,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
                samples[mode].append(json.loads(done.stdout.splitlines()[-1])["us_per_call"])
    hooks = _hooks_us()
    base_median = statistics.median(samples["base"])
    print(f"client CPU per call, median of {args.rounds} rounds of {args.calls} calls")
    for mode in MODES:
        ratios = [h / b for h, b in zip(samples[mode], samples["base"], strict=True)]
        print(
            f"  {mode:<20} {statistics.median(samples[mode]):7.1f} µs"
            f"   x{statistics.median(ratios):.3f} of base (paired)"
            f"   x{statistics.median(samples[mode]) / base_median:.3f} (medians)"
        )
    head = statistics.median(samples["head"])
    print(f"  the hooks alone: {hooks:.2f} µs a call, {hooks / head:.1%} of a call's CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
