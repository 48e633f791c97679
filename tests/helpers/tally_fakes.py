"""Stand-ins for a harvest's run and sink, and a :class:`Tally` over them, for the tests
of the figures (test_harvest_tally.py) and of their wording (test_harvest_report.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from magisterium_async import RateLimits
from magisterium_async._cli.harvest._tally import Tally
from magisterium_async._harvest import HarvestFailure, HarvestStats
from magisterium_async._ratelimit import PoolStats

__all__ = ["PRO", "pool_at", "tally_of"]

PRO = RateLimits(15, 2)


@dataclass
class _Run:
    stats: HarvestStats
    failures: list[HarvestFailure] = field(default_factory=list)


@dataclass
class _Sink:
    written: int = 0
    skipped: int = 0
    existing: int = 0


def tally_of(
    stats: HarvestStats,
    total: int | None,
    quota: RateLimits = PRO,
    *,
    written: int | None = None,
    **extra: Any,
) -> Tally:
    run: Any = _Run(stats, extra.pop("failures", []))
    sink: Any = _Sink(written=stats.fetched if written is None else written)
    sink.existing = extra.pop("existing", 0)
    return Tally(run, sink, total=total, quota=quota, **extra)


def pool_at(current_rate: float) -> PoolStats:
    return PoolStats("default", 0, 0, 0, 0.0, current_rate, 15.0, 0, 0)
