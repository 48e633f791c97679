"""What each mechanism of the engine is worth: the wind tunnel run with it switched off.

``python -m benchmarks.tunnel.ablate [--only NAME] [--jobs N]`` runs the whole matrix once
as the engine is, then once per mechanism with that one switched off (patched in this
process and its workers, never in the package), and prints each group's p95 figures
beside the engine's, marking every floor the switch breaks. docs/rate-limits-internals.md
gives the table.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import math
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.tunnel.measure import Figures, Verdict, judge, measure
from benchmarks.tunnel.scenarios import SEEDS, Scenario, matrix
from magisterium_async._ratelimit import _rule, _shared


def _patch(obj: Any, name: str, value: Any) -> Callable[[], Iterator[None]]:
    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        old = getattr(obj, name)
        setattr(obj, name, value)
        try:
            yield
        finally:
            setattr(obj, name, old)

    return patched


def _constant(name: str, value: float) -> Callable[[], Iterator[None]]:
    """A constant of the rule (a shared pool's decisions are the same rule's)."""
    return _patch(_rule, name, value)


def _no_rounds() -> Callable[[], Iterator[None]]:
    """A 429 judged alone, at once, as it comes (no waiting for the answers in flight)."""
    refused = _rule.Rule.refused

    def alone(self: _rule.Rule, start: _rule.Start, now: float, wait: float) -> Any:
        verdict = refused(self, start, now, wait)
        round_ = self._round
        if verdict is None and round_ is not None and not round_.open:
            round_.pending.clear()  # nothing in flight is waited for
            verdict = self._settle(start, now)
        return verdict

    return _patch(_rule.Rule, "refused", alone)


def _no_first_round() -> Callable[[], Iterator[None]]:
    init = _rule.Rule.__init__

    def without(self: _rule.Rule, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._first = False

    return _patch(_rule.Rule, "__init__", without)


def _no_fell_short() -> Callable[[], Iterator[None]]:
    apply = _rule.Rule.apply

    def without(self: _rule.Rule, verdict: _rule.Verdict) -> None:
        if verdict.kind != "fell_short":
            apply(self, verdict)

    return _patch(_rule.Rule, "apply", without)


def _no_before() -> Callable[[], Iterator[None]]:
    step = _rule.Rule._step_up

    def without(self: _rule.Rule, now: float) -> None:
        self.before = 0
        step(self, now)

    return _patch(_rule.Rule, "_step_up", without)


MECHANISMS: dict[str, tuple[str, Callable[[], Callable[[], Iterator[None]]]]] = {
    "back to before": ("a step up goes back to what the window before took", _no_before),
    "backoff": (
        "a refused step up waits longer next time",
        lambda: _constant("MAX_BACKOFF", 1),
    ),
    "fell short": ("a few refused of many lower the rate by as many", _no_fell_short),
    "learning from answered starts (shared)": (
        "a shared lowering waits for every process's answers in that window",
        lambda: _patch(_shared, "unanswered", lambda rule, verdict, now: False),
    ),
    "shared first round": (
        "processes together send one client's first round before they know",
        lambda: _patch(_shared, "FIRST_HOLD", 0.0),
    ),
    "pacing after a short pause": (
        "a window paced after a pause shorter than a quarter window",
        lambda: _constant("REFILL", 0.0),
    ),
    "first round": ("the pool's first round answered before more go", _no_first_round),
    "the line of processes (shared)": (
        "processes waiting take the free starts in turn, interactive ones first",
        lambda: _patch(_shared.SharedPool, "_line", lambda self, rule, state, now, kind, at: at),
    ),
    "pacing a long run": (
        "bulk paced once its run lasted two windows",
        lambda: _constant("RUN", 1e9),
    ),
    "rounds": ("a 429 judged once what was in flight is answered", _no_rounds),
    "pacing while contended": (
        "bulk paced for two windows after an interactive call",
        lambda: _constant("QUIET", 0.0),
    ),
}


_HUNG_AFTER = 300  # wall seconds: a scenario takes a few at most


def _hung(signum: int, frame: object) -> None:
    raise TimeoutError


def _one(job: tuple[str | None, Scenario, int]) -> Figures:
    name, scenario, seed = job
    logging.getLogger("magisterium_async").setLevel(logging.ERROR)
    switch = MECHANISMS[name][1]() if name is not None else contextlib.nullcontext
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(_HUNG_AFTER)
    try:
        with switch():
            return asyncio.run(measure(scenario, seed))
    except TimeoutError:  # never ends: as bad as it gets
        return Figures(scenario, seed, successes=0, refused=0, wall=math.inf, ideal=1.0)
    finally:
        signal.alarm(0)


def run(name: str | None, jobs: int, seeds: int = len(SEEDS)) -> list[Verdict]:
    """The matrix with mechanism ``name`` switched off (``None``: the engine as it is),
    over the first ``seeds`` seeds."""
    groups = matrix()
    work = [(name, s, seed) for g in groups for s in g.scenarios for seed in SEEDS[:seeds]]
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        figures = list(pool.map(_one, work, chunksize=4))
    by_group: dict[str, list[Figures]] = {}
    for f in figures:
        by_group.setdefault(f.scenario.group, []).append(f)
    return [judge(g, by_group[g.name]) for g in groups]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tunnel.ablate", description=__doc__)
    parser.add_argument(
        "--only",
        default="",
        help="only the mechanisms whose names hold one of these, comma-separated",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--seeds", type=int, default=len(SEEDS), help="seeds per scenario (fewer: quicker)"
    )
    args = parser.parse_args(argv)
    base = {v.group.name: v for v in run(None, args.jobs)}
    print("| mechanism | what it does | floors broken without it (p95: with -> without) |")
    print("|---|---|---|")
    for name, (what, _) in MECHANISMS.items():
        if not any(part in name for part in args.only.split(",")):
            continue
        broken = []
        for v in run(name, args.jobs, args.seeds):
            for miss in v.misses:
                figure = miss.split(" ")[0]
                before = base[v.group.name].rows.get(figure, (math.nan,) * 3)[1]
                broken.append(f"{v.group.name}: {figure} {before:.3g} -> {miss.split(' ')[2]}")
        print(f"| {name} | {what} | {'; '.join(broken) or 'none'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
