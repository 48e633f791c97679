"""``harvest --dry-run``: the requests a harvest would make, and the time they take at the
quota the client keeps to; nothing is sent and no file is written.

The searches are known (one per query); the fetches are not, until the searches answer
(one per new document found): the dry run says so, and gives what each document costs.
A harvest that has a state to continue is counted as the real run would go: the queries
the state records answered are not sent, and the documents it found and has not fetched
are fetched first. The state is read while holding its lock (a state another harvest
holds is refused, as the harvest would be) and never written.
"""

from __future__ import annotations

import math
import os
from typing import Any

import anyio.to_thread

from magisterium_async._cli._client import quota_of
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._cli._output import duration, plural, quoted
from magisterium_async._cli.harvest._plan import Plan, plan
from magisterium_async._config import RateLimits
from magisterium_async._errors import StateError
from magisterium_async._harvest import HarvestLock, answered
from magisterium_async._skills import require_query

__all__ = ["dry_run", "starts_take"]


def starts_take(count: int, limits: RateLimits, pool: str = "default") -> float:
    """Seconds from the first of ``count`` starts to the last at ``limits``, on a fresh
    quota: a window's starts at once, then the next window's after the window and its
    safety margin (what the sliding log allows a bulk job alone)."""
    starts, window = limits.window_for(pool)
    if not starts or count <= 1:
        return 0.0
    return ((count - 1) // starts) * (window + limits.margin)


def _in_state(state: str, queries: list[str]) -> tuple[list[str], int]:
    """What the state spares the run (see :func:`answered`), read under its lock; none
    there, nothing. A state a running harvest holds is refused, as the real run would be
    (whether it resumes or had just made it)."""
    lock = HarvestLock(state, "state", StateError)
    if not os.path.lexists(lock.lock_path) and not os.path.lexists(state):
        return [], 0  # nobody has begun this harvest
    try:
        with lock:  # a harvest just begun holds the lock before its state exists
            return answered(state, queries) if os.path.lexists(state) else ([], 0)
    except StateError as exc:  # held by a harvest, or not a harvest's state
        raise CliError(str(exc), ExitCode.USAGE) from None
    except OSError as exc:
        raise CliError(f"cannot read the harvest state {state}: {exc}", ExitCode.USAGE) from None


async def _record(where: Plan, lines: list[str], limits: RateLimits) -> dict[str, Any]:
    # The harvest searches a repeated query once (each as the one query rule makes it;
    # the plan has refused any the rule refuses already).
    distinct = list(dict.fromkeys(require_query("query", line) for line in lines))
    done: list[str] = []
    to_fetch = 0
    if where.state is not None:
        done, to_fetch = await anyio.to_thread.run_sync(_in_state, where.state, distinct)
        if not where.resuming:  # a new harvest's state, made by one just started
            done, to_fetch = [], 0
    answered_before = set(done)
    queries = [query for query in distinct if query not in answered_before]
    starts, window = limits.window_for("default")
    limit = limits.limit_for("default")
    return {
        "dry_run": True,
        "sent": 0,
        "searches": queries,
        "repeated": len(lines) - len(distinct),
        "answered": len(done),
        "found_to_fetch": to_fetch,
        "fetches": None if queries else to_fetch,
        "pool": "default",
        "quota": {"limit": None if math.isinf(limit) else limit, "period": limits.period},
        "searches_take": starts_take(len(queries), limits),
        "per_document": (window + limits.margin) / starts if starts else 0.0,
        "out": where.out,
        "state": where.state,
        "resuming": where.resuming,
    }


def _lines(record: dict[str, Any], limits: RateLimits) -> list[str]:
    queries: list[str] = record["searches"]
    limit = record["quota"]["limit"]
    pace = "no quota (unlimited)" if limit is None else f"{limit:g} per {limits.period:g} s"
    lines = [
        f"Dry run: {plural(len(queries), 'search', 'searches')} would be sent first, "
        f"from the default pool at {pace}:"
        if queries
        else "Dry run: no search would be sent."
    ]
    lines += [f"  search {quoted(query)}" for query in queries]
    if record["repeated"]:
        lines.append(
            f"({plural(record['repeated'], 'query', 'queries')} repeated in the input "
            "would not be searched again.)"
        )
    if record["answered"]:
        lines.append(
            f"({plural(record['answered'], 'query', 'queries')} answered before, as the "
            f"state {record['state']} records, would not be searched again.)"
        )
    took = record["searches_take"]
    if queries:
        lines.append(
            f"The searches alone take {duration(took)} at this quota (a "
            "window's at once, then the next window's)."
            if took
            else "The searches can all go at once at this quota."
        )
    cost = f", {record['per_document']:.1f} s of quota at this pace." if limit is not None else "."
    found = record["found_to_fetch"]
    earlier = (
        f"the {plural(found, 'document', 'documents')} found before and not fetched yet"
        if found
        else ""
    )
    if queries:
        also = f"each of {earlier}, and one for " if earlier else ""
        lines.append(
            f"Then one fetch for {also}each new document the searches find: unknown until "
            "they answer. Each costs one request from the same pool" + cost
        )
    elif found:
        lines.append(f"Then one fetch for each of {earlier}. Each costs one request" + cost)
    else:
        lines.append("Nothing to fetch either: a run now would send no request.")
    where = record["out"] or "stdout"
    state = f" (state {record['state']})" if record["state"] else ""
    lines.append(f"Documents would go to {where}{state}. Nothing was sent; no file was changed.")
    return lines


async def dry_run(invocation: Invocation) -> int:
    """Print the plan of the harvest ``invocation`` asks for; send nothing, write nothing.
    The arguments and files are checked as the harvest checks them."""
    limits = quota_of(invocation.args)
    where = plan(invocation.args)
    try:
        await where.check_not_empty()  # stdin with no query: refused as the harvest is
        queries = [query async for query in where.lines()]
    finally:
        where.close()
    record = await _record(where, queries, limits)
    invocation.output.result(record, lambda: print("\n".join(_lines(record, limits))))
    return ExitCode.OK
