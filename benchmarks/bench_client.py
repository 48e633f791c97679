"""Per-request client cost: N ``document_search`` calls at concurrency C, limits lifted.

Two patterns (``_client_worker.py``): the *worker loop* (C tasks, each awaiting one call
after another; every client) and *gather* (``asyncio.gather`` of 4,000 calls at once, as
users write it: this SDK is handed them all and its ``max_concurrency=C`` holds the rest
back; raw aiohttp + json takes an ``asyncio.Semaphore(C)`` around each call). The gather
pattern shows what a queued call costs the client when thousands queue at once.

The server is ``_server.py``'s *canned* one, in its own process: a bare aiohttp JSON-RPC
endpoint answering every POST with the emulator's real 10-hit search Task (the request's id
echoed). The emulator itself would spend more per request (auth, quota, skill, task store)
than the fastest client, so on two cores it would measure itself; the canned server keeps
the clients the bottleneck. Each client runs in a fresh process (``_client_worker.py``),
rounds interleaved, the median round kept.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._envs import Resolved
from ._report import Row, Section
from ._server import ROOT, ServerProcess

__all__ = ["run"]

WORKER = Path(__file__).resolve().parent / "_client_worker.py"
CLIENTS = {  # worker name -> (label, competitor env or None, share of N it sends)
    "magisterium": ("magisterium_async", None, 1.0),
    "aiohttp": ("raw aiohttp + json (floor)", None, 1.0),
    "httpx": ("httpx + json", None, 0.25),  # ten times slower: fewer requests, same figures
    "a2a03": ("a2a-sdk 0.3.26 client", "03", 0.25),
}
GATHER = {  # sample key -> (worker name, label)
    "gather:magisterium": ("magisterium", "magisterium_async (max_concurrency)"),
    "gather:aiohttp": ("aiohttp", "raw aiohttp + json + Semaphore (floor)"),
}
GATHER_N = 4000
CPU_GOAL = 1.5
"""Client CPU per request at most this many times raw aiohttp + json's, in both patterns
(httpx and the a2a-sdk client cost 10-15 times as much)."""


def _run_worker(python: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, str(WORKER), json.dumps(spec)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return result


def _paired(samples: dict[str, list[dict[str, Any]]], a: str, b: str, key: str) -> float | None:
    """The median over rounds of ``a[key] / b[key]`` within the same round: the two ran
    seconds apart, so load from elsewhere on the machine mostly cancels out."""
    ratios = [x[key] / y[key] for x, y in zip(samples[a], samples[b], strict=False)]
    return statistics.median(ratios) if ratios else None


def _gc_runs(runs: list[dict[str, Any]]) -> str:
    """``"; GC runs a/b/c"``: the cyclic GC's collections per generation over the measured
    requests (median per generation over the rounds); ``""`` if not reported."""
    counts = [r["gc"] for r in runs if "gc" in r]
    if not counts:
        return ""
    return "; GC runs " + "/".join(
        str(statistics.median_low(c[g] for c in counts)) for g in range(3)
    )


def run(quick: bool, canned_body: Path, envs: dict[str, Resolved]) -> Section:
    n, concurrency, warmup, rounds = (200, 8, 50, 1) if quick else (3000, 16, 300, 11)
    n_gather = GATHER_N // 2 if quick else GATHER_N  # the crowd is the point: still 2,000
    section = Section(
        "client",
        "Per-request client cost (requests/s and client CPU per request)",
        setup=(
            f"worker loop: N={n} searches ({n // 4} for httpx and a2a-sdk) by {concurrency} "
            f"worker tasks; gather: asyncio.gather of {n_gather:,} searches, this SDK with "
            f"max_concurrency={concurrency}, raw aiohttp behind asyncio.Semaphore"
            f"({concurrency}); each after {warmup} warm-up requests, {rounds} interleaved "
            "round(s) (every other one in reverse order), medians kept (ratios: median of "
            "same-round ratios); canned aiohttp JSON-RPC server in its own process (real "
            "10-hit search Task); CPU = time.process_time() of the client process over the "
            "N requests / N"
        ),
    )
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in [*CLIENTS, *GATHER]}
    unavailable: dict[str, str] = {}
    jobs: list[tuple[str, str, str | None, dict[str, Any]]] = [
        (name, name, env, {"n": max(50, int(n * share))})
        for name, (_, env, share) in CLIENTS.items()
    ]
    jobs += [
        (key, worker, None, {"n": n_gather, "pattern": "gather"})
        for key, (worker, _) in GATHER.items()
    ]
    with ServerProcess("canned", "--body-file", str(canned_body)) as server:
        for round_ in range(rounds):
            # Every other round in reverse order, so that neither of a pair always runs
            # first (the machine's load drifts; same-round ratios cancel what they share).
            for key, name, env, extra in jobs if round_ % 2 == 0 else jobs[::-1]:
                if key in unavailable:
                    continue
                python = sys.executable if env is None else envs[env].python
                if python is None:
                    unavailable[key] = envs[env].origin if env else "?"
                    continue
                if name == "httpx" and importlib.util.find_spec("httpx") is None:
                    unavailable[key] = "httpx is not installed (pip install -e '.[bench]')"
                    continue
                spec = {
                    "client": name,
                    "url": server.base_url,
                    "token": server.token,
                    "concurrency": concurrency,
                    "warmup": warmup,
                    **extra,
                }
                result = _run_worker(python, spec, timeout=60 if quick else 120)
                if "error" in result:
                    if env is None:
                        section.fail(f"{key}: {result['error']}")
                    unavailable[key] = f"failed: {result['error']}"
                    continue
                samples[key].append(result)
    medians = {
        name: {key: statistics.median(s[key] for s in runs) for key in ("rps", "cpu_us", "wall")}
        for name, runs in samples.items()
        if runs and name not in unavailable
    }
    ours, floor = medians.get("magisterium"), medians.get("aiohttp")
    for name, (label, _, _) in CLIENTS.items():
        if name in unavailable:
            section.rows.append(Row("search x N", label, "unavailable", unavailable[name]))
            continue
        m = medians[name]
        parts = []
        cpu_ratio = _paired(samples, name, "aiohttp", "cpu_us")
        if floor and cpu_ratio is not None:
            parts.append(f"CPU {cpu_ratio:.2f}x the floor")
        rps_ratio = _paired(samples, "magisterium", name, "rps")
        if ours and name != "magisterium" and rps_ratio is not None:
            parts.append(f"ours at {rps_ratio:.2f}x its req/s")
        if name in ("magisterium", "aiohttp"):
            parts.append(_gc_runs(samples[name]).lstrip("; "))
        section.rows.append(
            Row(
                "search x N",
                label,
                f"{m['rps']:,.0f} req/s, {m['cpu_us']:,.0f} us CPU/req",
                "; ".join(parts),
            )
        )
    case = f"gather of {n_gather:,} searches"
    for key, (_, label) in GATHER.items():
        if key in unavailable:
            section.rows.append(Row(case, label, "unavailable", unavailable[key]))
            continue
        m = medians[key]
        cpu_ratio = _paired(samples, key, "gather:aiohttp", "cpu_us")
        detail = f"CPU {cpu_ratio:.2f}x the floor" if cpu_ratio is not None else ""
        detail += _gc_runs(samples[key])
        section.rows.append(
            Row(case, label, f"{m['rps']:,.0f} req/s, {m['cpu_us']:,.0f} us CPU/req", detail)
        )
    section.data = {
        "clients": {CLIENTS[k][0]: v for k, v in medians.items() if k in CLIENTS},
        "gather": {GATHER[k][1]: v for k, v in medians.items() if k in GATHER},
        "raw": samples,
    }
    cpu_ratio = _paired(samples, "magisterium", "aiohttp", "cpu_us") if ours and floor else None
    if ours and floor and cpu_ratio is not None:
        section.goal(
            f"worker loop: client CPU per request at most {CPU_GOAL:g}x raw aiohttp + json",
            cpu_ratio <= CPU_GOAL,
            f"{ours['cpu_us']:.0f} vs {floor['cpu_us']:.0f} us (same-round ratio {cpu_ratio:.2f}x)",
        )
    g_ours, g_floor = medians.get("gather:magisterium"), medians.get("gather:aiohttp")
    g_ratio = _paired(samples, "gather:magisterium", "gather:aiohttp", "cpu_us")
    if g_ours and g_floor and g_ratio is not None:
        section.goal(
            f"gather: client CPU per request at most {CPU_GOAL:g}x raw aiohttp + json behind "
            "a semaphore",
            g_ratio <= CPU_GOAL,
            f"{g_ours['cpu_us']:.0f} vs {g_floor['cpu_us']:.0f} us (same-round ratio "
            f"{g_ratio:.2f}x)",
        )
    a2a = medians.get("a2a03")
    rps_ratio = _paired(samples, "magisterium", "a2a03", "rps") if ours and a2a else None
    if ours and a2a and rps_ratio is not None:
        section.goal(
            ">= 2x the a2a-sdk 0.3 client's throughput",
            rps_ratio >= 2,
            f"{ours['rps']:,.0f} vs {a2a['rps']:,.0f} req/s ({rps_ratio:.1f}x)",
        )
    else:
        section.goal(">= 2x the a2a-sdk 0.3 client's throughput", None, "a2a-sdk not measured")
    return section
