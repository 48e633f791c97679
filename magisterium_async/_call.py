"""One call, from the client down to the transport: its deadline, its tries, its token.

:class:`CallPath` makes a protocol call the client built into a :class:`Call`, whose
tries go through :func:`call_with_retries`, the one loop every request goes through (the
agent card's GET too). A call the cache may share takes its first turn in the pool's line
alone first (:meth:`Call.turn`), before its tries are made. Its budgets, each read in one
place, top to bottom:

- the total deadline (``RetryPolicy.total_timeout``, read once, from when the call asks
  for its first turn: the loop's deadline and the cut-off are one moment);
- ``RetryPolicy.max_retries`` tries more for a transient failure (backoff outside the
  slot);
- the 429 budget (``RetryPolicy.rate_limit_budget`` seconds of waiting; a 429 spends no
  retry);
- one resend with a new token after the service refused one (a slot of its own);
- one resend in the other dialect after a refusal that may be the dialect's ("method not
  found", "version not supported"), when the agent card offers it (see
  :class:`._http._card.Negotiation`).

The client builds requests and reads answers; the scheduler decides when a try may go;
the transport sends it. Nothing here calls back up.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from magisterium_async._auth import TokenSource
from magisterium_async._clock import Clock, within
from magisterium_async._config import (
    DEFAULT_RETRY_POLICY,
    CallOptions,
    PoolName,
    Priority,
    RetryPolicy,
)
from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    MagisteriumError,
    RateLimitError,
    is_transient,
)
from magisterium_async._events import OnEvent, PoolEvent, RetryEvent, unheard
from magisterium_async._http._card import Answer, CardReader, Negotiation, get_card
from magisterium_async._http._dialect import Dialect, ProtocolVersion
from magisterium_async._http._jsonrpc import Transport, encode_params
from magisterium_async._ratelimit import Permit, Pool, Scheduler
from magisterium_async._telemetry import NO_OBSERVER, CallObserver, Telemetry, error_type

__all__ = ["Attempt", "Call", "CallPath", "call_with_retries"]

T = TypeVar("T")

Attempt = Callable[[str | None], Awaitable[T]]
"""One try, given the token to send (``None``: no token source; the transport's own)."""


async def call_with_retries(
    attempt: Attempt[T],
    *,
    pool: Pool,
    policy: RetryPolicy,
    clock: Clock,
    what: str,
    tokens: TokenSource | None = None,
    redial: Callable[[MagisteriumError], Awaitable[Attempt[T] | None]] | None = None,
    priority: Priority = "interactive",
    fairness_key: str | None = None,
    retry_timeouts: bool = True,
    jitter: Callable[[], float] = random.random,
    deadline: float = math.inf,
    observer: CallObserver = NO_OBSERVER,
    events: OnEvent = unheard,
    first: tuple[Permit, float] | None = None,
) -> T:
    """Run ``attempt`` in a slot of ``pool`` until it succeeds or may not be tried again.

    Arguments:
        attempt: one try, handed the token of ``tokens`` (``None`` without them).
        pool: whose slots the tries take; ``priority`` and ``fairness_key`` place each
            try in its line (see ``_ratelimit/_lines.py``), a retry too.
        policy: the budgets: ``max_retries`` for transient failures (exponential backoff
            with ``jitter``, outside the slot; timeouts only if ``retry_timeouts``), the
            429s' waits (as the pool decides them: ``Permit.rate_limited``; outside the
            slot, within ``rate_limit_budget``).
        clock: where the waits are slept and ``deadline`` read.
        what: the call's name, in the log.
        tokens: the token of each try; a token the service refuses is told to it, and the
            try is sent once more if it has a new one (not one of ``max_retries``).
        redial: after a refusal no retry answers, the same try in another dialect, or
            ``None``; asked once, outside the slot (it may read the agent card).
        deadline: a time on ``clock``; a 429 whose wait would end after it is raised at
            once, since sleeping to the deadline could only end in a timeout.
        observer: hears of each slot, answer and retry (the call's span).
        events: the client's stream: each answer (``answered``) and each retry (a
            :class:`RetryEvent`: its delay and why) is told there.
        first: the first try's turn, already taken (see :meth:`Call.turn`): its permit,
            and when it was asked for.

    A 429 is told to the pool, which decides whether everyone pauses and how long this
    call waits (the call does not work out a wait of its own).
    """
    retries = limited = 0  # transient failures retried; 429s answered
    waited = 0.0  # seconds slept after 429s
    resent = redialed = False  # the one resend with a new token; the one in another dialect
    while True:
        refused: MagisteriumError | None = None
        # The pool's turn, taken and let go here rather than by ``pool.slot()``: thousands
        # of calls may wait at once, and each waits with one coroutine and object fewer.
        if first is not None:
            (permit, asked), first = first, None
        else:
            asked = clock.now()
            permit = await pool.acquire(priority, fairness_key)
        try:
            observer.admitted(permit.started - asked)
            token = None
            try:
                if tokens is not None:  # a refresh that fails is retried as the try would be
                    token = await tokens.token()
                result = await attempt(token)
            except RateLimitError as exc:
                _answered(observer, events, pool.name, permit.started, clock, exc)
                # The pool decides: its judge's verdict for everyone, and this call's wait.
                delay = permit.rate_limited(exc.retry_after, policy, limited)
                limited += 1
                waited += delay
                if waited > policy.rate_limit_budget or clock.now() + delay > deadline:
                    raise
                reason, message, number, told = "rate_limited", "", 0, exc.retry_after
            except AuthenticationError as exc:
                _answered(observer, events, pool.name, permit.started, clock, exc)
                if tokens is None or token is None or resent or not await tokens.rejected(token):
                    raise
                resent = True  # a new token is ready: resend once, with it, in a new slot
                continue
            except MagisteriumError as exc:
                _answered(observer, events, pool.name, permit.started, clock, exc)
                if isinstance(exc, APIConnectionError) and not exc.reached_server:
                    permit.not_sent()  # the try spent no quota: its start is given back
                if retries < policy.max_retries and is_transient(
                    exc, retry_timeouts=retry_timeouts
                ):
                    delay = policy.backoff(retries, jitter())
                    retries += 1
                    reason, message, number, told = error_type(exc), str(exc), retries, None
                elif redial is None or redialed:
                    raise
                else:
                    refused = exc
            else:
                _answered(observer, events, pool.name, permit.started, clock, None)
                return result
            if refused is None:
                permit.retried()
                retry = RetryEvent(
                    "retried", pool.name, clock.now(), delay,
                    what, reason, message, number, policy.max_retries, told,
                )  # fmt: skip
                observer.retried(retry)
                events(retry)
        finally:
            permit.release()
        if refused is not None:
            assert redial is not None
            redialed = True
            again = await redial(refused)
            if again is None:
                context = refused.__context__
                try:
                    raise refused
                finally:
                    # Raised outside its handler, where on 3.10 a pure-Python task's own
                    # handler of aiohttp's error (with the token in its repr) would attach
                    # it: the error keeps the context it had (see raise_alone).
                    refused.__context__ = context
            attempt = again
            continue
        await clock.sleep(delay)


def _answered(
    observer: CallObserver,
    events: OnEvent,
    pool: str,
    started: float,
    clock: Clock,
    error: BaseException | None,
) -> None:
    """A try that ``started`` in ``pool`` is over: the call's span and the stream hear of
    it (``answered``: how long it took)."""
    observer.answered(error)
    now = clock.now()
    events(PoolEvent("answered", pool, now, now - started))


def _expired(what: str, total: float) -> Callable[[], APITimeoutError]:
    def expired() -> APITimeoutError:
        return APITimeoutError(
            f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
            "over every attempt and wait"
        )

    return expired


class _Tries:
    """The tries of one call in ``dialect`` (encoded once: every try sends the same
    bytes), called with each try's token; :meth:`redial` gives the same call in the
    dialect the negotiation switches to after a refusal.

    One object rather than closures or partials: a call waiting for its slot holds it,
    and thousands may wait at once (each object more is one more for the cyclic GC).
    """

    __slots__ = (
        "dialect", "encoded", "method", "negotiation", "params", "skill_id", "timeout", "transport",
    )  # fmt: skip

    def __init__(
        self,
        negotiation: Negotiation,
        dialect: Dialect,
        method: str,
        params: Any,
        timeout: float,
        skill_id: str | None,
        transport: Transport,
    ) -> None:
        self.negotiation = negotiation
        self.dialect = dialect
        self.method = method
        self.params = params
        self.timeout = timeout
        self.skill_id = skill_id
        self.transport = transport
        self.encoded = encode_params(dialect.params(method, params))

    def __call__(self, token: str | None) -> Awaitable[Any]:
        return self.transport.rpc(
            self.method,
            self.encoded,
            token,
            timeout=self.timeout,
            skill_id=self.skill_id,
            dialect=self.dialect,
        )

    async def redial(self, error: MagisteriumError) -> _Tries | None:
        """The call in the dialect the negotiation switches to after ``error`` refused it
        in this one, or ``None``."""
        switched = await self.negotiation.switch_after(error, self.dialect)
        if switched is None:
            return None
        return _Tries(
            self.negotiation, switched, self.method, self.params,
            self.timeout, self.skill_id, self.transport,
        )  # fmt: skip


class Call:
    """One protocol call, made by :meth:`CallPath.call`: :meth:`send` sends it (its tries
    and their budgets, in one span); :meth:`turn` may first take its first turn in its
    pool's line, alone.

    Why the turn apart: thousands of calls may wait for the pool at once. A call the cache
    may share waits for its turn in its caller's own task, holding only this object and its
    request, and only then are its flight's task, its span and its tries made (each object
    a waiting call holds is one more for the cyclic GC to walk, again and again). The
    deadline (``RetryPolicy.total_timeout``) runs from the moment the turn is asked for.
    """

    __slots__ = (
        "_asked", "_begun", "_first", "_path", "cache", "dialect", "method", "options", "params",
        "policy", "pool", "skill_id", "timeout",
    )  # fmt: skip

    def __init__(
        self,
        path: CallPath,
        method: str,
        params: Any,
        pool: PoolName | None,
        timeout: float,
        policy: RetryPolicy,
        options: CallOptions,
        skill_id: str | None,
        cache: str | None,
        dialect: Dialect | None,
    ) -> None:
        self._path = path
        self.method = method
        self.params = params
        self.pool = pool
        self.timeout = timeout
        self.policy = policy
        self.options = options
        self.skill_id = skill_id
        self.cache = cache
        self.dialect = dialect
        # When the call began (clock time, and ns since the epoch for its span: _begin()),
        # and the turn turn() was given.
        self._asked: float | None = None
        self._begun: int | None = None
        self._first: Permit | None = None

    def _begin(self) -> float:
        """When the call began, on the client's clock: at its first wait (its deadline
        runs from then)."""
        if self._asked is None:
            self._asked, self._begun = self._path.clock.now(), time.time_ns()
        return self._asked

    async def turn(self) -> None:
        """Wait for the call's first turn in its pool's line (within the deadline) and
        keep it for :meth:`send`. The call begins here unless it began waiting earlier
        (:meth:`within_deadline`); its deadline runs even if it is sent later without
        this turn (for others who joined it)."""
        path, options = self._path, self.options
        waiting = path.scheduler.pool(self.pool).acquire(options.priority, options.fairness_key)
        try:
            self._first = await self.within_deadline(waiting)
        except BaseException as error:
            # Over before it was sent: its span and metrics say how, as a call's that
            # ends in its tries would.
            pool = self.pool or "unmetered"
            observer = path.telemetry.observe(
                self.method, pool, self.params, self.cache, self._begun
            )
            observer.finish(None, error)
            raise

    def within_deadline(self, waiting: Awaitable[T]) -> Awaitable[T]:
        """``waiting`` (the call's tries, its turn, or an identical call's answer here or
        in another process), within this call's own deadline (``RetryPolicy
        .total_timeout``), which runs from its first wait: :class:`APITimeoutError` when
        it ends first."""
        asked, total, clock = self._begin(), self.policy.total_timeout, self._path.clock
        if total is None:
            return waiting
        return within(clock, asked + total - clock.now(), waiting, _expired(self.method, total))

    def give_back(self) -> None:
        """A turn taken and never used (the call was cancelled before it sent) goes back
        to the pool: its start and its slot (nothing if it was used)."""
        if self._first is not None:
            self._first.give_back()

    async def send(self) -> Any:
        """Send the call (in the turn taken, if any): a Task, or a TaskPage for
        ``tasks/list``."""
        path, method, policy, options, pool = (
            self._path, self.method, self.policy, self.options, self.pool,
        )  # fmt: skip
        asked, total = self._begin(), policy.total_timeout
        deadline = math.inf if total is None else asked + total
        observer = path.telemetry.observe(
            method, pool or "unmetered", self.params, self.cache, self._begun
        )
        negotiation = path.negotiation
        used = self.dialect or negotiation.dialect
        tries = _Tries(
            negotiation, used, method, self.params, self.timeout, self.skill_id, path.transport,
        )  # fmt: skip
        first = None if self._first is None else (self._first, asked)
        tried = call_with_retries(
            tries,
            pool=path.scheduler.pool(pool),
            policy=policy,
            clock=path.clock,
            what=method,
            tokens=path.tokens,
            redial=tries.redial if negotiation.protocol == "auto" else None,
            priority=options.priority,
            fairness_key=options.fairness_key,
            retry_timeouts=pool != "expensive" or policy.retry_expensive_timeouts,
            deadline=deadline,
            observer=observer,
            events=path.events,
            first=first,
        )
        work = self.within_deadline(tried)
        if observer is NO_OBSERVER:  # nobody watches: no span to make current, or finish
            return await work
        with observer.current():
            try:
                result = await work
            except BaseException as error:
                observer.finish(None, error)
                raise
        observer.finish(result, None)
        return result


class CallPath:
    """The way down of one client's calls (shared by the views ``with_options`` makes,
    which pass their own policy, timeout and options with each call).

    Arguments:
        transport: sends each try.
        scheduler: whose pools' slots the tries take.
        clock: the client's.
        tokens: the token of each try (``None``: the transport's fixed one).
        telemetry: a span and metrics per call, when asked for.
        events: the client's stream (see :mod:`._events`).
        protocol: the dialect spoken (``"auto"``: the agent card's).
        extensions: URIs of A2A extensions every request asks for.
        card_timeout: seconds for each GET of the agent card.
        card_policy: how the agent card's GET is retried.
    """

    def __init__(
        self,
        transport: Transport,
        scheduler: Scheduler,
        clock: Clock,
        tokens: TokenSource | None,
        telemetry: Telemetry,
        *,
        events: OnEvent = unheard,
        protocol: ProtocolVersion = "0.3",
        extensions: Sequence[str] = (),
        card_timeout: float = 30.0,
        card_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.transport = transport
        self.scheduler = scheduler
        self.clock = clock
        self.tokens = tokens
        self.telemetry = telemetry
        self.events = events
        self._card_timeout = card_timeout
        self._card_policy = card_policy
        base_url = transport.base_url
        reader = CardReader(base_url, self._get_card, clock, self._know_agent)
        self.negotiation = Negotiation(protocol, base_url, reader, extensions=extensions)
        """The dialect calls are sent in, and the agent card that says which."""

    def _know_agent(self, card: Any) -> None:
        self.telemetry.know_agent(card.name, card.version)

    def call(
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
    ) -> Call:
        """One JSON-RPC call (``method`` named by its A2A 0.3 method), in ``dialect``
        (default: the negotiation's), to be sent by :meth:`Call.send`. ``cache``:
        ``"miss"`` for a call the cache policy covers (on its span)."""
        return Call(self, method, params, pool, timeout, policy, options, skill_id, cache, dialect)

    async def _get_card(self, url: str) -> Answer:
        """One GET of the agent card at ``url``, retried in the unmetered pool's slots,
        within the total deadline."""
        policy, what = self._card_policy, f"GET {url}"
        total = policy.total_timeout
        work = call_with_retries(
            functools.partial(get_card, self.transport, url, timeout=self._card_timeout),
            pool=self.scheduler.pool(None),
            policy=policy,
            clock=self.clock,
            what=what,
            deadline=math.inf if total is None else self.clock.now() + total,
            events=self.events,
        )
        if total is None:
            return await work
        return await within(self.clock, total, work, _expired(what, total))
