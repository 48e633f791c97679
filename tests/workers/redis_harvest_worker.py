"""One worker of a harvest shared through Redis, for test_redis.

Usage: ``python redis_harvest_worker.py BASE_URL REDIS_URL STATE OUTPUT QUERIES
[PAUSE_AFTER]`` with the token in ``$MAGISTERIUM_TOKEN``. Waits for a line on stdin,
then harvests; after ``PAUSE_AFTER`` documents prints ``PAUSED`` and waits (to be
killed). At the end prints ``DONE`` and a JSON line of counters.
"""

from __future__ import annotations

import asyncio
import json
import sys

from magisterium_async import AsyncMagisterium, RateLimits
from magisterium_async._harvest._harvest import harvest
from magisterium_async._harvest._jsonl import JsonlWriter
from magisterium_async._harvest._redis_harvest import (
    CoordinatedClient,
    Coordinator,
    claimed_queries,
    worker_identity,
)


async def main(
    base_url: str, redis_url: str, state: str, output: str, queries: int, pause_after: int
) -> None:
    client = AsyncMagisterium(base_url=base_url, rate_limits=RateLimits.unlimited())
    coordinator = Coordinator(redis_url, "test-job", worker_identity(state))
    await coordinator.hydrate(state)
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    source = claimed_queries((f"grace nature word{i}" for i in range(queries)), coordinator)
    documents = harvest(
        CoordinatedClient(client, coordinator),
        source,
        state=state,
        concurrency=4,
        acknowledge="manual",
    )
    async with (
        client,
        documents,
        JsonlWriter(output, batch_size=4, on_durable=documents.acknowledge) as out,
    ):
        written = 0
        async for document in documents:
            await out.write(document)
            written += 1
            if written == pause_after:
                print("PAUSED", flush=True)
                await asyncio.Event().wait()
    await coordinator.aclose()
    print("DONE", flush=True)
    print(
        json.dumps(
            {
                "searched": documents.stats.searched,
                "fetched": documents.stats.fetched,
                "failed": documents.stats.failed,
                "skipped_queries": coordinator.skipped_queries,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    base_url, redis_url, state, output, queries = sys.argv[1:6]
    pause_after = int(sys.argv[6]) if len(sys.argv) > 6 else -1
    asyncio.run(main(base_url, redis_url, state, output, int(queries), pause_after))
