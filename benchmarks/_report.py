"""Results: one table for the terminal (rich when installed), results.md, results.json and
chart.png (matplotlib when installed; otherwise the chart is skipped with a note)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Goal", "Row", "Section", "merge_results", "print_table", "write_results"]


@dataclass
class Row:
    """One line of the table: a case, a client, its result, and the comparison."""

    case: str
    client: str
    result: str
    detail: str = ""


@dataclass
class Goal:
    """A goal of the issue: met (``True``/``False``) or not measurable (``None``)."""

    text: str
    met: bool | None
    detail: str


@dataclass
class Section:
    """One benchmark's outcome. ``errors`` are breakages of *our* benchmark (CI fails on
    them); a competitor that could not run is a row saying so, not an error."""

    key: str
    title: str
    setup: str = ""
    rows: list[Row] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def goal(self, text: str, met: bool | None, detail: str) -> None:
        self.goals.append(Goal(text, met, detail))

    def note(self, message: str) -> None:
        self.notes.append(message)

    @property
    def ok(self) -> bool:
        return not self.errors


def ratio(value: float, reference: float) -> str:
    """``value / reference`` as ``"3.2x"``."""
    if reference <= 0 or not math.isfinite(value) or not math.isfinite(reference):
        return "n/a"
    return f"{value / reference:.2f}x"


def _goal_mark(goal: Goal) -> str:
    return {True: "met", False: "MISSED", None: "n/a"}[goal.met]


_HEADERS = ("Benchmark", "Case", "Client", "Result", "Comparison")


def _table_rows(sections: list[Section]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for section in sections:
        for i, row in enumerate(section.rows):
            rows.append(
                (section.key if i == 0 else "", row.case, row.client, row.result, row.detail)
            )
    return rows


def print_table(sections: list[Section], title: str) -> None:
    """Print the one table, then the goals and any errors."""
    rows = _table_rows(sections)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(r[i]) for r in [_HEADERS, *rows]) for i in range(len(_HEADERS))]
        print(title)
        for r in [_HEADERS, tuple("-" * w for w in widths), *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
        _print_goals(sections, print)
        return
    console = Console(width=200)
    table = Table(title=title, show_lines=False)
    for header in _HEADERS:
        table.add_column(header, overflow="fold")
    previous = None
    for section in sections:
        for i, row in enumerate(section.rows):
            if i == 0 and previous is not None:
                table.add_section()
            table.add_row(
                section.key if i == 0 else "", row.case, row.client, row.result, row.detail
            )
        previous = section
    console.print(table)
    _print_goals(sections, lambda text: console.print(text, markup=False, highlight=False))


def _print_goals(sections: list[Section], out: Any) -> None:
    for section in sections:
        for goal in section.goals:
            out(f"[{_goal_mark(goal)}] {section.key}: {goal.text} -- {goal.detail}")
        for error in section.errors:
            out(f"[ERROR] {section.key}: {error}")


def _run_line(run: dict[str, Any]) -> str:
    return (
        f"`{run['command']}` on {run['machine']} ({run['date']}), "
        f"{'quick run' if run['quick'] else 'full run'}, {run['seconds']:.0f} s, load "
        f"average {run.get('load', 'unknown')}"
    )


def _markdown(sections: list[Section], meta: dict[str, Any]) -> str:
    runs = meta.get("runs", [])
    if len(runs) > 1:
        header = [
            f"The sections come from {len(runs)} runs (`--only` replaced the sections it ran"
            " and kept the others). Absolute numbers drift on shared machines and between"
            " runs; compare the ratios within a section.",
            "",
            *(
                f"- {', '.join(f'`{key}`' for key in run['sections'])}: {_run_line(run)}."
                for run in runs
            ),
        ]
    else:
        header = [
            f"{_run_line(meta)}. Absolute numbers drift on shared machines; compare the ratios."
        ]
    lines = [
        "# Benchmark results",
        "",
        *header,
        "",
        "| " + " | ".join(_HEADERS) + " |",
        "|" + "---|" * len(_HEADERS),
    ]
    for row in _table_rows(sections):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines += ["", "## Goals", ""]
    for section in sections:
        for goal in section.goals:
            lines.append(f"- **{_goal_mark(goal)}** ({section.key}) {goal.text}: {goal.detail}")
    lines += ["", "## Setup and notes", ""]
    for section in sections:
        lines.append(f"- **{section.title}** ({section.seconds:.0f} s). {section.setup}")
        lines += [f"  - {note}" for note in section.notes]
        lines += [f"  - ERROR: {error}" for error in section.errors]
    lines += ["", "## Environments", ""]
    if len(runs) > 1:
        for run in runs:
            lines.append(f"- `{run['command']}` ({run['date']}):")
            lines += [f"  - {line}" for line in run["environments"]]
    else:
        lines += [f"- {line}" for line in meta["environments"]]
    lines += [
        "",
        "## Reproduce",
        "",
        "```sh",
        "pip install -e '.[bench]'",
        "python -m benchmarks            # full run, < 10 min on 2 cores; builds"
        " benchmarks/.venvs/ once",
        "python -m benchmarks --quick    # smoke run (CI), writes benchmarks/results/quick/",
        "python -m benchmarks --only decode,client   # a subset: replaces those sections",
        "python -m benchmarks.profile_client         # cProfile of this SDK's request path",
        "```",
        "",
        "The a2a-sdk environments: `$MAGISTERIUM_BENCH_PY03` / `$MAGISTERIUM_BENCH_PY13` (a"
        " python with `a2a-sdk==0.3.26 httpx` / `a2a-sdk==1.3.0 httpx`), else"
        " `benchmarks/.venvs/a2a03|a2a13`, else `.venv-interop03|13`, else built by the full"
        " run (`--no-build` to forbid). Missing ones are reported as unavailable.",
    ]
    return "\n".join(lines) + "\n"


def _chart(sections: list[Section], path: Path) -> str | None:
    """Draw chart.png; the reason when it cannot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): chart.png skipped"
    by_key = {s.key: s.data for s in sections if s.data}
    fig, axes = plt.subplots(3, 2, figsize=(14, 13))
    _plot_decode(axes[0][0], by_key.get("decode"))
    _plot_client(axes[0][1], by_key.get("client"))
    _plot_quota(axes[1][0], by_key.get("quota"))
    _plot_harvest(axes[1][1], by_key.get("harvest"))
    _plot_shared_adaptive(axes[2][0], by_key.get("shared_adaptive"))
    _plot_priority(axes[2][1], by_key.get("priority"))
    fig.suptitle("magisterium_async benchmarks (ratios matter, absolute numbers drift)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _empty(ax: Any, title: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]]) -> None:
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v if v == v else 0 for v in values], width, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.legend(fontsize=8)


