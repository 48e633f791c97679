"""``python -m benchmarks.tunnel [--group TEXT] [--jobs N] [--worst K] [--out FILE]``."""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time
from pathlib import Path

from benchmarks.tunnel.measure import Figures, Verdict, judge, measure
from benchmarks.tunnel.scenarios import SEEDS, Scenario, matrix

_FORMAT = {
    "refused": "{:.3f}",
    "wall": "{:.2f}x",
    "extra_429s": "{:.0f}",
    "heard": "{:.0f}",
    "latency": "{:.2f}",
    "used": "{:.2f}",
    "over": "{:.0f}",
    "recovered": "{:.0f}",
    "spread": "{:.3f}",
}
_LABEL = {
    "refused": "429s per success",
    "wall": "wall / ideal",
    "extra_429s": "429s past the first window's overshoot",
    "heard": "429s once the first came back",
    "latency": "interactive wait (windows)",
    "used": "quota used",
    "over": "starts over the limit in a window",
    "recovered": "window the told rate is back",
    "spread": "spread between seeds (wall)",
}


def _one(job: tuple[Scenario, int]) -> Figures:
    import asyncio
    import logging

    logging.getLogger("magisterium_async").setLevel(logging.ERROR)  # its waits are the point
    return asyncio.run(measure(*job))


def table(verdicts: list[Verdict]) -> str:
    """The groups' figures as a markdown table, each with its target and floor."""
    lines = [
        "| group | runs | figure | p50 | p95 | worst | target | floor | p95 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        first = True
        for name, (p50, p95, worst) in v.rows.items():
            fmt = _FORMAT[name]

            def said(value: float | None, fmt: str = fmt) -> str:
                return "-" if value is None else fmt.format(value)

            floor = getattr(v.group.floor, name)
            if floor is None:
                verdict = "reported"
            elif any(m.startswith(name + " ") for m in v.misses):
                verdict = "**MISSED**"
            else:
                verdict = "met"
            lines.append(
                f"| {v.group.name if first else ''} | "
                f"{f'{len(v.group.scenarios)} x {len(SEEDS)}' if first else ''} | "
                f"{_LABEL[name]} | {said(p50)} | {said(p95)} | {said(worst)} | "
                f"{said(getattr(v.group.target, name))} | {said(floor)} | {verdict} |"
            )
            first = False
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tunnel", description=__doc__)
    parser.add_argument("--group", default="", help="only the groups whose name holds this")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--worst", type=int, default=0, help="list the K worst runs per figure")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here too")
    parser.add_argument("--local", action="store_true", help="only scenarios of one process")
    args = parser.parse_args(argv)
    groups = [g for g in matrix() if args.group in g.name]
    if args.local:
        for g in groups:
            g.scenarios[:] = [s for s in g.scenarios if s.procs == 1]
        groups = [g for g in groups if g.scenarios]
    jobs = [(s, seed) for g in groups for s in g.scenarios for seed in SEEDS]
    begun = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        figures = list(pool.map(_one, jobs, chunksize=4))
    by_group: dict[str, list[Figures]] = {}
    for f in figures:
        by_group.setdefault(f.scenario.group, []).append(f)
    verdicts = [judge(g, by_group[g.name]) for g in groups]
    text = table(verdicts)
    print(text)
    seconds = time.perf_counter() - begun
    print(f"\n{len(jobs)} runs of {len(jobs) // len(SEEDS)} scenarios in {seconds:.0f} s")
    if args.worst:
        for v in verdicts:
            for name in v.rows:
                from benchmarks.tunnel.measure import _READ

                read, higher = _READ.get(name, (None, False))
                if read is None:
                    continue
                ranked = sorted(
                    (f for f in v.figures if read(f) is not None),
                    key=read,
                    reverse=not higher,
                )[: args.worst]
                print(f"\n{v.group.name} / {name}:")
                for f in ranked:
                    print(
                        f"  {read(f):.3f}  {f.scenario.name} seed {f.seed}: "
                        f"{f.successes} ok, {f.refused} x 429, "
                        f"wall {f.wall:.2f} ideal {f.ideal:.2f}"
                    )
    if args.out:
        args.out.write_text(text + "\n")
    missed = [m for v in verdicts for m in (f"{v.group.name}: {x}" for x in v.misses)]
    for m in missed:
        print("MISSED", m, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
