"""Rate-limit pools shared by every process on one token, through Redis.

```AsyncMagisterium(shared_quota=SharedQuota("redis://host:6379/0"))``: each metered pool
(``default``, ``expensive``) keeps its sliding log, what its rate rule learned and its
waiting line's heads in Redis (``_scripts.py`` has the key layout), so every client on that
token draws on one quota and acts at once on what any of them learns:

- **Admission.** One Lua script, run atomically on the server, admits a start only if the
  shared log allows it (never more than N starts in a window, all processes together;
  lowered, the learned rate evenly spaced), the pool is not paused, and the free starts
  are not held for calls in other processes: interactive calls before bulk ones, and
  within a priority round-robin over processes per call waiting (each process's share of
  the span's starts, up to the calls it has waiting, is held for it until it asks).
  While an ask that contends (an interactive call first in its line, or calls with a
  fairness key) came lately from any process, or the shared log's run of starts has
  lasted a few windows, bulk starts are paced there, one quota interval apart, as a local
  pool paces them (``RateRule.paced_start``).
- **Learning.** Each process's judge reads its own 429s; a verdict is applied by the same
  pure rate rule as a local pool's, to the shared log and the shared rule state, and
  written back only if nobody wrote meanwhile (a version). A proven window sets a pause
  every process waits out, and is learned once, however many processes proved it.
- **Stepping up** toward the configured rate is done by one process at a time: the
  admission script hands a lease to the first that finds a step up due.

Time: with the default clock the log is timed by Redis's own clock (``TIME``), the one
every process on every host agrees on. With any other clock (``VirtualClock`` in tests)
every client sharing one Redis must share that clock too.

When Redis fails (every call is bounded by ``timeout``; connection refused, timeout, any
Redis error) the client does not hang and does not stampede: it logs a WARNING and falls
back to a local limit of ``limit / max(workers, clients seen lately)`` per period, starting
only once a full window has passed since the failure (the starts others made through
Redis just before may still be in the server's window); what it learned stays as it was.
It tries Redis every ``retry_interval`` seconds and rejoins when it answers, adding the
starts it made alone to the shared log. If the state was lost meanwhile (a new epoch), the
first ask of each pool to notice pauses that pool for one window, since the starts of the
lost log are unknown (a process that met the loss through one pool has its other pool
present the old epoch too, so that one pauses as well, used before the loss or not). A
few starts may still overrun the quota if new clients start on a restarted, empty Redis
before any older client notices, or when a client is cut off from a Redis the others still
reach.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from magisterium_async._clock import Clock, LoopClock, wait_at_most
from magisterium_async._config import (
    DEFAULT_MAX_CONCURRENCY,
    Priority,
    RateLimits,
)
from magisterium_async._errors import ClientClosedError, SharedQuotaError
from magisterium_async._ratelimit._judge import Verdict
from magisterium_async._ratelimit._log import Start, StartLog
from magisterium_async._ratelimit._quota import PoolQuota, SharedQuota
from magisterium_async._ratelimit._rule import RateRule
from magisterium_async._ratelimit._scripts import (
    ACQUIRE,
    OUTCOMES,
    PAUSE,
    POOL_KEYS,
    WRITE_RULE,
    rule_fields,
    rule_state,
    text,
)
from magisterium_async._ratelimit._tuning import (
    LINE_GRACE,
    LINE_POLL,
    LINE_RECOUNT,
    PACE_INTERVALS,
    PACE_QUIET_WINDOWS,
    PACE_RUN_WINDOWS,
    SHARED_ROUND_HOLD,
)
from magisterium_async._redis import Connection, connect, redis_errors, refusal, token_key

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["PoolState", "SharedLimiter", "SharedPool"]

logger = logging.getLogger("magisterium_async.ratelimit")

# Bulk ranks after every interactive call in the shared line (turn numbers stay far below).
_BULK_RANK = 10**15


class PoolState:
    """One pool's side of the shared limiter: its limits, what it last read of the shared
    rule, its own recent starts (for the fallback), and outcomes not yet written."""

    __slots__ = (
        "allowed",
        "asked_at",
        "epoch",
        "keys",
        "limit",
        "margin",
        "next_at",
        "outcomes",
        "period",
        "pool",
        "rate",
        "rejoin",
        "starts",
        "window",
    )  # fmt: skip

    def __init__(self, limits: RateLimits, pool: str) -> None:
        starts, window = limits.window_for(pool)  # the local pool's arithmetic, shared
        self.limit = starts if starts else math.inf
        self.window = window
        self.period = limits.period
        self.margin = limits.margin
        self.rate = self.allowed = self.limit
        self.pool = pool
        self.keys: list[str] = []  # known once the account is (SharedLimiter.locate)
        self.starts: deque[float] = deque()  # this process's starts, on the client's clock
        self.rejoin = False
        self.asked_at = 0.0  # when Redis last answered (Redis time, s)
        # The shared state's id this pool presents, once it has one: the first pool to meet
        # a new epoch pauses only its own keys, so the other must present the old epoch on
        # its next ask to learn of the loss, and pause, too.
        self.epoch = ""
        self.next_at = -math.inf  # when Redis said to ask again (the client's clock)
        self.outcomes: list[str] = []

    @property
    def span(self) -> float:
        return self.window + self.margin

    def locate(self, base: str) -> None:
        """Name the pool's keys under ``base`` (the account's part of every key)."""
        self.keys = [f"{base}:{self.pool}:{name}" for name in POOL_KEYS]


class SharedPool:
    """One metered pool on a :class:`SharedLimiter`: the pool's limiter (the rate it reads
    from Redis; what it learns goes there) and its remote gate (Redis admits each start)."""

    def __init__(self, shared: SharedLimiter, pool: str, state: PoolState) -> None:
        self.shared = shared
        self.pool = pool
        self._state = state

    @property
    def rate(self) -> float:
        state = self._state
        return state.rate * state.period / state.window if state.window else math.inf

    @property
    def stepping_up(self) -> bool:
        return self._state.rate > self._state.allowed

    def next_start(self, now: float) -> float:
        # Redis decides, in admit(); this is only when it said to ask again (for stats).
        return self._state.next_at

    def contention(self, now: float) -> None:
        return None  # Redis hears of it from the line, with every ask (admit)

    def paced_start(self, now: float, waiting: int, *, keyed: bool, bulk: bool) -> float:
        return -math.inf  # Redis admits each start, pacing bulk there

    def start(self, start: Start) -> None:
        return None  # the admission wrote it

    def usage(self, now: float) -> tuple[int, int, float]:
        # This process's own starts: the view when Redis does not answer (quota()).
        state = self._state
        log = StartLog([Start(t) for t in state.starts])
        return log.usage(int(state.limit), int(state.rate), state.span, now)

    def forget(self, start: Start) -> None:
        if start.ticket is not None:
            self.shared.outcome(self.pool, "forget", start.ticket)

    def learn(self, verdict: Verdict) -> None:
        self.shared.learn(self.pool, verdict)

    async def admit(self, line: Callable[[], tuple[Priority, int, bool]]) -> str:
        return await self.shared.admit(self.pool, line)

    def give_back(self, ticket: str) -> None:
        self.shared.outcome(self.pool, "forget", ticket)

    def answered(self, start: Start) -> None:
        if start.ticket is not None:
            kind = "429" if start.limited else "ok"
            self.shared.outcome(self.pool, kind, start.ticket, start.wait)

    async def aclose(self) -> None:
        await self.shared.aclose()


class SharedLimiter:
    """The runtime side of a :class:`SharedQuota`: one Redis connection for every pool.

    ``limiters`` are the scheduler's view of it, one :class:`SharedPool` per metered pool
    (each both the pool's limiter and its remote gate).
    """

    def __init__(
        self,
        config: SharedQuota,
        account: str | Callable[[], Awaitable[str]],
        limits: RateLimits,
        clock: Clock,
        *,
        redis: Redis | None = None,
        first_round: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        assert config.url is not None
        self.config = config
        # Before any start of a pool is answered, no more go out than one client would send.
        self._first_round = first_round
        self._clock = clock
        # The default clock differs between processes; Redis's TIME is the one they share.
        self._own_time = not isinstance(clock, LoopClock)
        self._offset = 0.0  # Redis time minus the client's clock, in seconds
        # ``redis``: a client already made, ours to close (tests pass an in-memory one).
        self._connection = (
            connect(config.url, config.timeout)
            if redis is None
            else Connection(redis, owned=True, where="redis")
        )
        self._redis = self._connection.client
        self._errors = redis_errors()
        self._acquire = self._redis.register_script(ACQUIRE)
        self._outcomes = self._redis.register_script(OUTCOMES)
        self._pause = self._redis.register_script(PAUSE)
        self._write_rule = self._redis.register_script(WRITE_RULE)
        # Whose quota this is: a name (or a token) now, or a function returning the token,
        # called at the first start, since a token= callable's token is known only then.
        self._account = account
        self._base: str | None = None
        self._id = uuid.uuid4().hex
        self._seq = 0
        self._epoch = ""  # the newest shared state's id any pool saw ('' before contact)
        self._clients = 1
        self._pools = {name: PoolState(limits, name) for name in ("default", "expensive")}
        if isinstance(account, str):
            self._locate(account)
        self.limiters: dict[str, SharedPool] = {
            name: SharedPool(self, name, state) for name, state in self._pools.items()
        }
        self._sleepers: set[asyncio.Task[None]] = set()
        self._down_since: float | None = None
        self._next_probe = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def gates(self) -> dict[str, SharedPool]:
        """The pools' remote gates (the same objects as :attr:`limiters`)."""
        return self.limiters

    async def _name_account(self) -> None:
        """Key every pool by the account, once it is known (a ``token=`` callable's token
        is known only at the first ask)."""
        if self._base is None:
            assert not isinstance(self._account, str)
            account = await self._account()
            if self._base is None:  # the first of the calls that asked at once names it
                self._locate(account)

    def _locate(self, account: str) -> None:
        """Key every pool by ``account``: hashed, in one hash tag (one Cluster slot)."""
        self._base = f"{self.config.prefix}:{{{token_key(account)}}}"
        for state in self._pools.values():
            state.locate(self._base)

    def keys(self, pool: str) -> tuple[str, str]:
        """The pool's log and pause keys."""
        keys = self._pools[pool].keys
        return keys[0], keys[3]

    def _now_us(self) -> str:
        return str(round(self._clock.now() * 1e6)) if self._own_time else ""

    async def _bounded(self, call: Awaitable[Any]) -> Any:
        return await wait_at_most(self.config.timeout, call)

    # Admission -------------------------------------------------------------------------

    async def admit(self, pool: str, line: Callable[[], tuple[Priority, int, bool]]) -> str:
        """Wait until ``pool`` may start one request (shared, or local when Redis is
        down); the start's ticket."""
        state = self._pools[pool]
        await self._name_account()
        while True:
            if self._closed:
                raise ClientClosedError("the client was closed while this call waited")
            self._seq += 1
            ticket = f"{self._id}:{self._seq}"
            if math.isinf(state.limit):
                return ticket
            priority, waiting, contends = line()
            wait = await self._try(pool, state, ticket, priority, waiting, contends)
            if wait == 0:
                state.next_at = -math.inf
                now = self._clock.now()
                state.starts.append(now)
                while state.starts and state.starts[0] <= now - state.span:
                    state.starts.popleft()
                return ticket
            if wait < 0:
                await self._step_up(pool, state)
                continue
            state.next_at = self._clock.now() + wait
            await self._wait(wait, line, max(waiting, 1))

    async def _try(
        self,
        pool: str,
        state: PoolState,
        ticket: str,
        priority: Priority,
        waiting: int,
        contends: bool,
    ) -> float:
        """Seconds to wait before trying again; ``0``: admitted; ``-1``: step up first."""
        now = self._clock.now()
        if self._down_since is None or now >= self._next_probe:
            wait = await self._shared(state, ticket, priority, waiting, contends, now)
            if wait is not None:
                return wait
        return self._local(state, self._clock.now())

    async def _shared(
        self,
        state: PoolState,
        ticket: str,
        priority: Priority,
        waiting: int,
        contends: bool,
        now: float,
    ) -> float | None:
        ages = []
        if state.rejoin:
            ages = [round((now - t) * 1e6) for t in state.starts if now - t < state.span]
        args: list[Any] = [
            self._now_us(),
            int(state.limit),
            round(state.window * 1e6),
            round(state.margin * 1e6),
            ticket,
            state.epoch or self._epoch,
            uuid.uuid4().hex,
            self._id,
            max(2 * round(state.span * 1e6), 10_000_000),
            _BULK_RANK,
            0 if priority == "interactive" else _BULK_RANK,
            self._first_round,
            round(SHARED_ROUND_HOLD * 1e6),
            round(LINE_GRACE * 1e6),
            round(LINE_POLL * 1e6),
            max(waiting, 1),
            1 if contends else 0,
            round(PACE_QUIET_WINDOWS * state.window * 1e6),
            PACE_INTERVALS,
            round(PACE_RUN_WINDOWS * state.window * 1e6),
            *ages,
        ]
        assert self._base is not None  # named by admit() before its first ask
        keys = [*state.keys, f"{self._base}:epoch", f"{self._base}:clients"]
        try:
            reply = await self._bounded(self._acquire(keys=keys, args=args))
        except self._errors as exc:
            refused = refusal(exc, self._connection.where)
            if refused is not None:  # a misconfiguration, not an outage: said, not waited out
                raise SharedQuotaError(f"the shared quota: {refused}") from None
            self._lost(exc)
            return None
        wait_us, epoch, clients = float(reply[0]), reply[1], int(reply[2])
        state.rate, state.allowed = float(reply[3]), float(reply[4])
        self._offset = 0.0 if self._own_time else float(reply[5]) / 1e6 - self._clock.now()
        self._learn_epoch(state, text(epoch))
        self._clients = max(clients, 1)
        state.rejoin = False
        state.asked_at = float(reply[5]) / 1e6
        if self._down_since is not None:
            logger.warning("Redis is back: the shared quota decides again")
            self._down_since = None
            for other in self._pools.values():
                if other is not state:
                    other.rejoin = True
        return wait_us / 1e6 if wait_us > 0 else wait_us

    def _learn_epoch(self, state: PoolState, epoch: str) -> None:
        """Note the shared state's id Redis answered ``state``'s pool with. A new one means
        the state was lost: each pool that had not seen the old one yet keeps it to present,
        so its next ask pauses it for a window as this one's did."""
        if self._epoch and epoch != self._epoch:
            for other in self._pools.values():
                other.epoch = other.epoch or self._epoch
        self._epoch = state.epoch = epoch

    async def _wait(
        self, seconds: float, line: Callable[[], tuple[Priority, int, bool]], told: int
    ) -> None:
        """Wait ``seconds`` to ask again, or less: once more calls wait here than Redis was
        ``told``, ask at once (others hold this client's turns only for what it told)."""
        end = self._clock.now() + seconds
        while (left := end - self._clock.now()) > 0 and not self._closed:
            await self._sleep(min(left, LINE_RECOUNT))
            if line()[1] > told:
                return

    async def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` on the client's clock, or until :meth:`aclose`."""
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        self._sleepers.add(sleeper)
        try:
            await asyncio.wait((sleeper,))
        finally:
            sleeper.cancel()
            self._sleepers.discard(sleeper)

    def _lost(self, exc: BaseException) -> None:
        now = self._clock.now()
        self._next_probe = now + self.config.retry_interval
        if self._down_since is not None:
            return
        self._down_since = now
        for state in self._pools.values():
            state.rejoin = True
        logger.warning(
            "Redis unreachable (%s): each pool falls back to a local 1/%d of its limit, "
            "after waiting out one window; retrying Redis every %g s",
            type(exc).__name__ if not str(exc) else exc,
            self._divisor(),
            self.config.retry_interval,
        )

    def _divisor(self) -> int:
        return max(self.config.workers, self._clients)

    def _local(self, state: PoolState, now: float) -> float:
        """The fallback: ``limit / divisor`` per window, once a window passed since the loss."""
        assert self._down_since is not None
        at = self._down_since + state.span
        share = state.limit / self._divisor()
        if share >= 1:
            rate, span = math.floor(share), state.span
        else:  # more workers than the limit: one each, spread over several windows
            rate, span = 1, state.span * math.ceil(1 / share)
        recent = [t for t in state.starts if t > now - span]
        if len(recent) >= rate:
            at = max(at, recent[-rate] + span)
        wait = at - now
        return max(min(wait, self._next_probe - now), 1e-3) if wait > 0 else 0.0

    # What the pools learn --------------------------------------------------------------

    def outcome(self, pool: str, kind: str, ticket: str, wait: float = 0.0) -> None:
        """What became of a start (``ok``, ``429`` with its ``wait``, ``forget``): written
        in the background."""
        state = self._pools[pool]
        if self._closed or math.isinf(state.limit):
            return
        first = not state.outcomes
        state.outcomes += (kind, ticket, str(round(wait * 1e6)))
        if first:
            self._spawn(self._write_outcomes(state))

    async def _write_outcomes(self, state: PoolState) -> None:
        await asyncio.sleep(0)  # gather what this turn of the loop adds
        triples, state.outcomes = state.outcomes, []
        if self._down_since is not None:
            return  # the fallback decides alone meanwhile; the rule learns nothing
        try:
            keys = [*state.keys[:3], state.keys[4]]
            args = [self._now_us(), *triples]
            await self._bounded(self._outcomes(keys=keys, args=args))
        except self._errors as exc:
            self._lost(exc)

    def learn(self, pool: str, verdict: Verdict) -> None:
        """Apply a verdict of this process's judge to the shared rule (in the background)."""
        if not self._closed:
            self._spawn(self._learn(pool, verdict))

    async def _learn(self, pool: str, verdict: Verdict) -> None:
        state = self._pools[pool]
        left = verdict.window_end - self._clock.now()
        if verdict.kind == "proven" and left > 0:
            await self._set_pause(state, left)
        for _ in range(3):  # written only if nobody wrote meanwhile
            try:
                done = await self._apply(state, verdict)
            except self._errors as exc:
                self._lost(exc)
                return
            if done:
                return

    async def _step_up(self, pool: str, state: PoolState) -> None:
        """This process holds the step-up lease: let the rule step up on the shared log."""
        try:
            await self._apply(state, None)
        except self._errors as exc:
            self._lost(exc)

    async def _apply(self, state: PoolState, verdict: Verdict | None) -> bool:
        """Read the shared rule and log, apply ``verdict`` (``None``: a step up), write the
        rule back; ``False`` if another process wrote first."""
        rule, version, proven_end, log = await self._snapshot(state)
        offset = self._offset
        fields: dict[str, Any] = {}
        if verdict is None:
            rule.step_up(log, state.asked_at)  # when the script found it due
        else:
            at, end = verdict.at + offset, verdict.window_end + offset
            start = next((s for s in log if s.ticket == verdict.start.ticket), None)
            if start is None:
                start = Start(verdict.start.time + offset, verdict.start.ticket)
            start.limited, start.done = verdict.start.limited, verdict.start.done
            kind = verdict.kind
            if kind in ("proven", "expired"):
                if abs(end - proven_end) < 0.5 * rule.window:
                    return True  # another process learned this window already
                fields["proven_end"] = repr(end)
            elif kind == "step_up_refused" and not rule.stepping_up:
                return True  # another process answered that step up already
            rule.learn(log, Verdict(kind, start, at, end, verdict.wait))
        fields.update(rule_fields(rule.state))
        args: list[Any] = [version, self._id]
        for name, value in fields.items():
            args += (name, value)
        written = await self._bounded(self._write_rule(keys=state.keys[4:6], args=args))
        if written:
            state.rate, state.allowed = rule.state.rate, rule.state.allowed
        return bool(written)

    async def _snapshot(self, state: PoolState) -> tuple[RateRule, int, float, StartLog]:
        """The shared rule (as a :class:`RateRule`), its version, the last proven window
        end, and the shared log with every outcome known."""
        log_key, ok_key, limited_key, _, rule_key = state.keys[:5]
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(rule_key)
        pipe.zrange(log_key, 0, -1, withscores=True)
        pipe.zrange(ok_key, 0, -1)
        pipe.zrange(limited_key, 0, -1)
        raw, starts, ok, limited = await self._bounded(pipe.execute())
        fields = {text(k): text(v) for k, v in raw.items()}
        ok_set = {text(t) for t in ok}
        limited_set = {text(t) for t in limited}
        log = StartLog()
        for member, score in starts:
            start = Start(score / 1e6, text(member))
            start.limited = start.ticket in limited_set
            start.done = start.limited or start.ticket in ok_set
            log.add(start)
        limit = int(state.limit)
        rule = RateRule("shared", limit, state.window, state.margin, period=state.period)
        rule.state = rule_state(fields, limit)
        version = int(fields.get("version", "0"))
        return rule, version, float(fields.get("proven_end", "-inf")), log

    async def quota(self, local: PoolQuota) -> PoolQuota:
        """``local`` (a pool's own view, :meth:`Pool.quota`) as the shared quota sees it:
        every process's starts in the shared log, the shared rate and pause. Reads only;
        ``local`` itself when Redis does not answer (or the pool is unlimited)."""
        state = self._pools[local.pool]
        if math.isinf(state.limit) or self._closed:
            return local
        await self._name_account()
        try:
            rule, _, _, log = await self._snapshot(state)
            pipe = self._redis.pipeline(transaction=False)
            pipe.get(state.keys[3])
            if not self._own_time:
                pipe.time()
            replies = await self._bounded(pipe.execute())
        except self._errors as exc:
            logger.info("Redis did not answer (%s): the quota is this process's view", exc)
            return local
        if self._own_time:
            now = self._clock.now()
        else:
            seconds, micros = replies[1]
            now = float(seconds) + float(micros) / 1e6
        until = float(text(replies[0])) / 1e6 if replies[0] is not None else -math.inf
        paused_for = max(0.0, until - now)
        used, left, at = log.usage(rule.limit, rule.state.rate, rule.span, now)
        return dataclasses.replace(
            local,
            limit=rule.rate,
            used=used,
            left=0 if paused_for else left,
            next_start_in=max(at - now, paused_for),
            paused_for=paused_for,
            shared=True,
        )

    async def _set_pause(self, state: PoolState, seconds: float) -> None:
        us = max(math.ceil(seconds * 1e6), 1)
        try:
            await self._bounded(self._pause(keys=[state.keys[3]], args=[self._now_us(), us]))
        except self._errors as exc:
            self._lost(exc)

    # Lifetime --------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aflush(self) -> None:
        """Wait until everything this client learned has reached Redis (or failed to)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        """Wait for pending writes, then close the connection. Idempotent."""
        if self._closed:
            return
        await self.aflush()
        self._closed = True
        for sleeper in self._sleepers:
            sleeper.cancel()
        await self._connection.aclose()
