"""``python -m benchmarks [--quick] [--only decode,client,quota,...]``: run, print one
table, write results.json, results.md and chart.png.

The full run writes ``benchmarks/results/``; ``--quick`` (the CI smoke run: small N, the
competitors only where their environments already exist) writes
``benchmarks/results/quick/`` so it never overwrites the full results. ``--only`` merges
into the results already there: the sections it ran replace theirs, the others are kept,
and the header says which run (command, date) each section comes from. Exits 1 when one of
our own benchmarks breaks; a competitor that cannot run is reported, not an error; a goal
missed is reported, not an error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import (
    bench_cache,
    bench_client,
    bench_decode,
    bench_harvest,
    bench_interactive,
    bench_priority,
    bench_quota,
    bench_shared_adaptive,
    bench_shared_quota,
)
from ._envs import COMPETITORS, Resolved, resolve
from ._fixtures import write_fixtures
from ._report import Section, merge_results, print_table, write_results

BENCHMARKS = (
    "decode",
    "client",
    "quota",
    "harvest",
    "shared_quota",
    "shared_adaptive",
    "priority",
    "cache",
    "interactive",
)
RESULTS = Path(__file__).resolve().parent / "results"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: small N, < 60 s")
    parser.add_argument(
        "--only",
        default=",".join(BENCHMARKS),
        help=f"comma-separated subset of {BENCHMARKS}: replaces those sections in the results "
        "already in the folder, keeping the others",
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="never build the a2a-sdk virtualenvs under benchmarks/.venvs/",
    )
    parser.add_argument("--out", type=Path, help="where to write the results")
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(args.only) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; choose from {BENCHMARKS}")
    return args


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _where(python: str | None) -> str:
    """A python's path, relative to the repository when inside it (results are committed)."""
    if python is None:
        return "unavailable"
    path = Path(python)
    root = RESULTS.parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _timed(key: str, title: str, step: Callable[[], Section]) -> Section:
    _say(f"== {key}: {title}")
    started = time.monotonic()
    try:
        section = step()
    except Exception as exc:  # our benchmark broke: report it and go on with the others
        traceback.print_exc()
        section = Section(key, title)
        section.fail(f"{type(exc).__name__}: {exc}")
    section.seconds = time.monotonic() - started
    _say(f"   {key} done in {section.seconds:.1f} s")
    return section


def _load() -> str:
    """The machine's load average over 1/5/15 minutes (the benchmarks share it)."""
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # not on every platform
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    started = time.monotonic()
    load_before = _load()
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    build = not (args.quick or args.no_build)
    log: list[str] = []
    envs: dict[str, Resolved] = {}
    if {"decode", "client"} & set(args.only):
        for key, competitor in COMPETITORS.items():
            if build and not competitor.venv.exists():
                _say(f"== building {competitor.label} in {competitor.venv} (once, needs PyPI)")
            envs[key] = resolve(competitor, build=build, log=log)
            _say(f"   {competitor.label}: {envs[key].python or 'unavailable'} ({envs[key].origin})")
    sections: list[Section] = []
    with tempfile.TemporaryDirectory(prefix="magisterium-bench-") as tmp:
        fixtures = Path(tmp) / "fixtures.json"
        canned = Path(tmp) / "search_10.json"
        if {"decode", "client"} & set(args.only):
            canned.write_bytes(write_fixtures(fixtures)["search_10"])
        steps: dict[str, tuple[str, Callable[[], Section]]] = {
            "decode": ("decode", lambda: bench_decode.run(args.quick, fixtures, envs)),
            "client": ("per-request cost", lambda: bench_client.run(args.quick, canned, envs)),
            "quota": ("quota use", lambda: bench_quota.run(args.quick)),
            "harvest": ("harvest memory", lambda: bench_harvest.run(args.quick)),
            "shared_quota": (
                "shared quota (Redis)",
                lambda: bench_shared_quota.run(args.quick),
            ),
            "shared_adaptive": (
                "adaptive across processes (Redis)",
                lambda: bench_shared_adaptive.run(args.quick),
            ),
            "priority": (
                "interactive calls beside a bulk job",
                lambda: bench_priority.run(args.quick),
            ),
            "cache": (
                "paying for each answer once",
                lambda: bench_cache.run(args.quick),
            ),
            "interactive": (
                "interactive latency beside bulk work",
                lambda: bench_interactive.run(args.quick),
            ),
        }
        for key in BENCHMARKS:
            if key in args.only:
                title, step = steps[key]
                sections.append(_timed(key, title, step))
    seconds = time.monotonic() - started
    meta = {
        "command": "python -m benchmarks"
        + (" --quick" if args.quick else "")
        + (f" --only {','.join(args.only)}" if set(args.only) != set(BENCHMARKS) else "")
        + (" --no-build" if args.no_build else "")
        + (f" --out {_where(str(args.out))}" if args.out else ""),
        "quick": args.quick,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "seconds": seconds,
        "load": f"{load_before} before, {_load()} after",
        "versions": {
            p: _version(p) for p in ("magisterium-async", "aiohttp", "msgspec", "httpx", "anyio")
        },
        "environments": [
            f"ours: {_where(sys.executable)} (magisterium-async {_version('magisterium-async')}, "
            f"aiohttp {_version('aiohttp')}, msgspec {_version('msgspec')}, "
            f"httpx {_version('httpx')})",
            *(f"{COMPETITORS[k].label}: {_where(r.python)} ({r.origin})" for k, r in envs.items()),
            *log,
        ],
    }
    print_table(sections, f"magisterium_async benchmarks ({meta['command']}, {seconds:.0f} s)")
    if out == RESULTS / "quick":  # smoke-run output is never committed
        out.mkdir(parents=True, exist_ok=True)
        (out / ".gitignore").write_text("# written by python -m benchmarks --quick\n*\n")
    table = sections
    if set(args.only) != set(BENCHMARKS):  # a part: the other sections are kept
        try:
            table, meta = merge_results(sections, meta, out / "results.json", BENCHMARKS)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _say(f"cannot read {out / 'results.json'} ({exc!r}): this run's sections alone")
        kept = [s.key for s in table if s.key not in args.only]
        if kept:
            _say(f"kept from the earlier results in {out}: {', '.join(kept)}")
    for note in write_results(table, meta, out):
        _say(note)
    _say(f"results written to {out}")
    broken = [s.key for s in sections if not s.ok]
    if broken:
        _say(f"FAILED: our benchmark(s) broke: {', '.join(broken)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
