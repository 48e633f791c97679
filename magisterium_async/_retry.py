"""A call's way down, once the client has built it: its deadline, its tries, its token.

:class:`CallPath` owns, for one call: the overall deadline (``RetryPolicy.total_timeout``,
read once), the retry loop (:func:`call_with_retries`: each try in a slot of the call's
pool, retried by the rules of :class:`RetryPolicy`), the token of each try (renewed once
after the service refuses it: the resend takes a slot of its own, so the pool counts it
and paces it), and the call's telemetry. The client builds requests and reads answers;
the scheduler decides when a try may go; the transport sends it. Nothing here calls back
up.

Each call is sent in the dialect the client's :class:`Negotiation` holds; a call refused
because the server speaks the other one ("method not found", "version not supported") is
sent once more when the negotiation switches (see :mod:`._http._dialect`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

from magisterium_async._auth._tokens import TokenSource
from magisterium_async._clock import Clock, within
from magisterium_async._config import CallOptions, PoolName, Priority, RetryPolicy
from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    MagisteriumError,
    RateLimitError,
    is_transient,
)
from magisterium_async._http._dialect import Dialect, Negotiation
from magisterium_async._http._jsonrpc import Transport, encode_params
from magisterium_async._ratelimit import Pool, Scheduler
from magisterium_async._telemetry import NO_OBSERVER, CallObserver, Telemetry, error_type

__all__ = ["CallPath", "RateLimitWait", "call_with_retries", "rate_limit_wait"]

logger = logging.getLogger("magisterium_async.retry")

T = TypeVar("T")


class RateLimitWait(NamedTuple):
    """What one 429 means in seconds: ``window``, until the server's window ends as it
    said (what the pool learns from); ``delay``, what the call waits before its next try."""

    window: float
    delay: float


def rate_limit_wait(error: RateLimitError, policy: RetryPolicy, limited: int) -> RateLimitWait:
    """What a 429 means in waits; ``limited``: the call's 429s before this one.

    ``window`` is the service's wait (or ``policy.fallback_retry_after`` when it gave
    none), at most ``policy.max_retry_after``. ``delay`` is that, but at least
    ``policy.min_retry_after * 2**limited``, so a wait of 0 or a tiny one cannot make a hot
    loop, and it counts against ``policy.rate_limit_budget``.
    """
    wait = error.retry_after
    if wait is None:
        wait = policy.fallback_retry_after
    window = min(wait, policy.max_retry_after)
    floor = policy.min_retry_after * 2.0 ** min(limited, 64)
    return RateLimitWait(window, min(max(window, floor), policy.max_retry_after))


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    pool: Pool,
    policy: RetryPolicy,
    clock: Clock,
    what: str,
    priority: Priority = "interactive",
    fairness_key: str | None = None,
    retry_timeouts: bool = True,
    jitter: Callable[[], float] = random.random,
    deadline: float = math.inf,
    observer: CallObserver = NO_OBSERVER,
) -> T:
    """Run ``attempt`` in a slot of ``pool`` until it succeeds or may not be retried.

    ``priority`` and ``fairness_key`` place each try in the pool's line (see
    ``_ratelimit/_lines.py``); a retry waits in line again, with them.

    A 429 is told to the pool (which decides whether everyone pauses) and the call waits
    :func:`rate_limit_wait` outside its slot; it costs no retry, until the waits of this
    call pass ``policy.rate_limit_budget``, or until its wait would end after ``deadline``
    (a time on ``clock``): then the :class:`RateLimitError` is raised at once, since
    sleeping to the deadline could only end in a timeout. Transient failures are retried
    ``policy.max_retries`` times with exponential backoff, outside the pool's slot.
    ``observer`` hears of each slot, answer and retry (telemetry). Each retry is logged
    (INFO), its record carrying ``retry_in`` (the seconds before it) for whoever shows
    waits: ``retry`` and ``reason`` after a failure, ``retry_after`` after a 429.
    """
    retries = 0
    limited = 0
    waited = 0.0
    while True:
        asked = clock.now()
        async with pool.slot(priority, fairness_key) as permit:
            observer.admitted(permit.started - asked)
            try:
                result = await attempt()
            except RateLimitError as exc:
                observer.answered(exc)
                window, delay = rate_limit_wait(exc, policy, limited)
                limited += 1
                waited += delay
                permit.rate_limited(window)
                if waited > policy.rate_limit_budget or clock.now() + delay > deadline:
                    raise
                permit.retried()
                observer.retrying(retries + limited, "rate_limited")
                told = exc.retry_after
                asked_for = "" if told is None else f"; the service asks to wait {told:g} s"
                logger.info(
                    "%s: rate limited (HTTP 429%s); retrying in %.3g s", what, asked_for, delay,
                    extra={"retry_in": delay, "retry_after": told},
                )  # fmt: skip
            except MagisteriumError as exc:
                observer.answered(exc)
                if isinstance(exc, APIConnectionError) and not exc.reached_server:
                    permit.not_sent()  # the try spent no quota: its start is given back
                if retries >= policy.max_retries or not is_transient(
                    exc, retry_timeouts=retry_timeouts
                ):
                    raise
                permit.retried()
                delay = policy.backoff(retries, jitter())
                retries += 1
                observer.retrying(retries + limited, error_type(exc))
                limit = policy.max_retries
                # The error names the method already; the prefix is for those that do not.
                text = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
                logger.info(
                    "%s; retry %d of %d in %.3g s", text, retries, limit, delay,
                    extra={"retry_in": delay, "retry": retries, "reason": str(exc)},
                )  # fmt: skip
            else:
                observer.answered(None)
                return result
        await clock.sleep(delay)


class CallPath:
    """The way down of one client's calls (shared by the views ``with_options`` makes,
    which pass their own policy, timeout and options with each call)."""

    def __init__(
        self,
        transport: Transport,
        scheduler: Scheduler,
        clock: Clock,
        tokens: TokenSource | None,
        telemetry: Telemetry,
        negotiation: Negotiation | None = None,
    ) -> None:
        self.transport = transport
        self.scheduler = scheduler
        self.clock = clock
        self.tokens = tokens
        self.telemetry = telemetry
        self.negotiation = negotiation or Negotiation("0.3")
        """The dialect calls are sent in (today's alone, unless the client says more)."""

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
        cache: str | None = None,
        dialect: Dialect | None = None,
    ) -> Any:
        """One JSON-RPC call (``method`` named by its A2A 0.3 method): retried in its
        pool's slots, within the total deadline, in ``dialect`` (default: the
        negotiation's). Its answer: a Task, or a TaskPage for ``tasks/list``.
        ``cache``: ``"miss"`` for a call the cache policy covers (on its span)."""
        observer = self.telemetry.observe(method, pool or "unmetered", params, cache)
        call = _Call(
            self,
            method,
            params,
            pool,
            timeout,
            policy,
            options,
            skill_id,
            observer,
            dialect or self.negotiation.dialect,
        )
        return await observer.traced(self.within_total(method, policy, call.in_dialects))

    async def unmetered(
        self, what: str, attempt: Callable[[], Awaitable[T]], policy: RetryPolicy
    ) -> T:
        """``attempt`` (a request outside the quota: the agent card), retried in the
        unmetered pool's slots, within the total deadline."""

        def work(deadline: float) -> Awaitable[T]:
            return call_with_retries(
                attempt,
                pool=self.scheduler.pool(None),
                policy=policy,
                clock=self.clock,
                what=what,
                deadline=deadline,
            )

        return await self.within_total(what, policy, work)

    async def within_total(
        self, what: str, policy: RetryPolicy, work: Callable[[float], Awaitable[T]]
    ) -> T:
        """``work(deadline)``, ended at ``policy.total_timeout``: read once, so the retry
        loop's deadline (a time on the clock) and the cut-off are one moment."""
        total = policy.total_timeout
        if total is None:
            return await work(math.inf)

        def expired() -> APITimeoutError:
            return APITimeoutError(
                f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
                "over every attempt and wait"
            )

        return await within(self.clock, total, work(self.clock.now() + total), expired)


