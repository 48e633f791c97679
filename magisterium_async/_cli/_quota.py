"""``quota``: what is left of the token's quota now, per pool, and when the next request may
go (sends nothing to the service, spends no quota)."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import TYPE_CHECKING, Any

from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._options import add_redis_option

if TYPE_CHECKING:
    from magisterium_async._ratelimit import PoolQuota, Quota

__all__ = ["COMMAND", "pool_record", "seconds"]

_WHAT = {"default": "every skill but ask", "expensive": "ask"}


def seconds(value: float) -> str:
    """A wait in words: ``now``, ``in 12.5 s``, ``in 2 min 5 s``."""
    if value <= 0:
        return "now"
    if value < 60:
        return f"in {value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"in {minutes} min {rest} s"


def pool_record(pool: PoolQuota) -> dict[str, Any]:
    """One pool as JSON (``null`` for what an unlimited pool does not have)."""
    record = dataclasses.asdict(pool)
    for name in ("limit", "configured"):
        if math.isinf(record[name]):
            record[name] = None
    return record


def _line(pool: PoolQuota) -> str:
    head = f"{pool.pool} ({_WHAT[pool.pool]}):"
    if pool.unlimited:
        return f"{head} unlimited"
    # A limit of 1 or more per period counts whole starts (2.9 allows 2): only below that
    # did the service's refusals lower it. Below 1 per period (one start per longer
    # window) it cannot be lowered at all, and its limit is only the float it was.
    lowered = (
        f" (lowered from {pool.configured:g} after the service refused)"
        if pool.configured >= 1 and pool.limit < math.floor(pool.configured)
        else ""
    )
    text = (
        f"{head} {pool.used} of {pool.limit:g} per {pool.period:g} s used{lowered}, "
        f"{pool.left} left; next request {seconds(pool.next_start_in)}"
    )
    if pool.paused_for > 0:
        text += f" (paused after a 429 for {pool.paused_for:.1f} s more)"
    return text


def _source(quota: Quota, shared: bool) -> str:
    if all(pool.unlimited for pool in quota.pools):
        return "no quota to count: both pools are unlimited"
    if quota.shared:
        return "from the shared quota in Redis: every process's requests on this token"
    if shared:
        return (
            "Redis did not answer: this process's view only, which has sent nothing, so "
            "other processes' requests are not counted"
        )
    return (
        "this process's view only (a new process has sent nothing): give --redis URL or "
        "$MAGISTERIUM_REDIS_URL to count every process's requests on the token"
    )


async def _run(invocation: Invocation) -> int:
    from magisterium_async._cli._client import open_client
    from magisterium_async._config import redis_url

    options = invocation.options
    url = redis_url(invocation.args.redis)
    if url is not None:
        options = dataclasses.replace(options, redis=url)
    # Without a shared quota there is nothing to read but this process's own view: no
    # token is needed for it (with one, the token names whose quota it is).
    async with open_client(options, sends=url is not None) as client:
        quota = await client.quota()
    record = {
        "shared": quota.shared,
        "pools": {pool.pool: pool_record(pool) for pool in quota.pools},
    }

    def show() -> None:
        for pool in quota.pools:
            print(_line(pool))
        print(f"({_source(quota, url is not None)})")

    invocation.output.result(record, show)
    return ExitCode.OK


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_redis_option(parser, "read the token's shared quota from this Redis")


COMMAND = Command(
    "quota",
    "what is left of the quota now, per pool, and when the next request may go "
    "(sends nothing, spends no quota)",
    _run,
    _arguments,
)
