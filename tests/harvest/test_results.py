"""What a harvest counts: its stats, timed on the client's clock, counting its 429s."""

from __future__ import annotations

from magisterium_async._harvest import harvest
from magisterium_async.testing import VirtualClock
from tests.helpers.harvest_fakes import FakeClient


async def test_stats_are_timed_on_the_clients_clock_and_count_its_429s() -> None:
    clock = VirtualClock(start=1000.0)
    client = FakeClient()
    client.rate_limited = 5  # met before the harvest: not counted
    h = harvest(client, ["a", "b"], clock=clock)
    async with h:
        await h.__anext__()
        client.rate_limited = 7
        await clock.advance(3.0)
        assert h.stats.elapsed == 3.0
        async for _ in h:
            pass
    assert h.stats.started == 1000.0 and h.stats.finished == 1003.0
    assert h.stats.rate_limited == 2
