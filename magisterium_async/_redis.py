"""Rate-limit pools shared by every process on one token, through Redis.

``AsyncMagisterium(shared_quota=SharedQuota("redis://host:6379/0"))``: each metered pool
(``default``, ``expensive``) is one sliding log in Redis, keyed by a hash of the token
(never the token), that every client on that token draws on. One Lua script, run
atomically on the server, admits a start only if fewer than N starts lie in
``(now - period - margin, now]`` -- the scheduler's window guarantee, held across all
processes together. A proven 429 seen by any client sets a shared pause that every client
waits out. Each pool's :class:`SharedPoolLimiter` is the scheduler's :class:`Limiter` for
it: the local pool keeps its concurrency caps, its probe and its own pause; Redis decides
the rate.

Time: with the default clock the log is timed by Redis's own clock (``TIME``), the one
every process on every host agrees on. With any other clock (``VirtualClock`` in tests)
the log is timed by that clock, so every client sharing one Redis must share it too; the
limiter also sleeps, and times its local fallback, on the client's clock.

Keys (``P`` = ``prefix``, ``H`` = the first 16 hex digits of the token's SHA-256)::

    P:{H}:default:log    sorted set: one member per start, scored by its Redis time (µs)
    P:{H}:default:pause  the time (µs) the pool is paused until, after a 429
    P:{H}:expensive:log / P:{H}:expensive:pause
    P:{H}:epoch          a random id made when the state is created: a change means the
                         state was lost (Redis restarted without persistence, flushed)
    P:{H}:clients        sorted set: client id -> last time seen (sizes the fallback)

When Redis fails (every call is bounded by ``timeout``; connection refused, timeout, any
Redis error) the client does not hang and does not stampede: it logs a WARNING and falls
back to a local limit of ``limit / max(workers, clients seen lately)`` per period, starting
only once a full window has passed since the failure (the starts others made through
Redis just before may still be in the server's window). It probes Redis every
``retry_interval`` seconds and rejoins when it answers, adding the starts it made alone to
the shared log. If the state was lost meanwhile (a new epoch), the first client to notice
pauses the pool for one window, since the starts of the lost log are unknown. A few starts
may still overrun the quota if new clients start on a restarted, empty Redis before any
older client notices, or when a client is cut off from a Redis the others still reach.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import uuid
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._clock import Clock, LoopClock
from ._config import RateLimits
from ._env import REDIS_URL_ENV
from ._errors import ClientClosedError, SharedQuotaError
from ._scheduler import Limiter, Start

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "REDIS_URL_ENV",
    "SharedLimiter",
    "SharedPoolLimiter",
    "SharedQuota",
    "SharedQuotaError",
    "connect",
]

logger = logging.getLogger("magisterium_async")

_INSTALL_HINT = "the shared quota needs redis-py: pip install 'magisterium-async[redis]'"

# KEYS: log, pause, epoch, clients.
# ARGV: limit, span (µs), member, known epoch ('' on first contact), new epoch id,
#       client id, clients horizon (µs), now (µs; '': Redis's TIME), then the ages (µs) of
#       starts to add (a rejoin).
# Returns {wait µs (0: admitted), epoch, clients seen}.
_ACQUIRE = """
local now
if ARGV[8] ~= '' then
  now = tonumber(ARGV[8])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local limit = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local epoch = redis.call('GET', KEYS[3])
local lost = false
if not epoch then
  epoch = ARGV[5]
  redis.call('SET', KEYS[3], epoch)
  lost = ARGV[4] ~= ''
elseif ARGV[4] ~= '' and ARGV[4] ~= epoch then
  lost = true
end
if lost then
  if tonumber(redis.call('GET', KEYS[2]) or '0') < now + span then
    redis.call('SET', KEYS[2], now + span, 'PX', math.ceil(span / 1000) + 1000)
  end