@dataclasses.dataclass
class _Call:
    """One protocol call on its way: what it sends, and where it is with its token.

    ``renewed`` once the token source has a new token after a refusal; ``resending`` for
    the one resend with it (a refusal then is final). ``encoded``: the params in
    ``dialect``'s shape, encoded once, so every try sends the same bytes.
    """

    path: CallPath
    method: str
    params: Any
    pool: PoolName | None
    timeout: float
    policy: RetryPolicy
    options: CallOptions
    skill_id: str | None
    observer: CallObserver
    dialect: Dialect
    renewed: bool = False
    resending: bool = False
    encoded: Any = None

    def __post_init__(self) -> None:
        self.encoded = encode_params(self.dialect.params(self.method, self.params))

    async def in_dialects(self, deadline: float) -> Any:
        """The call in its dialect; once more in the other if the server refused it for
        the dialect and the negotiation switched."""
        try:
            return await self.run(deadline)
        except MagisteriumError as exc:
            negotiation = self.path.negotiation
            if not await negotiation.resend_after(exc, self.dialect):
                raise
        self.dialect = negotiation.dialect
        self.encoded = encode_params(self.dialect.params(self.method, self.params))
        self.renewed = self.resending = False
        return await self.run(deadline)

    async def run(self, deadline: float) -> Any:
        """The tries; once more, in a slot of its own, if the token was refused and
        renewed (the resend answers a refused token: it is not one of ``max_retries``)."""
        try:
            return await self.tries(deadline)
        except AuthenticationError:
            if not self.renewed:
                raise
        self.resending = True
        return await self.tries(deadline)

    async def tries(self, deadline: float) -> Any:
        """The retry loop of this call, in its pool's slots."""
        path, policy, options = self.path, self.policy, self.options
        return await call_with_retries(
            self.send,
            pool=path.scheduler.pool(self.pool),
            priority=options.priority,
            fairness_key=options.fairness_key,
            policy=policy,
            clock=path.clock,
            what=self.method,
            retry_timeouts=self.pool != "expensive" or policy.retry_expensive_timeouts,
            deadline=deadline,
            observer=self.observer,
        )

    async def send(self) -> Any:
        """One try: the request with the current token (a fixed token: the transport's)."""
        transport, tokens = self.path.transport, self.path.tokens
        if tokens is None:
            return await transport.rpc(
                self.method,
                self.encoded,
                timeout=self.timeout,
                skill_id=self.skill_id,
                speech=self.dialect,
            )
        token = await tokens.token()
        try:
            return await transport.rpc(
                self.method,
                self.encoded,
                timeout=self.timeout,
                token=token,
                skill_id=self.skill_id,
                speech=self.dialect,
            )
        except AuthenticationError:
            if not self.resending and await tokens.rejected(token):
                self.renewed = True  # a new token is ready: resend once, with it
            raise
