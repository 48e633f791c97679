"""One of several processes sharing a sign-in kept in Redis: ``python redis_auth_worker.py
BASE_URL SECONDS CONCURRENCY [QUOTA_URL LIMIT PERIOD WORKERS]``.

The sign-in's location comes from ``$MAGISTERIUM_CREDENTIALS`` (a Redis URL), as on a host
of an orchestrator. With a quota URL the client also shares the quota through Redis
(``SharedQuota``), the default pool allowing LIMIT searches per PERIOD seconds. Says
``READY``, waits for a line on stdin (so every worker starts together), then searches with
CONCURRENCY calls at a time for SECONDS. Prints one JSON line: the calls made, those that
failed (each one's type and message: never a token), the refreshes this process sent
and when (wall-clock times, from the library's log).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script: the checkout goes on sys.path so that the tests' helpers import.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from magisterium_async import AsyncMagisterium, MagisteriumError, RateLimits, SharedQuota
from magisterium_async._auth import StoredToken
from tests.helpers.refresh_log import counted_refreshes


def client_for(base_url: str, quota: list[str]) -> AsyncMagisterium:
    if not quota:
        # 10 searches a second: enough to meet every token's expiry, not a CPU hog.
        return AsyncMagisterium(base_url=base_url, rate_limits=RateLimits(10, 2, period=1.0))
    url, limit, period, workers = quota
    return AsyncMagisterium(
        base_url=base_url,
        # A margin for the latency jitter of sixteen processes on two busy cores.
        rate_limits=RateLimits(float(limit), 2, period=float(period), safety_margin=0.25),
        shared_quota=SharedQuota(url, workers=int(workers)),
    )


async def main(base_url: str, seconds: float, concurrency: int, quota: list[str]) -> None:
    calls = 0
    errors: list[dict[str, Any]] = []
    with counted_refreshes() as sent:
        async with client_for(base_url, quota) as client:
            source = client.token_source
            assert isinstance(source, StoredToken)
            # Warm, spending no quota: a connection to the service, and the sign-in read.
            await client.agent_card()
            await source.token()
            print("READY", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            end = time.monotonic() + seconds

            async def searches(lane: int) -> None:
                nonlocal calls
                while time.monotonic() < end:
                    calls += 1
                    try:
                        await client.search(f"grace {lane} {calls}")
                    except Exception as exc:
                        errors.append(
                            {
                                "type": type(exc).__name__,
                                "magisterium": isinstance(exc, MagisteriumError),
                                "message": str(exc),
                            }
                        )

            await asyncio.gather(*(searches(lane) for lane in range(concurrency)))
    report = {
        "calls": calls,
        "failed": len(errors),
        "errors": errors[:20],
        "refreshes": sent.count,
        "refreshed_at": sent.times,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:8]))