end
redis.call('ZADD', KEYS[4], now, ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[7]))
redis.call('PEXPIRE', KEYS[4], math.ceil(tonumber(ARGV[7]) / 1000))
local clients = redis.call('ZCARD', KEYS[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - span)
for i = 9, #ARGV do
  local at = now - tonumber(ARGV[i])
  if at > now - span then
    redis.call('ZADD', KEYS[1], at, ARGV[3] .. ':b' .. i)
  end
end
local pause = tonumber(redis.call('GET', KEYS[2]) or '0')
if pause > now then
  return {pause - now, epoch, clients}
end
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(span / 1000) + 1000)
  return {0, epoch, clients}
end
local entry = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
return {math.max(tonumber(entry[2]) + span - now, 1), epoch, clients}
"""

# KEYS: pause. ARGV: µs to pause, now (µs; '': Redis's TIME). Extends the pause to
# now + ARGV[1], never shortens it; the key expires (in Redis's time) a second after.
_PAUSE = """
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local till = now + tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1]) or '0') < till then
  redis.call('SET', KEYS[1], till, 'PX', math.ceil(tonumber(ARGV[1]) / 1000) + 1000)
end
return 1
"""


def connect(url: str, timeout: float) -> Redis:
    """A redis-py asyncio client for ``url``, every call bounded by ``timeout`` seconds."""
    try:
        from redis.asyncio import Redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise SharedQuotaError(_INSTALL_HINT) from None
    try:
        client: Redis = Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=False,
        )
    except ValueError as exc:
        raise SharedQuotaError(f"invalid Redis URL {url!r}: {exc}") from None
    return client


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis raises: its errors, the socket's, and timeouts."""
    from redis.exceptions import RedisError

    return (RedisError, OSError, asyncio.TimeoutError)


def token_key(token: str) -> str:
    """The part of every key that names the token: a hash, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SharedQuota:
    """Share the client's rate limits with every process on the same token, through Redis.

    ``url`` falls back to ``$MAGISTERIUM_REDIS_URL``. ``workers`` is how many processes you
    expect to share the quota: if Redis goes away, each falls back to ``limit / workers``
    per period on its own (or fewer, when Redis had seen more clients lately).
    ``timeout`` bounds every Redis call; ``retry_interval`` is how often a client that
    lost Redis tries it again. Needs ``pip install 'magisterium-async[redis]'``.
    """

    url: str | None = None
    workers: int = 1
    timeout: float = 0.5
    retry_interval: float = 1.0
    prefix: str = "magisterium"

    def __post_init__(self) -> None:
        url = self.url if self.url is not None else os.environ.get(REDIS_URL_ENV)
        if not url:
            raise SharedQuotaError(f"no Redis URL: pass url= or set ${REDIS_URL_ENV}")
        object.__setattr__(self, "url", url)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int):
            raise TypeError("workers must be an int")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        for name in ("timeout", "retry_interval"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise ValueError(f"{name} must be a positive number, got {value!r}")

    @classmethod
    def of(cls, value: SharedQuota | str) -> SharedQuota:
        """A ``SharedQuota`` from a user's ``shared_quota=``: a URL or the object itself."""
        if isinstance(value, SharedQuota):
            return value
        if isinstance(value, str):
            return cls(value)
        raise TypeError(f"shared_quota must be a Redis URL or SharedQuota, not {type(value)}")

    def limiter(self, token: str, limits: RateLimits, clock: Clock | None = None) -> SharedLimiter:
        """The limiter a client's scheduler draws on, on the client's ``clock`` (connects
        lazily)."""
        return SharedLimiter(self, token, limits, clock if clock is not None else LoopClock())


class _PoolState:
    __slots__ = ("limit", "lock", "rejoin", "span", "span_us", "starts")

    def __init__(self, limits: RateLimits, pool: str) -> None:
        starts, window = limits.window_for(pool)  # the local pool's arithmetic, shared
        self.limit = starts if starts else math.inf
        self.span = window + limits.margin
        self.span_us = round(self.span * 1e6)
        self.lock = asyncio.Lock()
        self.starts: deque[float] = deque()  # this process's starts, on the client's clock
        self.rejoin = False


