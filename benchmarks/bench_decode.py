"""Decode: one ``message/send`` answer to what the caller wants, per client library.

Fixtures (``_fixtures``): the emulator's real answers for a search of 10 and of 50 hits, a
50 KB document and a ``catholic_qa`` answer with citations. Each decoder runs in its own
process under its own python (``_decode_worker.py``), passes alternating, best time kept.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._envs import Resolved
from ._fixtures import FIXTURES
from ._report import Row, Section
from ._server import ROOT

__all__ = ["run"]

WORKER = Path(__file__).resolve().parent / "_decode_worker.py"
OURS = "magisterium_async"


@dataclass(frozen=True)
class _Decoder:
    label: str
    name: str
    env: str | None  # None: ours; else the competitor's key


DECODERS = (
    _Decoder(OURS, "magisterium", None),
    _Decoder("  of which decode_response alone", "magisterium_decode_only", None),
    _Decoder("a2a-sdk 0.3.26 json.loads + model_validate", "a2a03_validate", "03"),
    _Decoder("a2a-sdk 0.3.26 model_validate_json", "a2a03_validate_json", "03"),
    _Decoder("a2a-sdk 1.3.0 v0.3 compat (pydantic -> protobuf)", "a2a13_compat", "13"),
)
PYDANTIC = ("a2a03_validate", "a2a03_validate_json")


def _run_worker(python: str, name: str, fixtures: Path, seconds: float) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, str(WORKER), name, str(fixtures), str(seconds)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 120 s"}
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return result


def _speed(factor: float) -> str:
    if factor >= 1:
        return f"ours {factor:.1f}x faster"
    return f"ours {1 / factor:.1f}x slower"


def run(quick: bool, fixtures: Path, envs: dict[str, Resolved]) -> Section:
    seconds, passes = (0.05, 1) if quick else (0.25, 3)
    section = Section(
        "decode",
        "Decode (microseconds per answer, best of repeats)",
        setup=(
            "each decoder in its own process and python; envelope + Task + the caller's "
            "fields (hits / text and metadata / answer, citations, related questions); "
            "ours is decode_response + _skills.read_result"
        ),
    )
    timings: dict[str, dict[str, float]] = {d.name: {} for d in DECODERS}
    unavailable: dict[str, str] = {}
    for _ in range(passes):
        for decoder in DECODERS:
            if decoder.name in unavailable:
                continue
            if decoder.env is None:
                python = sys.executable
            else:
                resolved = envs[decoder.env]
                if resolved.python is None:
                    unavailable[decoder.name] = resolved.origin
                    continue
                python = resolved.python
            result = _run_worker(python, decoder.name, fixtures, seconds)
            if "error" in result:
                if decoder.env is None:
                    section.fail(f"{decoder.name}: {result['error']}")
                unavailable[decoder.name] = f"failed: {result['error']}"
                continue
            for fixture, timing in result["results"].items():
                best = timings[decoder.name].get(fixture, float("inf"))
                timings[decoder.name][fixture] = min(best, timing["us"])
    ours = timings["magisterium"]
    for fixture in FIXTURES:
        for decoder in DECODERS:
            if decoder.name in unavailable:
                if fixture == FIXTURES[0]:
                    section.rows.append(
                        Row("all", decoder.label, "unavailable", unavailable[decoder.name])
                    )
                continue
            us = timings[decoder.name].get(fixture)
            if us is None:
                continue
            if decoder.name == "magisterium":
                detail = "reference"
            elif decoder.env is None:
                detail = f"{us / ours[fixture]:.0%} of ours" if ours.get(fixture) else ""
            else:
                detail = _speed(us / ours[fixture]) if ours.get(fixture) else ""
            section.rows.append(Row(fixture, decoder.label, f"{us:,.1f} us", detail))
    section.data = {
        "fixtures": list(FIXTURES),
        "decoders": {d.label.strip(): timings[d.name] for d in DECODERS},
        "unavailable": unavailable,
    }
    pydantic = [name for name in PYDANTIC if name not in unavailable and timings[name]]
    if not ours or not pydantic:
        section.goal(">= 5x faster than the a2a-sdk 0.3 pydantic path", None, "not measured")
        return section
    speedups = {
        fixture: min(timings[name][fixture] for name in pydantic) / ours[fixture]
        for fixture in FIXTURES
    }
    section.goal(
        ">= 5x faster than the a2a-sdk 0.3 pydantic path (its faster variant, per fixture)",
        min(speedups.values()) >= 5.0,
        ", ".join(f"{f} {s:.1f}x" for f, s in speedups.items()),
    )
    bare = timings["magisterium_decode_only"]
    if bare:
        section.note(
            "decode_response alone vs the faster pydantic path: "
            + ", ".join(
                f"{f} {min(timings[n][f] for n in pydantic) / bare[f]:.1f}x" for f in FIXTURES
            )
        )
    return section
