"""One call, from the client down to the wire: its tries, its token, its dialect, its waits.

:class:`Caller` holds what every call of one client shares (the JSON-RPC client, the
pools, the clock, the token source, the event stream, the dialects spoken) and makes each
call with :meth:`Caller.call`: the one loop every request goes through (the agent card's
GET too), read top to bottom:

1. the pool's turn (``pool.acquire``: priority and fairness key place it in the line);
2. the send, with the token of the moment;
3. a 429: the wait the engine says (``Permit.rate_limited``, decided once, there), within
   ``RetryPolicy.rate_limit_budget`` seconds of such waits and the call's deadline; a 429
   spends no retry;
4. a token the service refused: one refresh, and one resend with the new token (not one of
   ``RetryPolicy.max_retries``);
5. a transient failure (connection, timeout, 5xx, -32603): up to ``max_retries`` tries
   more, each after a backoff outside the pool's turn;
6. a refusal that may be the dialect's ("method not found", "version not supported"):
   with ``protocol="auto"``, once more in the dialect the agent card offers, if it offers
   another (the card is read only then, or when asked for: today's service costs no
   request more);
7. the deadline (``RetryPolicy.total_timeout``): the client bounds the whole call by it;
   here a 429 whose wait would end after it is raised at once.

The client builds requests and reads answers; the engine decides when a try may go; the
JSON-RPC client sends it. Nothing here calls back up.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

from magisterium_async._auth import TokenSource
from magisterium_async._clock import Clock, within
from magisterium_async._config import CallOptions, PoolName, ProtocolVersion
from magisterium_async._errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    MagisteriumError,
    MethodNotFoundError,
    NotSupportedError,
    RateLimitError,
    VersionNotSupportedError,
    is_transient,
)
from magisterium_async._events import AnswerEvent, OnEvent, RetryEvent, error_type, notice
from magisterium_async._http import (
    V03,
    V10,
    CardReader,
    Dialect,
    JSONRPCClient,
    offered,
    raise_alone,
)
from magisterium_async._models import AgentCard
from magisterium_async._ratelimit import Scheduler

GET = "GET"
"""The method of the agent card's GET (the one call that is not JSON-RPC)."""
_DIALECT_REFUSALS = (MethodNotFoundError, VersionNotSupportedError)
_Outcome = Literal["ok", "rate_limited", "error"]
T = TypeVar("T")