class SharedLimiter:
    """The runtime side of a :class:`SharedQuota`: one Redis connection, per-pool locks.

    :meth:`acquire` returns once the pool's shared log admitted a start (or the local
    fallback did); one waiter per pool and process asks Redis at a time, first come first
    served, so a process never polls Redis more than once per wake-up. ``limiters`` are
    the scheduler's view of it, one :class:`SharedPoolLimiter` per metered pool.
    """

    def __init__(
        self,
        config: SharedQuota,
        token: str,
        limits: RateLimits,
        clock: Clock,
        *,
        redis: Redis | None = None,
    ) -> None:
        assert config.url is not None
        self.config = config
        self._clock = clock
        # The default clock differs between processes; Redis's TIME is the one they share.
        self._own_time = not isinstance(clock, LoopClock)
        # ``redis``: a client already made (tests pass an in-memory one).
        self._redis = redis if redis is not None else connect(config.url, config.timeout)
        self._errors = redis_errors()
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._pause = self._redis.register_script(_PAUSE)
        self._base = f"{config.prefix}:{{{token_key(token)}}}"
        self._id = uuid.uuid4().hex
        self._seq = 0
        self._epoch = ""
        self._clients = 1
        self._pools = {name: _PoolState(limits, name) for name in ("default", "expensive")}
        self.limiters: dict[str, Limiter] = {
            name: SharedPoolLimiter(self, name, limits) for name in self._pools
        }
        self._sleepers: set[asyncio.Task[None]] = set()
        self._down_since: float | None = None
        self._next_probe = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.fallbacks = 0
        """How many times Redis was lost (for tests and metrics)."""

    @property
    def available(self) -> bool:
        """Whether Redis answered the last call (``False``: the local fallback decides)."""
        return self._down_since is None

    def keys(self, pool: str) -> tuple[str, str]:
        """The pool's log and pause keys."""
        return f"{self._base}:{pool}:log", f"{self._base}:{pool}:pause"

    def _now_us(self) -> str:
        return str(round(self._clock.now() * 1e6)) if self._own_time else ""

    async def acquire(self, pool: str) -> None:
        """Wait until ``pool`` may start one request (shared, or local when Redis is down)."""
        state = self._pools[pool]
        if math.isinf(state.limit):
            return
        async with state.lock:
            while True:
                if self._closed:
                    raise ClientClosedError("the client was closed while this call waited")
                wait = await self._try(pool, state)
                if wait <= 0:
                    now = self._clock.now()
                    state.starts.append(now)
                    while state.starts and state.starts[0] <= now - state.span:
                        state.starts.popleft()
                    return
                await self._sleep(wait)

    async def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` on the client's clock, or until :meth:`aclose`."""
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        self._sleepers.add(sleeper)
        try:
            await asyncio.wait((sleeper,))
        finally:
            sleeper.cancel()
            self._sleepers.discard(sleeper)

    async def _try(self, pool: str, state: _PoolState) -> float:
        """Seconds to wait before trying again; ``0``: admitted."""
        now = self._clock.now()
        if self._down_since is None or now >= self._next_probe:
            wait = await self._shared(pool, state, now)
            if wait is not None:
                return wait
        return self._local(state, self._clock.now())

    async def _shared(self, pool: str, state: _PoolState, now: float) -> float | None:
        log, pause = self.keys(pool)
        self._seq += 1
        ages = []
        if state.rejoin:
            ages = [round((now - t) * 1e6) for t in state.starts if now - t < state.span]
        args: list[Any] = [
            int(state.limit),
            state.span_us,
            f"{self._id}:{self._seq}",
            self._epoch,
            uuid.uuid4().hex,
            self._id,
            max(2 * state.span_us, 10_000_000),
            self._now_us(),
            *ages,
        ]
        keys = [log, pause, f"{self._base}:epoch", f"{self._base}:clients"]
        try:
            reply = await asyncio.wait_for(self._acquire(keys=keys, args=args), self.config.timeout)
        except self._errors as exc:
            self._lost(exc)
            return None
        wait_us, epoch, clients = float(reply[0]), reply[1], int(reply[2])
        self._epoch = epoch.decode() if isinstance(epoch, bytes) else str(epoch)
        self._clients = max(clients, 1)
        state.rejoin = False
        if self._down_since is not None:
            logger.warning("Redis is back: the shared quota decides again")
            self._down_since = None
            for other in self._pools.values():
                if other is not state:
                    other.rejoin = True
        return wait_us / 1e6

    def _lost(self, exc: BaseException) -> None:
        now = self._clock.now()
        self._next_probe = now + self.config.retry_interval
        if self._down_since is not None:
            return
        self._down_since = now
        self.fallbacks += 1
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

    def _local(self, state: _PoolState, now: float) -> float:
        """The fallback: ``limit / divisor`` per window, once a window passed since the loss."""
        assert self._down_since is not None
        at = self._down_since + state.span
        share = state.limit / self._divisor()
        if share >= 1:
            rate, span = math.floor(share), state.span
        else:  # more workers than the limit: one each, spread over several windows
            rate, span = 1, state.span * math.ceil(1 / share)
        starts = state.starts
        recent = [t for t in starts if t > now - span]
        if len(recent) >= rate:
            at = max(at, recent[-rate] + span)
        wait = at - now
        return max(min(wait, self._next_probe - now), 1e-3) if wait > 0 else 0.0

    def rate_limited(self, pool: str, retry_after: float) -> None:
        """A proven 429 in ``pool``: pause it for every client for ``retry_after`` seconds."""
        if self._closed or pool not in self._pools or retry_after <= 0:
            return
        task = asyncio.ensure_future(self._set_pause(pool, retry_after))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _set_pause(self, pool: str, retry_after: float) -> None:
        _, pause = self.keys(pool)
        us = max(math.ceil(retry_after * 1e6), 1)
        try:
            await asyncio.wait_for(
                self._pause(keys=[pause], args=[us, self._now_us()]), self.config.timeout
            )
        except self._errors as exc:
            self._lost(exc)

    async def aflush(self) -> None:
        """Wait until every pause this client set has reached Redis (or failed to)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        """Wait for pending pause writes, then close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for sleeper in self._sleepers:
            sleeper.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        await self._redis.aclose()


class SharedPoolLimiter:
    """One metered pool's :class:`Limiter` on a :class:`SharedLimiter`: the shared log
    decides every start (in :meth:`admit`); a proven 429 pauses every client."""

    remote = True

    def __init__(self, shared: SharedLimiter, pool: str, limits: RateLimits) -> None:
        self.shared = shared
        self.pool = pool
        self._rate = limits.limit_for(pool)

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def probing(self) -> bool:
        return False

    def next_start(self, now: float) -> float:
        return -math.inf  # Redis decides, in admit()

    def start(self, start: Start) -> None:
        return None

    def forget(self, start: Start) -> None:
        return None  # the shared log's entry ages out with the window

    async def admit(self, start: Start) -> None:
        await self.shared.acquire(self.pool)

    def refused(self, start: Start, now: float, window_end: float, *, proven: bool) -> None:
        # What is left of the window now (a suspect proven when its window ended: nothing).
        left = window_end - self.shared._clock.now()
        if proven and left > 0:
            self.shared.rate_limited(self.pool, left)

    def refuted(self, start: Start, suspect: Start, wait: float) -> None:
        return None

    async def aclose(self) -> None:
        await self.shared.aclose()
