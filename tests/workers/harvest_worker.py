"""A harvest into a state file and a JSON Lines file, as the CLI runs it; for test_harvest.

Usage: ``python harvest_worker.py BASE_URL STATE OUTPUT QUERIES [PAUSE_AFTER]`` with the
token in ``$MAGISTERIUM_TOKEN``. Prints each document id once written; after
``PAUSE_AFTER`` documents it prints ``PAUSED`` and waits forever (to be killed with -9).
At the end it prints ``DONE`` with the documents resumed from the state and skipped.
"""

from __future__ import annotations

import asyncio
import sys

from magisterium_async import AsyncMagisterium, JsonlWriter, RateLimits


async def main(base_url: str, state: str, output: str, queries: int, pause_after: int) -> None:
    client = AsyncMagisterium(base_url=base_url, rate_limits=RateLimits.unlimited())
    documents = client.harvest(
        (f"grace nature word{i}" for i in range(queries)),
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
            print(document.id, flush=True)
            written += 1
            if written == pause_after:
                print("PAUSED", flush=True)
                await asyncio.Event().wait()
    print(f"DONE resumed={documents.stats.resumed} skipped={out.skipped}", flush=True)


if __name__ == "__main__":
    base_url, state, output, queries = sys.argv[1:5]
    pause_after = int(sys.argv[5]) if len(sys.argv) > 5 else -1
    asyncio.run(main(base_url, state, output, int(queries), pause_after))
