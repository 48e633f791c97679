"""One process writing to and reading from a cache file, for tests/cache.

Usage: ``python cache_worker.py PATH PREFIX COUNT``: waits for a line on stdin (so every
worker starts together), keeps COUNT answers ``PREFIX-i``, reads every key it can see
named in the other prefixes given on stdin's line, and prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys

from magisterium_async._cache import DiskAnswers


async def main(path: str, prefix: str, count: int) -> None:
    others = sys.stdin.readline().split()
    store = DiskAnswers(path, max_entries=100_000, max_bytes=1 << 30)
    for i in range(count):
        await store.put(f"{prefix}-{i}", f"{prefix} answer {i}".encode(), 2e9, 1e9 + i)
    seen = 0
    for other in others:
        for i in range(count):
            if await store.get(f"{other}-{i}", 1e9) is not None:
                seen += 1
    own = [await store.get(f"{prefix}-{i}", 1e9) for i in range(count)]
    await store.aclose()
    ok = all(v == f"{prefix} answer {i}".encode() for i, v in enumerate(own))
    print(json.dumps({"own_intact": ok, "seen_of_others": seen}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
