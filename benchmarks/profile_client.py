"""Where this SDK's per-request time goes:
``python -m benchmarks.profile_client [N] [--gather]``.

Runs N ``client.search`` calls (default 3000, concurrency 16, limits lifted) against the
canned server of ``bench_client`` under cProfile (each call its own query), and prints
the functions with the most time of their own, then the ones with the most time in all
they call, limited to the ``magisterium_async`` package and to aiohttp's client request
path. By 16 worker tasks, or with ``--gather`` all N at once through ``asyncio.gather``
(``max_concurrency=16`` holding the rest back), as ``bench_client``'s gather pattern does.
"""

from __future__ import annotations

import asyncio
import cProfile
import itertools
import pstats
import sys
import tempfile
from pathlib import Path

from ._fixtures import build_fixtures
from ._server import ServerProcess

CONCURRENCY = 16


async def _run(base_url: str, token: str, n: int, profile: cProfile.Profile, gather: bool) -> None:
    from magisterium_async import AsyncMagisterium, RateLimits

    client = AsyncMagisterium(
        token=token,
        base_url=base_url,
        rate_limits=RateLimits.unlimited(),
        max_concurrency=CONCURRENCY,
    )
    async with client:
        await asyncio.gather(*(client.search(f"warm up {i}") for i in range(200)))
        remaining = n
        queries = itertools.count(1)  # each call its own query: none shared in flight

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await client.search(f"grace and nature {next(queries)}")

        profile.enable()
        if gather:
            await asyncio.gather(*(client.search(f"grace and nature {i}") for i in range(n)))
        else:
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        profile.disable()


def main(argv: list[str]) -> int:
    gather = "--gather" in argv
    numbers = [a for a in argv[1:] if a != "--gather"]
    n = int(numbers[0]) if numbers else 3000
    with tempfile.TemporaryDirectory(prefix="magisterium-profile-") as tmp:
        body = Path(tmp) / "search_10.json"
        body.write_bytes(build_fixtures()["search_10"])
        with ServerProcess("canned", "--body-file", str(body)) as server:
            profile = cProfile.Profile()
            asyncio.run(_run(server.base_url, server.token, n, profile, gather))
    stats = pstats.Stats(profile)
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    pattern = "gathered at once" if gather else f"by {CONCURRENCY} workers"
    print(f"{n} requests {pattern}, {total / n * 1e6:.0f} us of profiled time per request\n")
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats("magisterium_async", 25)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
