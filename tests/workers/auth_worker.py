"""One of several processes sharing a credentials file: ``python auth_worker.py BASE_URL
CREDENTIALS TOKENS``.

Searches (20 a second) until it has used ``TOKENS`` distinct access tokens, that is, until
the sign-in has been refreshed that many times less one, by this process or another. Waits
for a line on stdin first, so every worker starts together. Prints one JSON line: the
calls made, those that failed, the refreshes this process sent and when (from the
library's log) and short hashes of the tokens used (never a token).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path

# Run as a script: the checkout goes on sys.path so that the tests' helpers import.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from magisterium_async import AsyncMagisterium, MagisteriumError, RateLimits
from magisterium_async._auth import StoredToken
from tests.helpers.refresh_log import counted_refreshes


async def main(base_url: str, credentials: str, target: int) -> None:
    sys.stdin.readline()
    calls = failed = 0
    seen: list[str] = []
    with counted_refreshes() as sent:
        async with AsyncMagisterium(
            base_url=base_url, credentials=credentials, rate_limits=RateLimits(20, 1, period=1)
        ) as client:
            source = client.token_source
            assert isinstance(source, StoredToken)
            while len(seen) < target and calls < 2000:
                calls += 1
                try:
                    await client.search("grace")
                except MagisteriumError as exc:
                    failed += 1
                    print(f"error: {exc}", file=sys.stderr)
                used = hashlib.sha256(source.credentials.access_token.encode()).hexdigest()[:12]
                if used not in seen:
                    seen.append(used)
    report = {
        "calls": calls,
        "failed": failed,
        "refreshes": sent.count,
        "refreshed_at": sent.times,
        "seen": seen,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
