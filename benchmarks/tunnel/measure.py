"""The wind tunnel's figures: one scenario's, and each group's distribution against its floor."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from benchmarks.tunnel.run import naive, oracle, percentile, run_sdk, run_stand_in
from benchmarks.tunnel.scenarios import Floor, Group, Scenario
from benchmarks.tunnel.server import Arrival, Window


@dataclass
class Figures:
    """One run of one scenario (one seed). ``None``: not measured for this scenario."""

    scenario: Scenario
    seed: int
    successes: int
    refused: int  # 429s to our requests
    wall: float  # virtual seconds until the last call ended
    ideal: float  # the oracle's (the naive loop's, for random 429s)
    latency: float | None = None  # p95 of the interactive calls' waits, in windows
    over: int | None = None  # our starts over the limit in the busiest window
    recovered: int | None = None  # the window (1-based) by which the told rate is back
    heard: int | None = None  # 429s to requests sent after the first 429 came back
    quota_used: float | None = None  # admitted / what the server could admit meanwhile

    @property
    def refused_per_success(self) -> float:
        return self.refused / max(self.successes, 1)

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal if self.ideal > 0 else math.nan

    @property
    def extra_429s(self) -> float:
        """429s beyond the first window's overshoot, which no client can avoid."""
        s = self.scenario
        return self.refused - max(0.0, min(s.told, s.in_flight * s.procs) - s.allowed)

    @property
    def used(self) -> float:
        return self.quota_used if self.quota_used is not None else math.nan


def _most_in_window(arrivals: list[Arrival], period: float) -> int:
    times = [a.time for a in arrivals]
    most, first = 0, 0
    for last, t in enumerate(times):
        while times[first] <= t - period:
            first += 1
        most = max(most, last - first + 1)
    return most


def _capacity(scenario: Scenario, pool: str, until: float) -> int:
    """How many requests the server could have admitted from 0 to ``until``."""
    limit = scenario.expensive if pool == "expensive" else scenario.allowed
    window = Window(scenario.kind, scenario.period, lambda t: limit)
    t, admitted = 0.0, 0
    while t <= until + 1e-9:
        wait = window.take(t)
        if wait == 0:
            admitted += 1
        else:
            t += wait
    return admitted


def _after_heard(arrivals: list[Arrival], latency: float, jitter: float) -> int:
    refused = [a.time for a in arrivals if not a.admitted]
    if not refused:
        return 0
    heard = refused[0] + 2 * latency + jitter  # nothing sent before the client heard arrives later
    return sum(1 for t in refused if t > heard)


def _recovered(arrivals: list[Arrival], period: float, allowed: int) -> int | None:
    counts: dict[int, int] = {}
    for a in arrivals:
        if a.admitted:
            index = math.floor(a.time / period)
            counts[index] = counts.get(index, 0) + 1
    for index in sorted(counts):
        if index >= 1 and counts[index] >= allowed:
            return index + 1
    return None


async def measure(scenario: Scenario, seed: int) -> Figures:
    """Run ``scenario`` with ``seed`` through the SDK and its yardstick."""
    timeline, server, _ = await run_sdk(scenario, seed)
    yardstick = naive if scenario.spurious and scenario.told >= 10**5 else oracle
    ideal_timeline, _ = await run_stand_in(scenario, seed, yardstick)
    pool = "expensive" if scenario.arrivals == "ask" else "default"
    ours = server.ours(pool)
    figures = Figures(
        scenario,
        seed,
        successes=sum(a.admitted for a in ours),
        refused=sum(not a.admitted for a in ours),
        wall=timeline.end,
        ideal=ideal_timeline.end,
    )
    if timeline.latencies:
        figures.latency = percentile(timeline.latencies, 0.95) / scenario.period
    if scenario.group == "the Pro quota in virtual time":
        limit = scenario.expensive if pool == "expensive" else scenario.allowed
        figures.over = max(0, _most_in_window(ours, scenario.period) - limit)
    if scenario.other is not None and scenario.other.mode == "spent":
        figures.recovered = _recovered(ours, scenario.period, scenario.allowed)
        figures.heard = _after_heard(ours, server.latency, server.jitter)
    admitted = [a.time for a in ours if a.admitted]
    if admitted and scenario.other is None and scenario.drop is None:
        figures.quota_used = len(admitted) / _capacity(scenario, pool, admitted[-1])
    return figures


@dataclass
class Verdict:
    """A group's distribution of each judged figure, and whether its p95 meets the floor."""

    group: Group
    figures: list[Figures]
    rows: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # p50, p95, worst
    misses: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return not self.misses


# figure name -> (how to read it from Figures, whether higher is better)
_READ = {
    "refused": (lambda f: f.refused_per_success, False),
    "wall": (lambda f: f.ratio, False),
    "extra_429s": (lambda f: f.extra_429s, False),
    "heard": (lambda f: f.heard, False),
    "latency": (lambda f: f.latency, False),
    "used": (lambda f: f.used, True),
    "over": (lambda f: f.over, False),
    "recovered": (lambda f: f.recovered if f.recovered is not None else math.inf, False),
}


def judge(group: Group, figures: list[Figures]) -> Verdict:
    """Each figure the group's floor (or, where it has none, its target) names: p50, p95
    (p5 where higher is better) and worst; a p95 past the floor is a miss."""
    verdict = Verdict(group, figures)
    floor: Floor = group.floor
    for name, (read, higher) in _READ.items():
        limit = getattr(floor, name)
        if limit is None and getattr(group.target, name) is None:
            continue
        values = [v for f in figures if (v := read(f)) is not None]
        if not values:
            continue
        p50 = percentile(values, 0.5)
        p95 = percentile(values, 0.05 if higher else 0.95)
        worst = min(values) if higher else max(values)
        verdict.rows[name] = (p50, p95, worst)
        if limit is not None and ((p95 < limit) if higher else (p95 > limit)):
            verdict.misses.append(f"{name} p95 {p95:.3g} (floor {limit:g})")
    if floor.spread is not None:
        spreads = []
        by_scenario: dict[str, list[float]] = {}
        for f in figures:
            by_scenario.setdefault(f.scenario.name, []).append(f.ratio)
        spreads = [max(r) - min(r) for r in by_scenario.values()]
        p95 = percentile(spreads, 0.95)
        verdict.rows["spread"] = (percentile(spreads, 0.5), p95, max(spreads))
        if p95 > floor.spread:
            verdict.misses.append(f"spread p95 {p95:.3g} (floor {floor.spread:g})")
    return verdict


def run_group(group: Group, seeds: tuple[int, ...]) -> Verdict:
    """Every scenario of ``group`` with every seed, each in a fresh event loop."""
    figures = [asyncio.run(measure(s, seed)) for s in group.scenarios for seed in seeds]
    return judge(group, figures)


def timed_group(group: Group, seeds: tuple[int, ...]) -> tuple[Verdict, float]:
    """:func:`run_group`, and the seconds it took."""
    begun = time.perf_counter()
    verdict = run_group(group, seeds)
    return verdict, time.perf_counter() - begun
