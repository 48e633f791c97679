"""``AsyncMagisterium``: the client users hold.

Flow, in one direction: public method → skill table (build the message, read the
artifact) → cache (an identical call in flight, a kept answer) → the call
(:class:`._call.Caller`: its tries in a pool's turns, its token, its dialect) → the
JSON-RPC client → decode. Every call is begun and ended on the client's event stream,
whose subscribers are the log, OpenTelemetry, the counters behind :attr:`stats` and the
application's ``on_event``. The client's life (unopened, opened in one event loop,
closed) is kept here too, shared with the views :meth:`~AsyncMagisterium.with_options`
makes.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import inspect
import math
import os
import threading
import weakref
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from magisterium_async import _harvest
from magisterium_async._auth import TokenCallable, TokenSource, resolve_token
from magisterium_async._cache import AnswerCache, CacheStats, open_store
from magisterium_async._call import Caller, within_total
from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUTS,
    NOT_GIVEN,
    CachePolicy,
    CallOptions,
    NotGiven,
    PoolName,
    Priority,
    ProtocolVersion,
    RateLimits,
    RetryPolicy,
    Timeouts,
    boolean,
    quota_from_env,
    whole_number,
)
from magisterium_async._errors import (
    ClientClosedError,
    MagisteriumError,
    masked_url,
)
from magisterium_async._events import (
    CallEvent,
    Counters,
    EventKind,
    EventLog,
    Events,
    PoolEvent,
)
from magisterium_async._harvest import (
    DEFAULT_CONCURRENCY,
    Acknowledge,
    Batch,
    Harvest,
    OnError,
)
from magisterium_async._http import (
    AiohttpTransport,
    HTTPTransport,
    JSONRPCClient,
    Proxies,
    endpoint,
    offered,
)
from magisterium_async._models import (
    AgentCard,
    Answer,
    Document,
    Lookup,
    Part,
    SearchResult,
    Task,
    TaskPage,
)
from magisterium_async._ratelimit import (
    PoolStats,
    Quota,
    Scheduler,
    SchedulerStats,
    SharedQuota,
)
from magisterium_async._skills import (
    ASK,
    DEFAULT_SKILL_ID,
    FETCH,
    LOOKUPS,
    MASS_READINGS,
    SAINTS,
    SEARCH,
    SKILLS,
    Skill,
    parts_from,
    read_result,
    require_text,
    send_params,
)
from magisterium_async._telemetry import Telemetry

IteratorT = TypeVar("IteratorT", bound="Batch[Any, Any] | Harvest")


def _lookup(skill_id: str) -> Callable[[AsyncMagisterium, str], Awaitable[Lookup]]:
    """The client method of a lookup of :data:`LOOKUPS`, documented by its row. The service
    states neither their artifacts' names nor their shapes, so each returns what came."""
    skill: Skill[str, Lookup] = next(s for s in LOOKUPS if s.id == skill_id)

    async def lookup(self: AsyncMagisterium, query: str) -> Lookup:
        found = read_result(skill, await self._send(skill, query))
        assert found is not None  # a lookup has no "nothing found" answer of its own
        return found

    lookup.__name__, lookup.__qualname__ = skill_id, f"AsyncMagisterium.{skill_id}"
    lookup.__doc__ = f"{skill.description}\n\nArguments:\n    query: {skill.about.lower()}"
    return lookup


