"""``quota``: what is left of the token's quota now, per pool, and when the next request may
go (sends nothing to the service, spends no quota)."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import TYPE_CHECKING

from magisterium_async._cli._client import open_client
from magisterium_async._cli._command import Command, Invocation
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._options import add_redis_option
from magisterium_async._cli._output import duration
from magisterium_async._config import redis_url

if TYPE_CHECKING:
    from magisterium_async._ratelimit import PoolQuota

__all__ = ["COMMAND"]

_WHAT = {"default": "every skill but ask", "expensive": "ask"}


def _line(pool: PoolQuota) -> str:
    head = f"{pool.pool} ({_WHAT[pool.pool]}):"
    if pool.unlimited:
        return f"{head} unlimited"
    # A limit of 1 or more per period counts whole starts (2.9 allows 2): only below that
    # did the service's refusals lower it. Below 1 per period (one start per longer
    # window) it cannot be lowered at all, and its limit is only the float it was.
    lowered = pool.configured >= 1 and pool.limit < math.floor(pool.configured)
    next_in = pool.next_start_in
    text = (
        f"{head} {pool.used} of {pool.limit:g} per {pool.period:g} s used"
        + (f" (lowered from {pool.configured:g} after the service refused)" if lowered else "")
        + f", {pool.left} left; next request {f'in {duration(next_in)}' if next_in > 0 else 'now'}"
    )
    if pool.paused_for > 0:
        text += f" (paused after a 429 for {duration(pool.paused_for)} more)"
    return text


async def _run(invocation: Invocation) -> int:
    url = redis_url(invocation.args.redis)
    # Without a shared quota there is nothing to read but this process's own view: no
    # token is needed for it (with one, the token names whose quota it is).
    async with open_client(invocation.args, sends=url is not None) as client:
        quota = await client.quota()
    pools = {}
    for pool in quota.pools:  # JSON has no infinity: null for what an unlimited pool lacks
        record = dataclasses.asdict(pool)
        pools[pool.pool] = {k: None if v == math.inf else v for k, v in record.items()}
    if all(pool.unlimited for pool in quota.pools):
        source = "no quota to count: both pools are unlimited"
    elif quota.shared:
        source = "from the shared quota in Redis: every process's requests on this token"
    elif url is not None:
        source = (
            "Redis did not answer: this process's view only, which has sent nothing, so "
            "other processes' requests are not counted"
        )
    else:
        source = (
            "this process's view only (a new process has sent nothing): give --redis URL or "
            "$MAGISTERIUM_REDIS_URL to count every process's requests on the token"
        )

    def show() -> None:
        print("\n".join([*map(_line, quota.pools), f"({source})"]))

    invocation.output.result({"shared": quota.shared, "pools": pools}, show)
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
