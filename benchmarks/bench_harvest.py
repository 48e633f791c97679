"""Harvest memory: peak RSS of a harvest of N documents stays flat as N grows.

The emulator (limits lifted, a :class:`SyntheticCorpus` of 10 million documents, 50 hits a
search) runs in its own process. For each N a fresh process
(``python -m benchmarks.bench_harvest --worker ...``) opens a client, notes its RSS
(``ru_maxrss`` after the imports and the client), then runs
``async with client.harvest(queries, state=path) as h: async for doc in h`` until N
documents have come, and reports the peak RSS (``ru_maxrss``) at the end. Queries are
generated lazily, 8 distinct words each (about 50 new documents a search).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from ._report import Row, Section
from ._server import ROOT, ServerProcess

__all__ = ["run"]

CORPUS = 10_000_000
CONCURRENCY = 16
_WORDS = 8


def _queries(limit: int) -> Iterator[str]:
    for i in range(limit):
        yield " ".join(f"w{i}x{j}" for j in range(_WORDS))


def _rss_mib() -> float:
    """Peak RSS so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_mib() -> float | None:
    """RSS now (``/proc/self/statm``), to see what the harvest holds under the import-time
    high-water mark that ``ru_maxrss`` may keep; ``None`` off Linux."""
    try:
        with open("/proc/self/statm", encoding="ascii") as file:
            pages = int(file.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize() / 2**20


async def _harvest(base_url: str, token: str, documents: int, state: str) -> dict[str, Any]:
    from magisterium_async import AsyncMagisterium, RateLimits

    client = AsyncMagisterium(token=token, base_url=base_url, rate_limits=RateLimits.unlimited())
    queries = _queries(documents)  # bounded: each query finds dozens of documents
    h = client.harvest(queries, state=state, concurrency=CONCURRENCY)
    baseline, start_now = _rss_mib(), _current_mib()
    sampled = start_now
    count = 0
    record_bytes = 0  # the JSON Lines the command line would write of them
    started = time.perf_counter()
    async with client, h:
        async for doc in h:
            if not doc.text:
                raise RuntimeError(f"document {doc.id} has no text")
            count += 1
            record_bytes += len(msgspec.json.encode(doc)) + 1
            if count % 500 == 0 and sampled is not None:
                sampled = max(sampled, _current_mib() or 0.0)
            if count >= documents:
                break
        stats = h.stats
        end_now = _current_mib()
    wall = time.perf_counter() - started
    if count < documents:
        raise RuntimeError(f"the queries ran out after {count} of {documents} documents")
    return {
        "documents": count,
        "baseline_mib": baseline,
        "peak_mib": _rss_mib(),
        "start_rss_mib": start_now,
        "max_sampled_rss_mib": sampled,
        "end_rss_mib": end_now,
        "wall": wall,
        "docs_per_s": count / wall,
        "record_bytes": record_bytes,
        "searched": stats.searched,
        "failed": stats.failed,
    }


def _worker(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument("--state", required=True)
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(_harvest(args.base_url, args.token, args.documents, args.state))
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}))
        return 1
    print(json.dumps(result))
    return 0


def _run_one(server: ServerProcess, documents: int, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-harvest-") as tmp:
        command = [
            sys.executable,
            "-m",
            "benchmarks.bench_harvest",
            "--worker",
            "--base-url",
            server.base_url,
            "--token",
            server.token,
            "--documents",
            str(documents),
            "--state",
            str(Path(tmp) / "state.sqlite"),
        ]
        try:
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:g} s"}
        # The state as the harvest left it: every delivered record kept, compressed.
        state_bytes = sum(path.stat().st_size for path in Path(tmp).glob("state.sqlite*"))
    lines = done.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        result = {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    else:
        result["state_bytes"] = state_bytes
    return result


def run(quick: bool) -> Section:
    sizes = (200, 2_000) if quick else (1_000, 10_000, 100_000)
    section = Section(
        "harvest",
        "Harvest memory (peak RSS of the harvesting process, fresh process per size)",
        setup=(
            f"emulator in its own process, limits lifted, SyntheticCorpus({CORPUS:,}), "
            f"50 hits a search; harvest concurrency {CONCURRENCY}, state in a sqlite file"
        ),
    )
    results = {}
    with ServerProcess("emulator", "--synthetic", str(CORPUS), "--max-results", "50") as server:
        for documents in sizes:
            result = _run_one(server, documents, timeout=60 if quick else 240)
            results[documents] = result
            case = f"{documents:,} documents"
            if "error" in result:
                section.fail(f"{case}: {result['error']}")
                section.rows.append(Row(case, "magisterium_async", "error", result["error"]))
                continue
            detail = (
                f"ru_maxrss +{result['peak_mib'] - result['baseline_mib']:.1f} MiB in the harvest"
            )
            if result.get("end_rss_mib") is not None:
                detail += (
                    f"; RSS {result['start_rss_mib']:.0f} MiB before, at most "
                    f"{result['max_sampled_rss_mib']:.0f} during"
                )
            detail += f"; {result['docs_per_s']:,.0f} docs/s"
            per_document = result["state_bytes"] / result["documents"]
            detail += (
                f"; state {per_document:,.0f} B/document "
                f"({result['state_bytes'] / result['record_bytes']:.0%} of the JSON Lines)"
            )
            section.rows.append(
                Row(case, "magisterium_async", f"{result['peak_mib']:.1f} MiB peak", detail)
            )
    section.data = {"sizes": {str(k): v for k, v in results.items()}}
    good = [r for r in results.values() if "error" not in r]
    if len(good) == len(sizes):
        first, last = good[0], good[-1]
        growth = last["peak_mib"] - first["peak_mib"]
        flat = growth <= max(20.0, 0.15 * first["peak_mib"])
        section.goal(
            "peak RSS flat from the smallest to the largest harvest",
            flat,
            f"{first['peak_mib']:.0f} MiB at {sizes[0]:,} -> {last['peak_mib']:.0f} MiB at "
            f"{sizes[-1]:,} documents ({growth:+.0f} MiB)",
        )
    return section


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
