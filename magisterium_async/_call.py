"""One call, from the client down to the wire: its tries, its token, its dialect, its waits.

:class:`Caller` holds what every call of one client shares (the JSON-RPC client, the
pools, the clock, the token source, the event stream, the dialect spoken) and makes each
call with :meth:`Caller.call`. Its tries go through :meth:`Caller.tries`, the one loop
every request goes through (the agent card's GET too), read top to bottom:

1. the pool's turn (``pool.acquire``: priority and fairness key place it in the line);
2. the send, with the token of the moment;
3. a token the service refused: one refresh, and one resend with the new token (not one of
   ``RetryPolicy.max_retries``);
4. a transient failure (connection, timeout, 5xx, -32603): up to ``max_retries`` tries
   more, each after a backoff outside the pool's turn;
5. a 429: the wait the engine says (``Permit.rate_limited``, decided once, there), within
   ``RetryPolicy.rate_limit_budget`` seconds of such waits and the call's deadline; a 429
   spends no retry;
6. the deadline (``RetryPolicy.total_timeout``): the client bounds the whole call by it;
   here a 429 whose wait would end after it is raised at once.

Around the loop, :meth:`Caller.call` sends the call once more in the other dialect after
a refusal that may be the dialect's ("method not found", "version not supported"), when
the agent card offers one (see :class:`._http._card.Negotiation`).

The client builds requests and reads answers; the engine decides when a try may go; the
JSON-RPC client sends it. Nothing here calls back up.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from magisterium_async._auth._tokens import TokenSource
from magisterium_async._clock import Clock, within
from magisterium_async._config import CallOptions, PoolName
from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    MagisteriumError,
    MethodNotFoundError,
    RateLimitError,
    VersionNotSupportedError,
    is_transient,
)
from magisterium_async._events import AnswerEvent, OnEvent, RetryEvent, error_type
from magisterium_async._http._card import CardReader, Negotiation, get_card
from magisterium_async._http._dialect import Dialect, ProtocolVersion
from magisterium_async._http._jsonrpc import JSONRPCClient, encode_params
from magisterium_async._models import AgentCard
from magisterium_async._ratelimit import Permit, Scheduler

__all__ = ["Attempt", "Caller", "expired"]

T = TypeVar("T")

Attempt = Callable[[str | None], Awaitable[T]]
"""One try, given the token to send (``None``: none; the JSON-RPC client's own)."""


def expired(what: str, total: float) -> APITimeoutError:
    """The error of a call whose total deadline passed."""
    return APITimeoutError(
        f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
        "over every attempt and wait"
    )


class Caller:
    """What every call of one client goes through (shared by the views ``with_options``
    makes, each call bringing its own :class:`CallOptions`).

    Arguments:
        rpc: sends each try.
        scheduler: whose pools' turns the tries take.
        clock: the client's.
        tokens: the token of each try (``None``: the JSON-RPC client's fixed one).
        events: the client's stream: each answer and retry is told there.
        protocol: the dialect the client speaks (``"auto"``: the agent card's).
        extensions: URIs of A2A extensions every request asks for.
        card_options: how the agent card's GET is timed and retried.
        on_card: told of each agent card read.
    """

    def __init__(
        self,
        rpc: JSONRPCClient,
        scheduler: Scheduler,
        clock: Clock,
        tokens: TokenSource | None,
        events: OnEvent,
        *,
        protocol: ProtocolVersion,
        extensions: Sequence[str],
        card_options: CallOptions,
        on_card: Callable[[AgentCard], None],
    ) -> None:
        self.rpc = rpc
        self.scheduler = scheduler
        self.clock = clock
        self.tokens = tokens
        self.events = events
        self._card_options = card_options
        reader = CardReader(rpc.base_url, self._get_card, clock, on_card)
        own = Negotiation(protocol, rpc.base_url, reader, extensions=extensions, emit=events)
        self._negotiations = {protocol: own}
        self.protocol = protocol
        """The client's own dialect (a view may speak another: :meth:`negotiation`)."""

    def __repr__(self) -> str:
        return f"<Caller {self.rpc.base_url}>"

    def negotiation(self, protocol: ProtocolVersion) -> Negotiation:
        """The dialect spoken by calls of ``protocol``, and the agent card that says which
        (the client's own; another protocol's shares its card)."""
        found = self._negotiations.get(protocol)
        if found is None:
            own = self._negotiations[self.protocol]
            found = self._negotiations[protocol] = own.with_protocol(protocol)
        return found

    async def call(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        options: CallOptions,
        *,
        skill_id: str | None = None,
        dialect: Dialect | None = None,
        deadline: float = math.inf,
    ) -> Any:
        """One JSON-RPC call: its tries (:meth:`tries`), and once more in the dialect the
        agent card offers after a refusal that may be the dialect's.

        Arguments:
            method: the operation, named by its A2A 0.3 method (``message/send``,
                ``tasks/get``, ``tasks/cancel``, ``tasks/list``).
            params: its params, as built for 0.3 (the dialect translates them).
            pool: the pool its tries draw on (``None``: the unmetered one).
            options: the call's options.
            skill_id: the skill a ``message/send`` names (its errors name it).
            dialect: the dialect to speak (default: the negotiation's).
            deadline: when the call must be over, on the client's clock.
        """
        negotiation = self.negotiation(options.protocol)
        spoken = dialect or negotiation.dialect
        attempt = self._post(method, params, pool, spoken, options, skill_id)
        try:
            return await self.tries(method, pool, options, attempt, deadline)
        except (MethodNotFoundError, VersionNotSupportedError) as refused:
            switched = await negotiation.switch_after(refused, spoken)
            if switched is None:
                raise
        attempt = self._post(method, params, pool, switched, options, skill_id)
        return await self.tries(method, pool, options, attempt, deadline)

    def _post(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        dialect: Dialect,
        options: CallOptions,
        skill_id: str | None,
    ) -> Attempt[Any]:
        """The tries of one call in ``dialect``: every try sends the same bytes."""
        body = encode_params(dialect.params(method, params))
        timeout, rpc = options.timeouts.for_pool(pool), self.rpc

        def attempt(token: str | None) -> Awaitable[Any]:
            return rpc.rpc(method, body, token, timeout=timeout, skill_id=skill_id, dialect=dialect)

        return attempt

    async def tries(
        self,
        what: str,
        pool_name: PoolName | None,
        options: CallOptions,
        attempt: Attempt[T],
        deadline: float = math.inf,
        *,
        signed: bool = True,
    ) -> T:
        """``attempt`` in turns of ``pool_name``'s pool until it succeeds or may not be
        tried again (the steps in this module's docstring); ``what`` names it in the
        events; ``signed``: each try is handed the token of the moment."""
        pool = self.scheduler.pool(pool_name)
        policy, clock, emit = options.retry, self.clock, self.events
        tokens = self.tokens if signed else None
        retry_timeouts = pool_name != "expensive" or policy.retry_expensive_timeouts
        retries = limited = 0  # transient failures retried; 429s answered
        waited = 0.0  # seconds slept after 429s
        resent = False  # the one resend with a new token
        while True:
            permit = await pool.acquire(options.priority, options.fairness_key)
            token, sent = None, False
            try:
                if tokens is not None:  # a refresh that fails is retried as the try would be
                    token = await tokens.token()
                sent = True
                result = await attempt(token)
            except RateLimitError as exc:
                told = exc.retry_after
                self._answered(pool.name, permit, what, "rate_limited", told)
                delay = permit.rate_limited(policy.rate_limit_wait(told, limited))
                limited += 1
                waited += delay
                if waited > policy.rate_limit_budget or clock.now() + delay > deadline:
                    raise
                reason, message, number = "rate_limited", "", 0
            except AuthenticationError:
                self._answered(pool.name, permit, what, "error")
                if tokens is None or token is None or resent or not await tokens.rejected(token):
                    raise
                resent = True  # a new token is ready: resend once, with it, in a new turn
                continue
            except MagisteriumError as exc:
                self._answered(pool.name, permit, what, "error")
                if isinstance(exc, APIConnectionError) and not exc.reached_server:
                    sent = False  # the try spent no quota: its start is given back
                if retries >= policy.max_retries or not is_transient(
                    exc, retry_timeouts=retry_timeouts
                ):
                    raise
                delay = policy.backoff(retries, random.random())
                retries += 1
                told, reason, message, number = None, error_type(exc), str(exc), retries
            else:
                self._answered(pool.name, permit, what, "ok")
                return result
            finally:
                permit.release(sent=sent)
            emit(
                RetryEvent(
                    "retried",
                    pool.name,
                    clock.now(),
                    delay,
                    what,
                    reason,
                    message,
                    number,
                    policy.max_retries,
                    told,
                )
            )
            await clock.sleep(delay)

    def _answered(
        self,
        pool: str,
        permit: Permit,
        what: str,
        outcome: Literal["ok", "rate_limited", "error"],
        told: float | None = None,
    ) -> None:
        """A try that ``permit`` let through in ``pool`` is over: the stream hears how,
        and how long it took."""
        now = self.clock.now()
        self.events(AnswerEvent("answered", pool, now, now - permit.started, what, outcome, told))

    async def _get_card(self, url: str) -> tuple[int, Mapping[str, str], bytes]:
        """One GET of the agent card at ``url``, tried in the unmetered pool's turns,
        within the card's total deadline."""
        options, what = self._card_options, f"GET {url}"
        total, timeout = options.retry.total_timeout, options.timeouts.default

        def attempt(token: str | None) -> Awaitable[tuple[int, Mapping[str, str], bytes]]:
            return get_card(self.rpc, url, timeout=timeout)

        if total is None:
            return await self.tries(what, None, options, attempt, signed=False)
        work = self.tries(what, None, options, attempt, self.clock.now() + total, signed=False)
        return await within(self.clock, total, work, lambda: expired(what, total))
