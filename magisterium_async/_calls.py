"""The path every call takes once the client has built it, down to the transport.

Owns, for one call: the overall deadline (``RetryPolicy.total_timeout``, read once), the
retry loop in a slot of the call's pool, the token of each try (renewed once after the
service refuses it: the resend takes a slot of its own, so the pool counts it and paces
it), and the call's telemetry.
The client builds requests and reads answers; the scheduler decides when a try may go;
the transport sends it. Nothing here calls back up.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._auth import TokenSource
from ._clock import Clock
from ._config import CallOptions, PoolName, RetryPolicy
from ._deadline import within
from ._errors import APITimeoutError, AuthenticationError
from ._models import Task
from ._ratelimit import Scheduler
from ._retry import call_with_retries
from ._telemetry import Telemetry
from ._transport import Transport

__all__ = ["Calls"]

T = TypeVar("T")


class Calls:
    """The call path of one client (shared by the views ``with_options`` makes, which
    pass their own policy, timeout and options with each call)."""

    def __init__(
        self,
        transport: Transport,
        scheduler: Scheduler,
        clock: Clock,
        tokens: TokenSource | None,
        telemetry: Telemetry,
    ) -> None:
        self.transport = transport
        self.scheduler = scheduler
        self.clock = clock
        self.tokens = tokens
        self.telemetry = telemetry

    async def rpc(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        *,
        timeout: float,
        policy: RetryPolicy,
        options: CallOptions,
        skill_id: str | None = None,
    ) -> Task:
        """One JSON-RPC call: retried in its pool's slots, within the total deadline."""
        rpc = self.transport.rpc
        tokens = self.tokens
        renewal = _Renewal()

        async def send() -> Task:
            if tokens is None:
                return await rpc(method, params, timeout=timeout, skill_id=skill_id)
            token = await tokens.token()
            try:
                return await rpc(method, params, timeout=timeout, token=token, skill_id=skill_id)
            except AuthenticationError:
                if not renewal.resending and await tokens.rejected(token):
                    renewal.due = True  # a new token is ready: resend once, with it
                raise

        observer = self.telemetry.observe(method, pool or "unmetered", params)

        def tries(deadline: float) -> Awaitable[Task]:
            return call_with_retries(
                send,
                pool=self.scheduler.pool(pool),
                priority=options.priority,
                fairness_key=options.fairness_key,
                policy=policy,
                clock=self.clock,
                what=method,
                retry_timeouts=pool != "expensive" or policy.retry_expensive_timeouts,
                deadline=deadline,
                observer=observer,
            )

        async def renewing(deadline: float) -> Task:
            try:
                return await tries(deadline)
            except AuthenticationError:
                if not renewal.due:
                    raise
            # The resend is a request like any other: it waits for a slot of the pool
            # (which counts it), not a retry of max_retries: it answers a refused token.
            renewal.resending = True
            return await tries(deadline)

        return await observer.traced(self.within_total(method, policy, renewing))

    async def unmetered(
        self, what: str, attempt: Callable[[], Awaitable[T]], policy: RetryPolicy
    ) -> T:
        """``attempt`` (a request outside the quota: the agent card), retried in the
        unmetered pool's slots, within the total deadline."""
        return await self.within_total(
            what,
            policy,
            lambda deadline: call_with_retries(
                attempt,
                pool=self.scheduler.pool(None),
                policy=policy,
                clock=self.clock,
                what=what,
                deadline=deadline,
            ),
        )

    async def within_total(
        self, what: str, policy: RetryPolicy, work: Callable[[float], Awaitable[T]]
    ) -> T:
        """``work(deadline)``, ended at ``policy.total_timeout``: the one reading of it, so
        the retry loop's deadline (a time on the clock) and the cut-off are one moment."""
        total = policy.total_timeout
        if total is None:
            return await work(math.inf)

        def expired() -> APITimeoutError:
            return APITimeoutError(
                f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
                "over every attempt and wait"
            )

        return await within(self.clock, total, work(self.clock.now() + total), expired)


class _Renewal:
    """Where one call is with its token: ``due`` once the source has a new token after a
    refusal; ``resending`` for the one resend with it (a refusal then is final)."""

    __slots__ = ("due", "resending")

    def __init__(self) -> None:
        self.due = False
        self.resending = False
