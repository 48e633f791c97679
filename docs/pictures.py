"""Draw the docs' pictures from the repository's own figures: ``python docs/pictures.py``.

- ``docs/img/quota-run.svg``: a bulk job at the Pro quota beside another program on the
  same account, run in virtual time through the public API (``AsyncMagisterium`` with
  ``testing.VirtualClock`` and ``testing.MockTransport``; what the pool does is read from
  ``on_event``): the quota's windows, a pause, the rate lowered and stepping back up, and
  a person's search in the middle of it.
- ``docs/img/benchmarks.svg``: the rate-limit and client-cost rows of
  ``benchmarks/results/results.json`` (written by ``python -m benchmarks``).

Each SVG carries the figures it was drawn from (its ``dc:description``), so
``tests/test_docs.py`` can tell when a picture no longer shows what the engine does or
what the benchmarks measured: run this again then. Drawing needs matplotlib (the
``[bench]`` extra); the figures alone (:func:`quota_run`, :func:`benchmark_figures`) do not.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

from magisterium_async import AsyncMagisterium, PoolEvent, RateLimits
from magisterium_async.testing import MockRequest, MockResponse, MockTransport, VirtualClock

ROOT = Path(__file__).parent.parent
IMG = ROOT / "docs" / "img"
RESULTS = ROOT / "benchmarks" / "results" / "results.json"

WINDOW = 60.0  # the service counts requests in fixed windows of a minute
QUOTA = 15  # the Pro plan's default pool
ROUND_TRIP = 0.5  # seconds, the request's way there and its answer's way back
SEARCHES = 150  # the bulk job: client.search_many over this many queries
OTHERS = {3: 10, 4: 10, 5: 10}  # minute -> requests another program spends as it opens
PERSON_AT = 530.0  # when a person's own search comes, in the middle of the job


def quota_run() -> dict[str, Any]:
    """The run the quota picture shows: what the service counted, and what the client's
    default pool did, from its events (times in virtual seconds)."""
    return asyncio.run(_quota_run())


async def _quota_run() -> dict[str, Any]:
    clock = VirtualClock()
    counted: dict[int, int] = {}  # window -> requests the service took (ours and others')
    answers: list[tuple[float, bool]] = []  # each of ours as it arrived: taken or refused

    async def service(request: MockRequest) -> MockResponse:
        await clock.sleep(ROUND_TRIP / 2)
        now = clock.now()
        window = math.floor(now / WINDOW)
        taken = counted.get(window, OTHERS.get(window, 0))
        answers.append((now, taken < QUOTA))
        if taken < QUOTA:
            counted[window] = taken + 1
        await clock.sleep(ROUND_TRIP / 2)
        if taken >= QUOTA:  # whole seconds to the window's end, as the service says them
            wait = math.ceil((window + 1) * WINDOW - now)
            return MockResponse.error(
                request, -32003, "Rate limit exceeded", status=429, data={"retryAfter": wait}
            )
        query = request.json["params"]["message"]["parts"][0]["text"]
        hit = {"id": query, "title": query, "url": f"https://example.org/{query}"}
        results = {"kind": "data", "data": {"results": [hit]}}
        task = {
            "kind": "task",
            "id": f"task-{query}",
            "contextId": "ctx",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "name": "search_results", "parts": [results]}],
        }
        return MockResponse.result(request, task)

    events: list[PoolEvent] = []
    client = AsyncMagisterium(
        token="t",
        transport=MockTransport(service),
        clock=clock,
        rate_limits=RateLimits.pro(),
        on_event=events.append,
    )
    person: dict[str, float] = {}

    async def a_person() -> None:
        await clock.sleep(PERSON_AT)
        await client.search("a person's own question")
        person["answered"] = clock.now()

    async with client:
        asking = asyncio.create_task(a_person())
        async for _ in client.search_many(f"query {i}" for i in range(SEARCHES)):
            pass
        await asking
        ended = clock.now()

    pool = [e for e in events if e.pool == "default"]
    pauses = [[round(e.time, 2), round(e.time + e.value, 2)] for e in pool if e.kind == "paused"]
    rates = [[0.0, float(QUOTA)]] + [
        [round(e.time, 2), e.value] for e in pool if e.kind == "rate_changed"
    ]
    windows = [
        {
            "minute": w,
            "others": OTHERS.get(w, 0),
            "ours": counted.get(w, OTHERS.get(w, 0)) - OTHERS.get(w, 0),
            "refused": sum(1 for t, ok in answers if not ok and math.floor(t / WINDOW) == w),
        }
        for w in range(math.floor(ended / WINDOW) + 1)
    ]
    return {
        "windows": windows,
        "rates": rates,
        "pauses": pauses,
        "answers": [[round(t, 2), ok] for t, ok in answers],
        "person": [PERSON_AT, round(person["answered"] - PERSON_AT, 2)],
        "ended": round(ended, 2),
    }


def benchmark_figures(path: Path = RESULTS) -> dict[str, Any]:
    """The figures the benchmark picture shows, from ``benchmarks/results/results.json``."""
    sections = {s["key"]: s.get("data") or {} for s in json.loads(path.read_text())["sections"]}
    quota = sections["quota"].get("scenarios", {})
    clients = ("magisterium_async", "botocore", "naive")
    rows = {
        name: {
            client: [
                round(result["per_success"], 3),
                round(
                    result["x_ideal"]
                    if math.isfinite(result["x_ideal"])
                    else result["wall"] / scenario["naive"]["wall"],
                    3,
                ),
            ]
            for client in clients
            if "per_success" in (result := scenario.get(client, {}))
        }
        for name, scenario in quota.items()
    }
    cost = {
        name: round(figures["cpu_us"], 1)
        for group in ("clients", "gather")
        for name, figures in sections["client"].get(group, {}).items()
        if figures
    }
    return {"run": json.loads(path.read_text())["meta"]["date"], "quota": rows, "cpu_us": cost}


# Drawing -------------------------------------------------------------------------------

OURS, OTHER, REFUSED, RATE = "#3f51b5", "#b0b0b0", "#d32f2f", "#ef6c00"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.hashsalt": "magisterium_async",  # the same figures, the same file
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _save(fig: Any, name: str, figures: dict[str, Any]) -> Path:
    IMG.mkdir(exist_ok=True)
    path = IMG / name
    description = json.dumps(figures, sort_keys=True, separators=(",", ":"))
    fig.savefig(path, metadata={"Date": None, "Description": description})
    return path


def draw_quota(run: dict[str, Any]) -> Path:
    plt = _pyplot()
    fig, (bars, rug) = plt.subplots(
        2, 1, figsize=(7.2, 3.9), sharex=True, height_ratios=(4, 1), layout="constrained"
    )
    windows = run["windows"]
    x = [w["minute"] + 0.5 for w in windows]
    others = [w["others"] for w in windows]
    ours = [w["ours"] for w in windows]
    refused = [w["refused"] for w in windows]
    bars.bar(x, others, 0.8, color=OTHER, label="another program on the account")
    bars.bar(x, ours, 0.8, bottom=others, color=OURS, label="the job's searches, answered")
    tops = [a + b for a, b in zip(others, ours, strict=True)]
    bars.bar(x, refused, 0.8, bottom=tops, color=REFUSED, label="refused (429)")
    bars.axhline(QUOTA, color="black", linestyle=":", linewidth=1)
    bars.annotate("the quota: 15 a minute", (len(windows) - 0.05, QUOTA + 0.4), ha="right")
    times = [t / WINDOW for t, _ in run["rates"]] + [run["ended"] / WINDOW]
    values = [r for _, r in run["rates"]]
    bars.step(
        times,
        [*values, values[-1]],
        where="post",
        color=RATE,
        linewidth=2,
        label="the rate the client keeps to",
    )
    for start, end in run["pauses"]:
        for ax in (bars, rug):
            ax.axvspan(start / WINDOW, end / WINDOW, color=REFUSED, alpha=0.12, linewidth=0)
        bars.annotate("paused", (end / WINDOW + 0.05, QUOTA + 3), ha="left", color=REFUSED)
    bars.set_ylabel("requests in each minute")
    bars.set_ylim(0, QUOTA + 5)
    bars.set_yticks(range(0, QUOTA + 6, 5))
    bars.legend(loc="upper center", ncols=2, frameon=False, fontsize=8, bbox_to_anchor=(0.5, 1.22))
    for ok in (True, False):
        starts = [t / WINDOW for t, answer in run["answers"] if answer is ok]
        rug.plot(starts, [0] * len(starts), "|", color=OURS if ok else REFUSED, markersize=12)
    at, waited = run["person"]
    rug.plot([at / WINDOW], [0.9], "v", color="black", markersize=6)
    rug.annotate(f"a person's search: waited {waited:.1f} s", (at / WINDOW + 0.1, 0.9), va="center")
    rug.annotate("15 at once", (0.05, 0.9), va="center", fontsize=8)
    rug.set_ylim(-0.6, 1.4)
    rug.set_yticks([])
    rug.spines["left"].set_visible(False)
    rug.set_ylabel("each request", rotation=0, ha="right", va="center")
    rug.set_xlabel("minutes (virtual time)")
    rug.set_xlim(0, len(windows))
    rug.set_xticks(range(len(windows) + 1))
    return _save(fig, "quota-run.svg", run)


def draw_benchmarks(figures: dict[str, Any]) -> Path:
    plt = _pyplot()
    fig = plt.figure(figsize=(7.2, 4.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=(3, 2))
    spent, wall = top.subplots(1, 2)
    names = list(figures["quota"])
    clients = {"magisterium_async": OURS, "botocore": RATE, "naive": OTHER}
    labels = {
        "magisterium_async": "this SDK",
        "botocore": "botocore adaptive",
        "naive": "naive retry-after loop",
    }
    width = 0.27
    for ax, which in ((spent, 0), (wall, 1)):
        for i, (client, color) in enumerate(clients.items()):
            xs = [n + (i - 1) * width for n in range(len(names))]
            ys = [figures["quota"][name].get(client, [math.nan] * 2)[which] for name in names]
            ax.bar(
                xs,
                [max(y, 0.012) if which == 0 else y for y in ys],
                width,
                color=color,
                label=labels[client],
            )
            for x, y in zip(xs, ys, strict=True):
                text = "stopped" if math.isnan(y) else f"{y:.2f}" if which else f"{y:.2g}"
                ax.annotate(
                    text,
                    (x, 0.011 if which == 0 else 0.02),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=6.5,
                    color="white" if not math.isnan(y) and (which or y > 0.05) else "black",
                )
        ax.set_xticks(range(len(names)), names)
    spent.set_yscale("log")
    spent.set_ylim(0.01, 3)
    spent.set_title("429s per answered request (log; lower is better)", fontsize=8.5)
    wall.set_ylim(0, 2)
    wall.axhline(1, color="black", linestyle=":", linewidth=1)
    wall.set_title("wall time / the quota's ideal (spurious: / naive)", fontsize=8.5)
    top.legend(
        *spent.get_legend_handles_labels(),
        loc="outside lower center",
        ncols=3,
        frameon=False,
        fontsize=8,
    )
    cost = bottom.subplots()
    shown = {
        "magisterium_async": "this SDK",
        "raw aiohttp + json (floor)": "raw aiohttp + json",
        "httpx + json": "httpx + json",
        "a2a-sdk 0.3.26 client": "a2a-sdk 0.3 client",
    }
    ys = [figures["cpu_us"].get(name, math.nan) for name in shown]
    cost.barh(list(shown.values()), ys, color=[OURS, OTHER, OTHER, OTHER])
    for i, y in enumerate(ys):
        cost.annotate(f" {y:.0f} µs", (y, i), va="center", fontsize=8)
    cost.invert_yaxis()
    cost.set_xlim(0, max(ys) * 1.2)
    cost.set_title("client CPU per request, a search (µs; lower is better)", fontsize=8.5)
    fig.suptitle(f"python -m benchmarks, {figures['run']}", fontsize=8, color="#555")
    return _save(fig, "benchmarks.svg", figures)


def main() -> None:
    for path in (draw_quota(quota_run()), draw_benchmarks(benchmark_figures())):
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    sys.exit(main())