class AsyncMagisterium:
    """An async client of the Magisterium A2A API.

    Use it as ``async with AsyncMagisterium() as client: ...``, or close it with
    :meth:`aclose`; a closed client cannot be reopened.

    Every option but ``token`` is keyword-only; each ``None`` falls back as
    ``docs/usage.md`` (Configuration) says.

    Args:
        token: The API token, or a callable (sync or async) returning it before each
            request. ``None``: ``$MAGISTERIUM_TOKEN``, else the stored sign-in.
        base_url: The A2A endpoint (``$MAGISTERIUM_BASE_URL``, else
            :data:`DEFAULT_BASE_URL`): ``https://``, or ``http://`` to a loopback host.
        rate_limits: The quota calls wait for rather than spend on 429s
            (``$MAGISTERIUM_QUOTA``, else :meth:`RateLimits.pro`).
        max_retries: Retries of a transient failure per call (default:
            ``retry_policy``'s, 2).
        timeout: Seconds per request: one number, or :class:`Timeouts` (30 s; 300 s for
            ``catholic_qa``).
        max_concurrency: Requests in flight at most, over all pools.
        retry_policy: Retries, 429 waits and a call's deadline
            (:data:`DEFAULT_RETRY_POLICY`).
        clock: Where time is read and waited (the loop's; ``testing.VirtualClock``).
        on_event: Called with every :class:`PoolEvent` (``docs/observability.md``).
        trace_configs: aiohttp tracing, passed to its session.
        shared_quota: A Redis URL or :class:`SharedQuota`: the quota shared with every
            process on the same account, on any host.
        credentials: Where ``magisterium-async login`` stored the sign-in: a path or a
            Redis URL (``$MAGISTERIUM_CREDENTIALS``, else the user's config directory).
        max_response_bytes: The largest answer read, decompressed (64 MiB); past it,
            :class:`ResponseTooLargeError`.
        transport: Replaces the network (``testing.MockTransport``, for unit tests).
        proxy: An ``http(s)://`` proxy URL every request goes through.
        trust_env: Without ``proxy``, whether ``HTTPS_PROXY``, ``HTTP_PROXY`` and
            ``NO_PROXY`` are used.
        tracer_provider: OpenTelemetry's (the global one by default): a span per call.
        meter_provider: OpenTelemetry's (the global one by default): the metrics.
        cache: Where answers are kept: ``"memory"``, a file's path or a Redis URL
            (``$MAGISTERIUM_CACHE``, else none; ``docs/caching.md``). A cache that fails
            is bypassed with one warning, never a failed call.
        cache_policy: What is kept for how long, and what is shared
            (:data:`DEFAULT_CACHE_POLICY`: ``catholic_qa`` neither).
        protocol: The A2A dialect: ``"auto"`` (0.3, and 1.0 where the agent card offers
            it, read only when needed), ``"0.3"`` or ``"1.0"``
            (``docs/protocol-versions.md``).
        extensions: URIs of A2A extensions asked for on every request.

    Raises:
        TypeError: An argument of the wrong type.
        ValueError: An argument out of range, or a ``base_url`` the token must not be
            sent to.
    """

    def __init__(
        self,
        token: str | TokenCallable | None = None,
        *,
        base_url: str | None = None,
        rate_limits: RateLimits | None = None,
        max_retries: int | None = None,
        timeout: float | Timeouts = DEFAULT_TIMEOUTS,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        retry_policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
        trace_configs: Sequence[aiohttp.TraceConfig] = (),
        shared_quota: SharedQuota | str | None = None,
        credentials: str | os.PathLike[str] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        transport: HTTPTransport | None = None,
        proxy: str | None = None,
        trust_env: bool = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        cache: str | os.PathLike[str] | None = None,
        cache_policy: CachePolicy | None = None,
        protocol: ProtocolVersion = "auto",
        extensions: Sequence[str] = (),
    ) -> None:
        whole_number("max_concurrency", max_concurrency)
        # The constructor's objects, checked before anything is made: a wrong one is a
        # TypeError naming it now, not an AttributeError at some later call.
        needs = (
            ("clock", clock, ("now", "sleep")),
            ("transport", transport, ("send", "aclose")),
            ("tracer_provider", tracer_provider, ("get_tracer",)),
            ("meter_provider", meter_provider, ("get_meter",)),
        )
        for name, value, methods in needs:
            if value is not None and not all(callable(getattr(value, m, None)) for m in methods):
                wanted = " and ".join(f"{m}()" for m in methods)
                raise TypeError(f"{name} must have {wanted}, not be {type(value).__name__}")
        if on_event is not None:
            if not callable(on_event):
                raise TypeError(f"on_event must be callable, not {type(on_event).__name__}")
            if inspect.iscoroutinefunction(on_event):
                # Called in the event loop as each event happens: an async one would never run.
                raise TypeError("on_event must be a plain function, not async def")
        if (
            isinstance(trace_configs, (str, bytes))
            or not isinstance(trace_configs, Sequence)
            or not all(isinstance(config, aiohttp.TraceConfig) for config in trace_configs)
        ):
            raise TypeError("trace_configs must be a sequence of aiohttp.TraceConfig")
        boolean("trust_env", trust_env)
        if isinstance(extensions, str) or not all(isinstance(e, str) for e in extensions):
            raise TypeError("extensions must be a sequence of URIs (str)")
        proxies = Proxies(proxy, trust_env=trust_env)
        self._max_response_bytes = whole_number("max_response_bytes", max_response_bytes)
        if rate_limits is not None and not isinstance(rate_limits, RateLimits):
            raise TypeError(f"rate_limits must be RateLimits, not {type(rate_limits).__name__}")
        self._base_url = endpoint(base_url)
        self._clock = clock or LoopClock()
        self._options = CallOptions().changed(
            timeout=timeout,
            retry_policy=retry_policy,
            max_retries=NOT_GIVEN if max_retries is None else max_retries,
            cache_policy=cache_policy,
            protocol=protocol,
        )
        keeping = self._options.cache
        # The client's one stream of events, and its subscribers: the log, OpenTelemetry
        # (a span per protocol call when a provider is set), the counters behind stats,
        # then the application.
        self._counters = Counters()
        telemetry = Telemetry(
            self.base_url, tracer_provider=tracer_provider, meter_provider=meter_provider
        )
        log = EventLog(quiet_waits=on_event is not None)
        heard = (log, telemetry, self._counters)
        events = Events(*heard) if on_event is None else Events(*heard, on_event)
        # Made before anything that holds a connection: a cache refused leaves nothing open.
        self._cache = AnswerCache(
            open_store(cache, keeping), keeping, self.base_url, emit=events, sleep=self._clock.sleep
        )
        self._token, self._tokens = resolve_token(
            token, credentials, base_url=self.base_url, clock=self._clock, events=events
        )
        self._rate_limits = rate_limits or quota_from_env() or RateLimits.pro()
        self._max_concurrency = max_concurrency
        self._shared_quota = None if shared_quota is None else SharedQuota.of(shared_quota)
        # Whose quota a shared one is (SharedQuota.account, when given, comes first).
        account: str | Callable[[], Awaitable[str]] | None = self._token
        if self._tokens is not None:
            account = self._tokens.identity or self._tokens.token
        self._scheduler = Scheduler(
            self._rate_limits,
            max_concurrency=max_concurrency,
            clock=self._clock,
            emit=events,
            shared=self._shared_quota,
            account=account,
        )
        http = transport or AiohttpTransport(
            max_concurrency=max_concurrency,
            connect_timeout=self.timeouts.connect,
            trace_configs=trace_configs,
            proxies=proxies,
        )
        rpc = JSONRPCClient(
            self.base_url,
            self._token,
            http,
            max_response_bytes=max_response_bytes,
            clock=self._clock,
        )
        self._proxy = None if proxy is None else masked_url(proxy)
        self._caller = Caller(
            rpc,
            self._scheduler,
            self._clock,
            self._tokens,
            events,
            protocol=protocol,
            extensions=extensions,
            card_options=self._options,
            on_card=lambda card: telemetry.know_agent(card.name, card.version),
        )
        # The client's life, shared with its views (each view's _root is this client).
        self._root = self
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # its first call's
        self._thread = ""
        # The batches and harvests made by this client or its views, stopped when it
        # closes: one left by a bare ``break`` would go on failing every call it makes.
        self._iterators: weakref.WeakSet[Batch[Any, Any] | Harvest] = weakref.WeakSet()

    def __repr__(self) -> str:
        proxy = f", proxy={self._proxy!r}" if self._proxy is not None else ""
        return f"AsyncMagisterium(base_url={self.base_url!r}, token='***'{proxy})"

    # Lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> AsyncMagisterium:
        self._check_not_closed()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_not_closed(self) -> None:
        if self._root._closed:
            raise ClientClosedError("the client is closed; create a new AsyncMagisterium")

    def _open(self) -> None:
        """Before each call: bind the client to the running loop on its first call.

        Raises:
            ClientClosedError: the client is closed, or its loop has ended (it then
                counts as closed).
            MagisteriumError: the call comes from another loop while the client's own
                has not ended (another thread): refused, the client left open for its loop.
        """
        root = self._root
        self._check_not_closed()
        loop = asyncio.get_running_loop()
        if root._loop is None:
            root._loop, root._thread = loop, threading.current_thread().name
        elif root._loop is not loop and not root._loop.is_closed():
            raise MagisteriumError(
                "a client is used from one event loop, the one of its first call: this "
                f"client's loop runs in thread {root._thread!r}, and this call came from "
                "another loop (another thread, or another asyncio.run()). The client stays "
                "open there. Give each thread its own AsyncMagisterium, or run the call in "
                "the client's loop: asyncio.run_coroutine_threadsafe(client.search(...), "
                "loop).result()"
            )
        elif root._loop is not loop:
            root._closed = True
            raise ClientClosedError(
                "the client was opened in another event loop, which has ended (an earlier "
                "asyncio.run()?); its connections ended with it. Create the client in the "
                "loop that uses it: `async with AsyncMagisterium() as client:` inside each "
                "asyncio.run()"
            )

    async def aclose(self) -> None:
        """Wake every waiting call with an error and close the HTTP session. Idempotent.

        On a view made by :meth:`with_options` it does nothing: the client it came from
        owns the connections."""
        if self._root is not self:
            return
        for iterator in list(self._iterators):  # each records what it delivered
            await iterator.abort(ClientClosedError("the client was closed while it ran"))
        self._closed = True
        await self._scheduler.aclose()
        await self._caller.rpc.aclose()
        await self._cache.aclose()
        if self._tokens is not None:
            await self._tokens.aclose()

    def with_options(
        self,
        *,
        timeout: float | Timeouts | NotGiven | None = NOT_GIVEN,
        max_retries: int | NotGiven | None = NOT_GIVEN,
        retry_policy: RetryPolicy | NotGiven | None = NOT_GIVEN,
        priority: Priority | NotGiven | None = NOT_GIVEN,
        fairness_key: str | NotGiven | None = NOT_GIVEN,
        cache_policy: CachePolicy | NotGiven | None = NOT_GIVEN,
        protocol: ProtocolVersion | NotGiven | None = NOT_GIVEN,
    ) -> AsyncMagisterium:
        """A client sharing this one's connections, quota pools, credentials, cache and
        lifetime, with these options changed (the OpenAI SDK's ``with_options``).

        One rule for every option: left out (``NOT_GIVEN``), it is this client's; ``None``
        takes the constructor's default back (``fairness_key=None``: no key). The quota, the
        connections and the token belong to the client that owns them. ``max_retries``
        applies to ``retry_policy`` (the one given here, else this client's). ``priority``
        (``"interactive"``, single calls' default; ``"bulk"``, the batches') and
        ``fairness_key`` (whom the calls serve, round-robin within a priority) place calls
        in their pool's line: ``docs/rate-limits.md``. ``protocol``: the A2A dialect of the
        view's calls. Closing this client closes every view; ``aclose()`` on a view closes
        nothing.
        """
        view = copy.copy(self)
        view._options = self._options.changed(
            timeout=timeout,
            max_retries=max_retries,
            retry_policy=retry_policy,
            priority=priority,
            fairness_key=fairness_key,
            cache_policy=cache_policy,
            protocol=protocol,
        )
        return view

    @property
    def base_url(self) -> str:
        """The service's A2A endpoint (read-only: make a new client to change it)."""
        return self._base_url

    @property
    def timeouts(self) -> Timeouts:
        """This client's timeouts, per pool (change them with :meth:`with_options`)."""
        return self._options.timeouts

    @property
    def retry_policy(self) -> RetryPolicy:
        """How this client's calls are retried (change it with :meth:`with_options`)."""
        return self._options.retry

    @property
    def max_concurrency(self) -> int:
        """Requests in flight at once, over all pools (read-only)."""
        return self._max_concurrency

    @property
    def shared_quota(self) -> SharedQuota | None:
        """Where the quota is shared with other processes (``None``: this process alone)."""
        return self._shared_quota

    @property
    def priority(self) -> Priority:
        """The priority of this client's single calls (see :meth:`with_options`)."""
        return self._options.priority

    @property
    def fairness_key(self) -> str | None:
        """The fairness key of this client's calls (see :meth:`with_options`)."""
        return self._options.fairness_key

    @property
    def rate_limits(self) -> RateLimits:
        """The quota the pools were built for (read-only: make a new client to change it)."""
        return self._rate_limits

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`aclose` has run."""
        return self._root._closed

    @property
    def max_response_bytes(self) -> int:
        """The largest answer this client reads, in bytes after decompression."""
        return self._max_response_bytes

    @property
    def stats(self) -> SchedulerStats:
        """Per-pool counters: requests sent, 429s, retries, seconds paused, current rate."""
        scheduler, counters, now = self._scheduler, self._counters, self._clock.now()

        def of(name: str, pool_name: PoolName | None) -> PoolStats:
            pool = scheduler.pool(pool_name)
            sent, limited, retries = counters.of(name)
            return PoolStats(
                name=name,
                sent=sent,
                rate_limited=limited,
                retries=retries,
                paused_seconds=counters.paused_seconds(name, now),
                current_rate=pool.rate,
                configured_rate=pool.configured,
                in_flight=pool.in_flight,
                waiting=pool.waiting,
                next_start_in=pool.next_start_in(),
            )

        return SchedulerStats(
            default=of("default", "default"),
            expensive=of("expensive", "expensive"),
            unmetered=of("unmetered", None),
            in_flight=scheduler.in_flight,
            max_concurrency=self._max_concurrency,
        )

    async def quota(self) -> Quota:
        """What is left of each metered pool's quota now, and when its next start is free.

        Sends nothing to the service and spends no quota. Without a shared quota it is
        this process's starts in the window and its pause; with one (``shared_quota=``)
        it is read from Redis: every process's starts, the shared rate and pause. When
        Redis does not answer, each pool falls back to this process's view, with
        ``shared=False``.

        Raises:
            ClientClosedError: the client is closed.
        """
        self._check_not_closed()
        return await self._scheduler.quota()

    @property
    def cache_stats(self) -> CacheStats:
        """Calls answered from the cache (``hits``), by an identical call in flight
        (``coalesced``) or by a request of their own (``misses``), and the answers the
        cache holds (``entries``; ``None`` without a cache, and for Redis)."""
        return self._cache.stats

    @property
    def cache_policy(self) -> CachePolicy:
        """What this client keeps and shares (see :class:`CachePolicy`)."""
        return self._options.cache

    # The skills --------------------------------------------------------------------

    async def ask(self, question: str, *, context_id: str | None = None) -> Answer:
        """Ask ``catholic_qa`` a question; the answer with its citations.

        Draws on the expensive pool and may take minutes.
        A call that times out is *not* retried unless ``RetryPolicy.retry_expensive_timeouts``
        is set: it may have run and spent the scarce expensive quota.
        """
        answer = read_result(ASK, await self._send(ASK, question, context_id))
        assert answer is not None  # catholic_qa has no "nothing found" answer
        return answer

    async def search(self, query: str) -> list[SearchResult]:
        """Semantic search over the documents; ``[]`` when nothing matches."""
        results = read_result(SEARCH, await self._send(SEARCH, query))
        return results if results is not None else []

    async def fetch(self, document_id: str) -> Document | None:
        """One document's content and metadata; ``None`` when it is not found."""
        return read_result(FETCH, await self._send(FETCH, document_id))

    async def mass_readings(self, when: str | dt.date = "today") -> str | None:
        """The Mass readings for ``when`` (``"today"``, ``"next Sunday"``, ..., or a date,
        sent as its ISO text), or ``None``."""
        return read_result(MASS_READINGS, await self._send(MASS_READINGS, when))

    async def saints(self, when: str | dt.date = "today") -> str | None:
        """The Roman Martyrology entry for ``when`` (a date, or a text query), or ``None``."""
        return read_result(SAINTS, await self._send(SAINTS, when))

    # The lookups, one method per row of LOOKUPS named by its skill id.
    saint_lookup = _lookup("saint_lookup")
    person_lookup = _lookup("person_lookup")
    pope_lookup = _lookup("pope_lookup")
    diocese_lookup = _lookup("diocese_lookup")
    diocese_statistics_lookup = _lookup("diocese_statistics_lookup")

    def _send(
        self, skill: Skill[Any, Any], argument: Any, context_id: str | None = None
    ) -> Awaitable[Task]:
        """The message to ``skill`` (its argument checked at once, before anything)."""
        params = send_params(skill.build(argument), skill.id, context_id)
        return self._call("message/send", params, skill.pool, skill.id)

    # Protocol level ----------------------------------------------------------------

    async def send_message(
        self,
        parts: str | Part | Sequence[str | Part],
        *,
        skill_id: str | None = None,
        context_id: str | None = None,
    ) -> Task:
        """Send one user message to any skill and return the Task as the service sent it.

        ``parts`` is a string, one part, or a sequence of them. ``skill_id`` may be any id
        the service knows (``None``: the service's default, ``catholic_qa``). A ``failed``
        task is returned, not raised.
        """
        if skill_id is not None:
            require_text("skill_id", skill_id)
        params = send_params(parts_from(parts), skill_id, context_id)
        named = skill_id or DEFAULT_SKILL_ID
        # A skill the table does not know draws on the default pool, as all but
        # catholic_qa do.
        pool: PoolName = SKILLS[named].pool if named in SKILLS else "default"
        task: Task = await self._call("message/send", params, pool, named)
        return task

    async def get_task(self, task_id: str) -> Task:
        """A task by id (kept by the service for 24 hours); spends no quota."""
        params = {"id": require_text("task_id", task_id)}
        task: Task = await self._call("tasks/get", params, None)
        return task

    async def cancel_task(self, task_id: str) -> Task:
        """Ask to cancel a task; spends no quota.

        Every task of the service is finished by the time it is returned, so this raises
        :class:`InvalidParamsError` ("Invalid state transition") in practice.
        """
        params = {"id": require_text("task_id", task_id)}
        task: Task = await self._call("tasks/cancel", params, None)
        return task

    @property
    def token_source(self) -> TokenSource | None:
        """Where the token comes from when it may change (a callable, stored credentials);
        ``None`` for a fixed token."""
        return self._tokens

    async def list_tasks(
        self,
        *,
        context_id: str | None = None,
        state: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        history_length: int | None = None,
        include_artifacts: bool = False,
        updated_after: str | None = None,
    ) -> TaskPage:
        """One page of this user's tasks, newest first (A2A 1.0's ``ListTasks``); spends
        no quota.

        Arguments (each narrows or shapes the page; ``None``: the server's default):

        - ``context_id``: only the tasks of this conversation;
        - ``state``: only the tasks in this state (``"completed"``, ``TaskState.FAILED``);
        - ``page_size``: how many tasks (the server caps it; a2a-sdk: 100);
        - ``page_token``: the page after the one whose ``next_page_token`` this is;
        - ``history_length``: keep only the last so many messages of each history;
        - ``include_artifacts``: send the artifacts too (left out by default);
        - ``updated_after``: only tasks whose status changed at or after this RFC 3339
          time (``"2026-03-19T00:00:00Z"``).

        Raises :class:`NotSupportedError` where the server does not offer it: its agent
        card names no A2A 1.0 JSON-RPC interface (the service's today), or ``protocol``
        is ``"0.3"``. With ``"auto"`` the card is read for this, once.
        """
        params: dict[str, Any] = {}
        if context_id is not None:
            params["contextId"] = require_text("context_id", context_id)
        if state is not None:
            params["status"] = "TASK_STATE_" + require_text("state", state).upper().replace(
                "-", "_"
            )
        if page_size is not None:
            params["pageSize"] = whole_number("page_size", page_size)
        if page_token is not None:
            params["pageToken"] = require_text("page_token", page_token)
        if history_length is not None:
            params["historyLength"] = whole_number("history_length", history_length, minimum=0)
        if include_artifacts:
            params["includeArtifacts"] = True
        if updated_after is not None:
            params["statusTimestampAfter"] = require_text("updated_after", updated_after)
        page: TaskPage = await self._call("tasks/list", params, None)
        return page

    @property
    def protocol(self) -> str:
        """The A2A version the client speaks now: ``"0.3"`` (the service's dialect) or
        ``"1.0"``; with ``protocol="auto"`` it changes once an agent card offers 1.0."""
        return self._caller.dialect(self._options.protocol).version

    async def _call(
        self,
        method: str,
        params: Any,
        pool: PoolName | None,
        skill_id: str | None = None,
    ) -> Any:
        """One protocol call, begun and ended on the client's stream, bounded as a whole
        by ``RetryPolicy.total_timeout``. A message to a skill the cache policy covers may
        be answered by an identical call in flight or a kept answer; else it sends."""
        self._open()  # before the pool: a dead loop's client fails clearly
        options, caller, clock = self._options, self._caller, self._clock
        emit, named = caller.events, pool or "unmetered"
        started = clock.now()
        emit(CallEvent("call_started", named, started, 0.0, method, params))
        total = options.retry.total_timeout
        deadline = math.inf if total is None else started + total
        result: Any = None
        error: BaseException | None = None
        cached = None
        try:
            work = caller.call(method, params, pool, options, skill_id=skill_id, deadline=deadline)
            # A skill id comes with a message (SendParams) alone.
            if skill_id is None or not self._cache.covers(skill_id, options.cache):
                result = await within_total(clock, total, work, method)
                return result
            message = params.message
            answer = self._cache.answer(
                skill_id, message.parts, message.context_id, work, options.cache
            )
            # The cache's: the task, and how it was answered.
            result, cached = await within_total(clock, total, answer, method)
            if cached != "miss":
                kind: EventKind = "cache_hit" if cached == "hit" else "coalesced"
                emit(PoolEvent(kind, named, clock.now(), 0.0))
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            now = clock.now()
            emit(
                CallEvent(
                    "call_ended", named, now, now - started, method, params, cached, result, error
                )
            )

    # Batch -------------------------------------------------------------------------

    def search_many(
        self,
        queries: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        ordered: bool = False,
        priority: Priority = "bulk",
    ) -> Batch[str, list[SearchResult]]:
        """Search every query; yield a :class:`BatchItem` per query as it completes.

        ``async for item in client.search_many(queries):`` — ``item.input``, ``item.result``
        (the ``list[SearchResult]``) and ``item.error`` (the exception, or ``None``). Inputs
        are read lazily, ``concurrency`` searches at most in flight; one failure never stops
        the others; ``ordered=True`` yields in input order. The rate-limit pools pace it all;
        its calls are ``priority="bulk"`` unless you say otherwise (see :meth:`with_options`).
        ``ClientClosedError`` if the client is closed.
        """
        self._check_not_closed()
        client = self.with_options(priority=priority)
        return self._tracked(
            _harvest.search_many(client, queries, concurrency=concurrency, ordered=ordered)
        )

    def fetch_many(
        self,
        ids: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        ordered: bool = False,
        priority: Priority = "bulk",
    ) -> Batch[str, Document | None]:
        """Fetch every id; yield a :class:`BatchItem` per id as it completes (as
        :meth:`search_many`, bulk by default; ``item.result`` is ``None`` for a document
        not found)."""
        self._check_not_closed()
        client = self.with_options(priority=priority)
        return self._tracked(
            _harvest.fetch_many(client, ids, concurrency=concurrency, ordered=ordered)
        )

    def harvest(
        self,
        queries: Iterable[str] | AsyncIterable[str],
        *,
        state: str | os.PathLike[str] | None = None,
        on_error: OnError = "record",
        concurrency: int = DEFAULT_CONCURRENCY,
        acknowledge: Acknowledge = "auto",
        priority: Priority = "bulk",
    ) -> Harvest:
        """Search every query and yield every document found, each fetched once.

        ``state`` is the path of the harvest's sqlite state: harvesting again with the same
        path resumes, sending no request whose answer was recorded. ``.stats`` counts
        queries, results, unique ids, fetched, ``not_found``, ``failed`` and 429s;
        ``.failures`` lists what failed after retries (``on_error="raise"`` raises the first
        instead). See :class:`Harvest` for what a resumed harvest yields. Its calls are
        ``priority="bulk"`` unless you say otherwise (see :meth:`with_options`).
        ``ClientClosedError`` if the client is closed.
        """
        self._check_not_closed()
        return self._tracked(
            _harvest.harvest(
                self.with_options(priority=priority),
                queries,
                state=state,
                on_error=on_error,
                concurrency=concurrency,
                acknowledge=acknowledge,
                clock=self._clock,
            )
        )

    def _tracked(self, iterator: IteratorT) -> IteratorT:
        self._iterators.add(iterator)
        return iterator

    # Discovery ---------------------------------------------------------------------

    @property
    def agent_card_url(self) -> str:
        """Where the agent card lives: the URL that answered, else the first tried at the
        base URL's origin: ``/.well-known/agent.json`` (``/.well-known/agent-card.json``
        after a 404), or ``agent-card.json`` first with ``protocol="1.0"``."""
        return self._caller.card.url

    async def agent_card(self) -> AgentCard:
        """The service's A2A agent card, decoded; spends no quota.

        Read from ``/.well-known/agent.json``; where that is a 404, from A2A 0.3's
        ``/.well-known/agent-card.json`` (with ``protocol="1.0"`` the other way round; the
        URL that answered is used from then on).
        Cached for the client's life, or for the ``max-age`` of the response's
        ``Cache-Control`` when it gives one.
        """
        self._open()
        return await self._caller.read_card(self._options.protocol)

    async def card_protocol(self) -> str:
        """The A2A version the agent card offers: ``"1.0"`` where it names an A2A 1.0
        JSON-RPC interface, else ``"0.3"`` (the service's own card, 0.2.6, is this
        dialect). Reads the card (cached; no quota)."""
        return offered(await self.agent_card(), self.base_url, self._caller.events).version
