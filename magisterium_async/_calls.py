"""The path every call takes once the client has built it, down to the transport.

Owns, for one call: the overall deadline (``RetryPolicy.total_timeout``, read once), the
retry loop in a slot of the call's pool, the token of each try (renewed once after the
service refuses it: the resend takes a slot of its own, so the pool counts it and paces
it), and the call's telemetry.
The client builds requests and reads answers; the scheduler decides when a try may go;
the transport sends it. Nothing here calls back up.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from magisterium_async._auth._tokens import TokenSource
from magisterium_async._clock import Clock
from magisterium_async._config import CallOptions, PoolName, RetryPolicy
from magisterium_async._deadline import within
from magisterium_async._errors import APITimeoutError, AuthenticationError
from magisterium_async._http._jsonrpc import Transport, encode_params
from magisterium_async._models import Task
from magisterium_async._ratelimit import Scheduler
from magisterium_async._retry import call_with_retries
from magisterium_async._telemetry import Answered, CallObserver, Telemetry

__all__ = ["Calls"]

T = TypeVar("T")
U = TypeVar("U", bound=Answered)


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

    def rpc(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        *,
        timeout: float,
        policy: RetryPolicy,
        options: CallOptions,
        skill_id: str | None = None,
        usual: type[U] | None = None,
    ) -> Awaitable[Task | U]:
        """One JSON-RPC call: retried in its pool's slots, within the total deadline.

        ``usual``: the skill's usual answer (see :mod:`._usual`), returned as it when the
        service answers in that shape. A plain function returning the call's awaitable: of
        the thousands of calls an ``asyncio.gather`` leaves waiting for their turn, each
        holds one small object and a few frames, which is what the cyclic GC walks while
        they wait.
        """
        observer = self.telemetry.observe(method, pool or "unmetered", params)
        # Encoded once, now: a waiting call holds bytes, not a tree of objects for the
        # cyclic GC to walk, and every try sends the same bytes.
        params = encode_params(params)
        call: _Call[U] = _Call(
            self, method, params, pool, timeout, policy, options, skill_id, observer, usual
        )
        # A fixed token is never renewed: its tries need no renewal around them.
        work = call.tries if self.tokens is None else call.run
        return observer.traced(self.within_total(method, policy, work))

    def unmetered(
        self, what: str, attempt: Callable[[], Awaitable[T]], policy: RetryPolicy
    ) -> Awaitable[T]:
        """``attempt`` (a request outside the quota: the agent card), retried in the
        unmetered pool's slots, within the total deadline."""
        return self.within_total(
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

    def within_total(
        self, what: str, policy: RetryPolicy, work: Callable[[float], Awaitable[T]]
    ) -> Awaitable[T]:
        """``work(deadline)``, ended at ``policy.total_timeout``: the one reading of it, so
        the retry loop's deadline (a time on the clock) and the cut-off are one moment."""
        total = policy.total_timeout
        if total is None:
            return work(math.inf)

        def expired() -> APITimeoutError:
            return APITimeoutError(
                f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
                "over every attempt and wait"
            )

        return within(self.clock, total, work(self.clock.now() + total), expired)


@dataclasses.dataclass(slots=True)
class _Call(Generic[U]):
    """One protocol call on its way: what it sends, and where it is with its token.

    ``due`` once the token source has a new token after a refusal; ``resending`` for the
    one resend with it (a refusal then is final).
    """

    calls: Calls
    method: str
    params: Any
    pool: PoolName | None
    timeout: float
    policy: RetryPolicy
    options: CallOptions
    skill_id: str | None
    observer: CallObserver
    usual: type[U] | None
    due: bool = False
    resending: bool = False

    async def run(self, deadline: float) -> Task | U:
        """The tries; once more, in a slot of its own, if the token was refused and
        renewed (the resend answers a refused token: it is not one of ``max_retries``)."""
        try:
            return await self.tries(deadline)
        except AuthenticationError:
            if not self.due:
                raise
        self.resending = True
        return await self.tries(deadline)

    def tries(self, deadline: float) -> Awaitable[Task | U]:
        """The retry loop of this call, in its pool's slots."""
        calls, policy, options = self.calls, self.policy, self.options
        return call_with_retries(
            self.send,
            pool=calls.scheduler.pool(self.pool),
            priority=options.priority,
            fairness_key=options.fairness_key,
            policy=policy,
            clock=calls.clock,
            what=self.method,
            retry_timeouts=self.pool != "expensive" or policy.retry_expensive_timeouts,
            deadline=deadline,
            observer=self.observer,
        )

    def send(self) -> Awaitable[Task | U]:
        """One try: the request with the current token."""
        if self.calls.tokens is None:  # a fixed token: the request as it is, no frame more
            return self.calls.transport.rpc(
                self.method,
                self.params,
                timeout=self.timeout,
                skill_id=self.skill_id,
                usual=self.usual,
            )
        return self._send_with_token()

    async def _send_with_token(self) -> Task | U:
        rpc, tokens = self.calls.transport.rpc, self.calls.tokens
        assert tokens is not None
        token = await tokens.token()
        try:
            return await rpc(
                self.method,
                self.params,
                timeout=self.timeout,
                token=token,
                skill_id=self.skill_id,
                usual=self.usual,
            )
        except AuthenticationError:
            if not self.resending and await tokens.rejected(token):
                self.due = True  # a new token is ready: resend once, with it
            raise