def _plot_decode(ax: Any, data: dict[str, Any] | None) -> None:
    title = "Decode: microseconds per message/send answer (log, lower is better)"
    if not data or not data.get("decoders"):
        return _empty(ax, title)
    fixtures = data["fixtures"]
    series = {
        label: [timings.get(f, math.nan) for f in fixtures]
        for label, timings in data["decoders"].items()
        if timings
    }
    _bars(ax, fixtures, series)
    ax.set_yscale("log")
    ax.set_title(title)


def _plot_client(ax: Any, data: dict[str, Any] | None) -> None:
    title = "Per-request client cost: CPU microseconds per request (lower is better)"
    if not data or not data.get("clients"):
        return _empty(ax, title)
    measured = {c: v for c, v in data["clients"].items() if v}
    gather = {f"gather:\n{c.split(' (')[0]}": v for c, v in data.get("gather", {}).items() if v}
    measured.update(gather)
    clients = list(measured)
    labels = [c.replace(" + ", "\n+ ").replace(" client", "\nclient") for c in clients]
    colors = ["tab:orange" if c.startswith("gather") else "tab:blue" for c in clients]
    ax.bar(labels, [measured[c]["cpu_us"] for c in clients], color=colors)
    ax.tick_params(axis="x", labelsize=7)
    for i, c in enumerate(clients):
        ax.annotate(
            f"{measured[c]['rps']:,.0f} req/s",
            (i, measured[c]["cpu_us"]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_title(title)


def _plot_quota(ax: Any, data: dict[str, Any] | None) -> None:
    title = "Quota: wall / ideal (spurious: / naive loop; lower is better), 429s per success"
    if not data or not data.get("scenarios"):
        return _empty(ax, title)
    scenarios = data["scenarios"]
    names = list(scenarios)
    clients = ("magisterium_async", "botocore", "naive")

    def wall(name: str, client: str) -> float:
        result = scenarios[name].get(client, {})
        if "wall" not in result:
            return math.nan
        if math.isfinite(result.get("x_ideal", math.nan)):
            return float(result["x_ideal"])
        naive = scenarios[name].get("naive", {}).get("wall", math.nan)
        return float(result["wall"] / naive) if naive else math.nan

    series = {client: [wall(n, client) for n in names] for client in clients}
    _bars(ax, names, series)
    for i, n in enumerate(names):
        per = [scenarios[n].get(c, {}).get("per_success", math.nan) for c in clients]
        text = "429s/ok " + " / ".join("n/a" if math.isnan(p) else f"{p:.2f}" for p in per)
        ax.annotate(text, (i, 0.05), ha="center", fontsize=7)
    ax.set_title(title)


def _plot_shared_adaptive(ax: Any, data: dict[str, Any] | None) -> None:
    title = "Four processes over one Redis: 429s per success (lower is better)"
    if not data or not data.get("scenarios"):
        return _empty(ax, title)
    scenarios = data["scenarios"]
    names = list(scenarios)
    clients = ("magisterium", "botocore", "naive")
    series = {
        client: [scenarios[n].get(client, {}).get("per_success", math.nan) for n in names]
        for client in clients
    }
    _bars(ax, names, series)
    for i, n in enumerate(names):
        span = scenarios[n].get("magisterium", {}).get("x_ideal", math.nan)
        ax.annotate(f"ours: span {span:.2f}x ideal", (i, 0), ha="center", fontsize=7)
    ax.set_title(title)


def _plot_priority(ax: Any, data: dict[str, Any] | None) -> None:
    title = "A single search beside search_many: latency in quota windows (lower is better)"
    cases = {k: v for k, v in (data or {}).get("cases", {}).items() if "p95" in v}
    if not cases:
        return _empty(ax, title)
    period = data["period"] if data else 1.0
    names = list(cases)
    series = {q: [cases[n][q] / period for n in names] for q in ("p50", "p95")}
    _bars(ax, [n.replace(", ", ",\n") for n in names], series)
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(title)


def _plot_harvest(ax: Any, data: dict[str, Any] | None) -> None:
    title = "Harvest: peak RSS of the harvesting process (MiB)"
    if not data or not data.get("sizes"):
        return _empty(ax, title)
    points = [(int(n), r) for n, r in data["sizes"].items() if "peak_mib" in r]
    if not points:
        return _empty(ax, title)
    sizes = [n for n, _ in points]
    ax.plot(sizes, [r["peak_mib"] for _, r in points], "o-", label="peak (ru_maxrss)")
    ax.plot(sizes, [r["baseline_mib"] for _, r in points], "x--", label="ru_maxrss before")
    if all(r.get("max_sampled_rss_mib") for _, r in points):
        sampled = [r["max_sampled_rss_mib"] for _, r in points]
        ax.plot(sizes, sampled, "s:", label="RSS sampled during")
    ax.set_xscale("log")
    ax.set_ylim(0, max(r["peak_mib"] for _, r in points) * 1.3)
    ax.set_xlabel("documents harvested")
    ax.legend(fontsize=8)
    ax.set_title(title)


def _section(data: dict[str, Any]) -> Section:
    """A section read back from results.json."""
    section = Section(**data)
    section.rows = [Row(**row) for row in data["rows"]]
    section.goals = [Goal(**goal) for goal in data["goals"]]
    return section


def merge_results(
    sections: list[Section], meta: dict[str, Any], previous: Path, order: tuple[str, ...]
) -> tuple[list[Section], dict[str, Any]]:
    """The sections of this run in place of theirs among those of ``previous`` (a
    results.json), the others kept as they were, in ``order``; and the meta of this run with
    ``runs``: each run still present in the table (its command, date, ...) and the sections
    it gave. Nothing to merge (no ``previous``): this run alone."""
    ran = [section.key for section in sections]
    this_run = {**meta, "sections": ran}
    if not previous.exists():
        return sections, {**meta, "runs": [this_run]}
    document = json.loads(previous.read_text())
    kept = {data["key"]: _section(data) for data in document["sections"] if data["key"] not in ran}
    old = document["meta"]
    runs = old.get("runs") or [{**old, "sections": [data["key"] for data in document["sections"]]}]
    runs = [{**run, "sections": [key for key in run["sections"] if key in kept]} for run in runs]
    runs = [run for run in runs if run["sections"]] + [this_run]
    by_key = {**kept, **{section.key: section for section in sections}}
    merged = [by_key.pop(key) for key in order if key in by_key] + list(by_key.values())
    return merged, {**meta, "runs": runs}


def write_results(sections: list[Section], meta: dict[str, Any], out: Path) -> list[str]:
    """Write results.json, results.md and chart.png into ``out``; notes about what was not."""
    out.mkdir(parents=True, exist_ok=True)
    notes = []
    document = {"meta": meta, "sections": [asdict(s) for s in sections]}
    (out / "results.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    (out / "results.md").write_text(_markdown(sections, meta))
    skipped = _chart(sections, out / "chart.png")
    if skipped:
        notes.append(skipped)
    return notes
