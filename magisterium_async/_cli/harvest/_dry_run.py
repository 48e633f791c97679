"""``harvest --dry-run``: the requests a harvest would make and the time they take at the
quota the client keeps to; nothing is sent and no file is written.

The searches are known (one per distinct query); the fetches are not until the searches
answer (one per new document), so it says what each costs. A harvest with a state to
continue is counted as the real run would go: queries the state records answered are
not sent, documents found and not fetched are fetched first. The state is read under its
lock (one another harvest holds is refused, as the harvest would be), never written.
"""

from __future__ import annotations

import math
from typing import Any

import anyio.to_thread

from magisterium_async._cli._client import quota_of
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._output import duration, plural, quoted
from magisterium_async._cli.harvest._plan import plan
from magisterium_async._config import RateLimits
from magisterium_async._errors import StateError
from magisterium_async._harvest import HarvestLock, HarvestState

__all__ = ["dry_run", "starts_take"]


def starts_take(count: int, limits: RateLimits, pool: str = "default") -> float:
    """Seconds from the first of ``count`` starts to the last at ``limits``, on a fresh
    quota: a window's starts at once, then the next window's after the window and its
    safety margin (what the sliding log allows a bulk job alone)."""
    starts, window = limits.window_for(pool)
    if not starts or count <= 1:
        return 0.0
    return ((count - 1) // starts) * (window + limits.margin)


async def _spared(state: str, queries: list[str], resuming: bool) -> tuple[list[str], int]:
    """Those of ``queries`` the state answered, and the documents it found and did not
    fetch, read under its lock."""
    lock = HarvestLock(state, "state", StateError)
    await anyio.to_thread.run_sync(lock.acquire)
    try:
        if not resuming:
            return [], 0
        opened = await HarvestState.open(state)
        try:
            documents = (await opened.summary()).documents
            left = documents.get("pending", 0) + documents.get("failed", 0)
            return await opened.answered(queries), left
        finally:
            await opened.aclose()
    finally:
        lock.release()


def _lines(record: dict[str, Any]) -> list[str]:
    queries, found, took = record["searches"], record["found_to_fetch"], record["searches_take"]
    limit, period = record["quota"]["limit"], record["quota"]["period"]
    pace = "no quota (unlimited)" if limit is None else f"{limit:g} per {period:g} s"
    lines = [
        f"Dry run: {plural(len(queries), 'search', 'searches')} would be sent first, "
        f"from the default pool at {pace}:"
        if queries
        else "Dry run: no search would be sent."
    ]
    lines += [f"  search {quoted(query)}" for query in queries]
    if record["repeated"]:
        lines.append(
            f"({plural(record['repeated'], 'query', 'queries')} repeated in the input would "
            "not be searched again.)"
        )
    if record["answered"]:
        lines.append(
            f"({plural(record['answered'], 'query', 'queries')} answered before, as the state "
            f"{record['state']} records, would not be searched again.)"
        )
    if queries:
        lines.append(
            f"The searches alone take {duration(took)} at this quota (a window's at once, "
            "then the next window's)."
            if took
            else "The searches can all go at once at this quota."
        )
    cost = "." if limit is None else f", {duration(record['per_document'])} of quota at this pace."
    earlier = f"the {plural(found, 'document')} found before and not fetched yet"
    if queries:
        also = f"each of {earlier}, and one for " if found else ""
        lines.append(
            f"Then one fetch for {also}each new document the searches find: unknown until "
            "they answer. Each costs one request from the same pool" + cost
        )
    elif found:
        lines.append(f"Then one fetch for each of {earlier}. Each costs one request" + cost)
    else:
        lines.append("Nothing to fetch either: a run now would send no request.")
    state = f" (state {record['state']})" if record["state"] else ""
    lines.append(
        f"Documents would go to {record['out'] or 'stdout'}{state}. Nothing was sent; no file "
        "was changed."
    )
    return lines


async def dry_run(invocation: Invocation) -> int:
    """Print the plan of the harvest ``invocation`` asks for; send nothing, write nothing.
    The arguments and files are checked as the harvest checks them."""
    limits = quota_of(invocation.args)
    where = await plan(invocation.args)
    await where.check_not_empty()  # stdin with no query: refused as the harvest is
    lines = [query async for query in where.lines()]
    distinct = list(dict.fromkeys(lines))  # the harvest searches a repeated query once
    done: list[str] = []
    to_fetch = 0
    if where.state is not None:
        done, to_fetch = await _spared(where.state, distinct, where.resuming)
    queries = [query for query in distinct if query not in set(done)]
    starts, window = limits.window_for("default")
    limit = limits.limit_for("default")
    record = {
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
    invocation.output.result(record, lambda: print("\n".join(_lines(record))))
    return ExitCode.OK
