"""One process of a shared quota, for tests/ratelimit/test_shared.py and the benchmarks.

Usage: ``python redis_quota_worker.py BASE_URL REDIS_URL SEARCHES DEFAULT PERIOD WORKERS
MARGIN`` with the token in ``$MAGISTERIUM_TOKEN`` (``MARGIN``: the safety margin, seconds).
Waits for a line on stdin (so every worker starts together), fires its searches at once,
prints one JSON line with its counters.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from magisterium_async import AsyncMagisterium, RateLimits
from magisterium_async._ratelimit import SharedQuota


async def main(
    base_url: str,
    redis_url: str,
    searches: int,
    limit: float,
    period: float,
    workers: int,
    margin: float,
) -> None:
    client = AsyncMagisterium(
        base_url=base_url,
        rate_limits=RateLimits(limit, 2, period=period, safety_margin=margin),
        shared_quota=SharedQuota(redis_url, workers=workers),
    )
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        try:
            await client.search(f"grace nature {i}")
        except Exception:
            errors += 1

    async with client:
        print("READY", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(searches)))
        wall = time.monotonic() - started
        stats = client.stats.default
    print(
        json.dumps(
            {"errors": errors, "rate_limited": stats.rate_limited, "sent": stats.sent, "wall": wall}
        ),
        flush=True,
    )


if __name__ == "__main__":
    url, redis_url, searches, limit, period, workers, margin = sys.argv[1:8]
    numbers = int(searches), float(limit), float(period), int(workers), float(margin)
    asyncio.run(main(url, redis_url, *numbers))