def within_total(clock: Clock, total: float | None, work: Awaitable[T], what: str) -> Awaitable[T]:
    """``work`` bounded by a call's ``RetryPolicy.total_timeout`` (``None``: unbounded),
    over every attempt and wait: :class:`APITimeoutError` naming ``what`` when it ends."""
    if total is None:
        return work

    def expired() -> APITimeoutError:
        return APITimeoutError(
            f"{what}: no answer within RetryPolicy.total_timeout ({total:g} s), "
            "over every attempt and wait"
        )

    return within(clock, total, work, expired)


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
        self.card = CardReader(rpc.base_url, self._get_card, clock, on_card, protocol)
        self._card_options = card_options
        self._extensions = tuple(extensions)
        # The dialect calls of each protocol speak: "auto" today's until a card offers 1.0.
        self._dialects: dict[ProtocolVersion, Dialect] = {
            "auto": replace(V03, extensions=self._extensions),
            "0.3": replace(V03, extensions=self._extensions),
            "1.0": replace(V10, extensions=self._extensions),
        }

    def dialect(self, protocol: ProtocolVersion) -> Dialect:
        """The dialect calls of ``protocol`` speak now."""
        return self._dialects[protocol]

    async def read_card(self, protocol: ProtocolVersion) -> AgentCard:
        """The agent card (the kept one while it is fresh); read for ``"auto"``, the
        dialect it offers is spoken from now on."""
        card = await self.card.read()
        if protocol == "auto":
            offers = offered(card, self.rpc.base_url, self.events)
            offers = replace(offers, extensions=self._extensions)
            if offers != self._dialects["auto"]:
                said = f"agent card offers A2A {offers.version}: speaking it"
                self.events(notice("info", "transport", said))
            self._dialects["auto"] = offers
        return card

    async def call(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        options: CallOptions,
        *,
        skill_id: str | None = None,
        deadline: float = math.inf,
    ) -> Any:
        """One call, its tries in turns of its pool until it succeeds or may not be tried
        again (the steps in this module's docstring).

        Arguments:
            method: the operation, named by its A2A 0.3 method (``message/send``,
                ``tasks/get``, ``tasks/cancel``, ``tasks/list``), or :data:`GET` for the
                agent card (``params``: its URL; no token, no dialect).
            params: its params, as built for 0.3 (the dialect translates them).
            pool: the pool its tries draw on (``None``: the unmetered one).
            options: the call's options.
            skill_id: the skill a ``message/send`` names (its errors name it).
            deadline: when the call must be over, on the client's clock.
        """
        dialect = self._dialects[options.protocol]
        if method == "tasks/list" and dialect.version != "1.0":  # ListTasks is 1.0's alone
            dialect = await self._offered(options.protocol, dialect) or dialect
            if dialect.version != "1.0":
                why = "its agent card names no A2A 1.0 JSON-RPC interface"
                if options.protocol != "auto":
                    why = f'protocol="{options.protocol}" was named'
                raise NotSupportedError(
                    f"list_tasks: the server at {self.rpc.base_url} does not offer ListTasks "
                    f"(A2A 1.0's): {why}"
                )
        card = method == GET
        what = f"GET {params}" if card else method
        tokens = None if card else self.tokens
        turns = self.scheduler.pool(pool)
        timeout, policy = options.timeouts.for_pool(pool), options.retry
        clock, emit, most = self.clock, self.events, options.retry.max_retries
        retry_timeouts = pool != "expensive" or policy.retry_expensive_timeouts
        retries = limited = 0  # transient failures retried; 429s answered
        waited = 0.0  # seconds slept after 429s
        resent = switched = False  # the one resend with a new token; the one switch of dialect

        def answered(outcome: _Outcome, told: float | None = None) -> None:
            """The try ``permit`` let through is over: the stream hears how, and how long
            it took."""
            now = clock.now()
            emit(
                AnswerEvent("answered", turns.name, now, now - permit.started, what, outcome, told)
            )

        while True:
            permit = await turns.acquire(options.priority, options.fairness_key)
            token, sent, refused = None, False, None
            try:
                if tokens is not None:  # a refresh that fails is retried as the try would be
                    token = await tokens.token()
                sent = True
                if card:
                    result = await self.rpc.get(params, timeout=timeout)
                else:
                    result = await self.rpc.rpc(
                        method, params, token, timeout=timeout, skill_id=skill_id, dialect=dialect
                    )
            except RateLimitError as exc:
                told = exc.retry_after
                answered("rate_limited", told)
                delay = permit.rate_limited(policy.rate_limit_wait(told, limited))
                limited += 1
                waited += delay
                if waited > policy.rate_limit_budget or clock.now() + delay > deadline:
                    raise
                # The retry's reason, message, number, the most there may be, and the wait
                # the service asked for (RetryEvent's fields).
                retry = ("rate_limited", "", 0, most, told)
            except AuthenticationError:
                answered("error")
                if tokens is None or token is None or resent or not await tokens.rejected(token):
                    raise
                resent = True  # a new token is ready: resend once, with it, in a new turn
                continue
            except MagisteriumError as exc:
                answered("error")
                if isinstance(exc, APIConnectionError) and not exc.reached_server:
                    sent = False  # the try spent no quota: its start is given back
                if retries < most and is_transient(exc, retry_timeouts=retry_timeouts):
                    delay = policy.backoff(retries, random.random())
                    retries += 1
                    retry = (error_type(exc), str(exc), retries, most, None)
                elif switched or not isinstance(exc, _DIALECT_REFUSALS):
                    raise
                else:
                    refused = exc
            else:
                answered("ok")
                return result
            finally:
                permit.release(sent=sent)
            if refused is not None:
                # A refusal that may be the dialect's: once more in the one the agent card
                # offers (read outside the turn), at once, or the refusal stands.
                switched = True
                spoken = await self._offered(options.protocol, dialect, refused)
                if spoken is None:
                    raise_alone(refused)  # outside its handler: no aiohttp error attached
                dialect = spoken
                continue
            emit(RetryEvent("retried", turns.name, clock.now(), delay, what, *retry))
            await clock.sleep(delay)

    async def _offered(
        self, protocol: ProtocolVersion, used: Dialect, refused: MagisteriumError | None = None
    ) -> Dialect | None:
        """With ``"auto"``, the dialect the agent card (the kept one while it is fresh)
        offers, if not ``used``; else ``None``. A card that cannot be read raises, but
        after a ``refused`` call: then it is told, and the refusal stands."""
        if protocol != "auto":
            return None
        try:
            await self.read_card(protocol)
        except MagisteriumError as exc:
            if refused is None:
                raise
            said = f"agent card not read after {type(refused).__name__}: {exc}"
            self.events(notice("info", "transport", said))
            return None
        spoken = self._dialects[protocol]
        return spoken if spoken != used else None

    async def _get_card(self, url: str) -> tuple[int, Mapping[str, str], bytes]:
        """One GET of the agent card at ``url``, tried in the unmetered pool's turns,
        within the card's total deadline."""
        options = self._card_options
        total = options.retry.total_timeout
        deadline = math.inf if total is None else self.clock.now() + total
        work = self.call(GET, url, None, options, deadline=deadline)
        answer: tuple[int, Mapping[str, str], bytes] = await within_total(
            self.clock, total, work, f"GET {url}"
        )
        return answer
