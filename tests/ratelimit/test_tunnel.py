"""The wind tunnel's floors (issue #48's table), asserted: virtual time is deterministic, so
every group's p95 over its scenarios and three seeds is the same on every run and every
Python. ``python -m benchmarks.tunnel`` prints the same table (docs/benchmarks.md).

A few CPU-minutes: marked ``soak``, so CI runs it once, alone, at the end
(``MAGISTERIUM_SOAK=1``), and the README's test command on a laptop skips it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from benchmarks.tunnel.measure import judge, measure
from benchmarks.tunnel.scenarios import SEEDS, Group, matrix

pytest.importorskip("lupa", reason="the shared scenarios run Lua scripts in fakeredis[lua]")


@pytest.mark.soak
@pytest.mark.parametrize("group", matrix(), ids=lambda g: g.name)
def test_every_group_meets_its_floor(group: Group) -> None:
    logging.getLogger("magisterium_async").setLevel(logging.ERROR)  # the waits are the point
    try:
        figures = [asyncio.run(measure(s, seed)) for s in group.scenarios for seed in SEEDS]
    finally:
        logging.getLogger("magisterium_async").setLevel(logging.NOTSET)
    verdict = judge(group, figures)
    assert verdict.met, f"{group.name}: {'; '.join(verdict.misses)}"
