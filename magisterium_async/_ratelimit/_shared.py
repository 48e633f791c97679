"""A quota shared by every process on one account, through Redis.

``AsyncMagisterium(shared_quota=SharedQuota("redis://host:6379/0"))``: each metered pool
keeps its log of starts and what its rule learned in Redis, and one Lua script (:data:`SCRIPT`)
decides there, atomically, by the same rule as a local pool (``_rule.py``): every process
on the account draws on one log, pauses with the others, lowers and steps up one rate,
paces bulk starts while any process has an interactive call about, and lines up the
processes that wait: those with an interactive call first, then round-robin. Each process still
judges its own rounds of answers (a 429 is judged once what it had in flight is answered)
and hands the script what it learned.

Keys, for one account (``P`` = ``SharedQuota.prefix``, ``H`` = the first 16 hex digits of
the SHA-256 of the account or token, never the token; the braces keep an account's keys in
one Cluster slot) and one pool (``default`` or ``expensive``)::

    P:{H}:POOL:log     sorted set: a ticket per start not refused, scored by its time (µs)
    P:{H}:POOL:ok      sorted set: the same, for the starts answered without a 429
    P:{H}:POOL:rule    hash: what the rule keeps (rate, pause, ...) and the state's epoch
    P:{H}:POOL:first   set: the clients whose part of the first round is not yet judged
    P:{H}:POOL:line    sorted set: the clients waiting, interactive first, then as they came
    P:{H}:POOL:gone    sorted set: the same, by when each leaves the line if it asks no more
    P:{H}:clients      sorted set: client id -> when last seen (sizes the fallback)

Time is Redis's own clock (``TIME``), which processes on every host agree on; with a clock
of the client's own (``VirtualClock`` in tests) every client sharing one Redis must share
that clock too, and pass its time.

When Redis does not answer (each command is bounded by ``SharedQuota.timeout``), a
process neither hangs nor stampedes: it says so once (a ``notice``), waits a whole window
(the starts others made through Redis may still be in the server's window), then keeps to
``limit / max(workers, clients seen lately)`` per window on its own, and asks Redis again
every ``retry_interval``; back, it adds the starts it made alone to the shared log. A
state Redis lost (a restart without persistence: a new epoch) pauses each pool one window,
as the starts of the lost log are unknown. A refusal (password, ACL, TLS) is no outage: it
is raised to every waiting call.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import RateLimits
from magisterium_async._errors import SharedQuotaError
from magisterium_async._events import OnEvent, notice
from magisterium_async._ratelimit._quota import PoolQuota, SharedQuota
from magisterium_async._ratelimit._rule import (
    FIRST_STEP,
    MAX_BACKOFF,
    QUIET,
    REFILL,
    RUN,
    Rule,
    Start,
    Verdict,
)
from magisterium_async._redis import RedisUnavailable, connect, token_key

__all__ = ["SCRIPT", "SharedLimits", "SharedPool"]

_US = 1_000_000  # the script counts microseconds
FIRST_HOLD = 2.0
"""The longest the shared first round (one client's ``max_concurrency`` of starts) holds
every other start while it is answered: a slow answer must not stall every process."""
_NEVER = 9e18  # a time that never comes, in µs (Lua has no portable infinity in a hash)

# KEYS: the pool's log and rule, the account's clients, the pool's first round's clients,
#   the pool's starts answered without a 429, its line of waiting clients and when each
#   leaves it if it asks no more.
# ARGV: 1 mode, 2 now (µs; '' reads Redis's TIME), 3 limit, 4 window (µs), 5 margin (µs),
#   6 adaptive ('1'/'0'), 7 the epoch this client knows ('' at first), 8 a new epoch, then
#   per mode:
#   admit   9 ticket, 10 the call's kind ('b' bulk, 'k' keyed, 'i' interactive: what is
#           paced while contended), 11 contends ('1'/'0'), 12 client id, 13 how long a
#           client counts as seen (µs), 14 QUIET, 15 RUN (windows), 16 the first round's
#           size (a client's max_concurrency), 17 how long it holds at most (µs),
#           18 FIRST_STEP
#   settle  9 client id: its part of the first round was judged
#   learn   9 kind, 10 at, 11 end, 12 until (µs), 13 rtt (µs), 14 refused, 15 REFILL,
#           16 FIRST_STEP, 17 MAX_BACKOFF
#   forget  9... tickets to take out of the log (refused, or never sent)
#   ok      9... tickets answered without a 429
#   add     9... start times (µs) to add, each its own ticket (a rejoin)
#   read    (nothing more)
# Returns {wait (µs; 0: admitted; -2: learn again soon, answers are missing), rate, proven,
#   paused until, now, epoch, clients seen, starts in the span, when the next start is free
#   (read only)}.
SCRIPT = """
local mode = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local log, rule = KEYS[1], KEYS[2]
local limit, window, margin = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local span = window + margin
local NEVER = 9e18
local s, epoch = {}, nil
local raw = redis.call('HGETALL', rule)
for i = 1, #raw, 2 do
  if raw[i] == 'epoch' then epoch = raw[i + 1] else s[raw[i]] = tonumber(raw[i + 1]) end
end
local rate, proven = s.rate or limit, s.proven or limit
local before, backoff, step_at = s.before or 0, s.backoff or 1, s.step_at or NEVER
local paused, recovering = s.paused or -NEVER, s.recovering or -NEVER
local contended, run_since = s.contended or -NEVER, s.run_since or -NEVER
local last, stepped = s.last or -NEVER, s.stepped or -NEVER
-- The first round: until a client has judged its first answers, no more start than one
-- client would send, so that told far more than allowed, four processes send one round,
-- not four, before they know.
local first = s.first or (mode == 'admit' and now + tonumber(ARGV[17]) or -NEVER)
if ARGV[7] ~= '' and ARGV[7] ~= epoch then
  -- The state was lost (or this client last saw another): the starts it held are unknown.
  paused = math.max(paused, now + span)
end
if not epoch then epoch = ARGV[8] end
redis.call('ZREMRANGEBYSCORE', log, '-inf', now - 2 * span)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - 2 * span)

local function in_span(t)
  return redis.call('ZCOUNT', log, '(' .. (t - span), '+inf')
end
local function log_free()
  local n = in_span(now)
  if n < rate then return -NEVER end
  local nth = redis.call('ZREVRANGEBYSCORE', log, '+inf', '(' .. (now - span),
    'WITHSCORES', 'LIMIT', rate - 1, 1)
  return tonumber(nth[2]) + span
end

local wait, clients = -1, 0
if mode == 'admit' then
  local bulk, paced = ARGV[10] == 'b', ARGV[10] ~= 'i'
  if ARGV[11] == '1' then contended = now end
  redis.call('ZADD', KEYS[3], now, ARGV[12])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[13]))
  redis.call('PEXPIRE', KEYS[3], math.ceil(tonumber(ARGV[13]) / 1000))
  clients = redis.call('ZCARD', KEYS[3])
  local at = math.max(paused, log_free())
  if at > now and rate < limit and now >= step_at then
    local stepped_up = rate > proven
    proven, stepped = rate, now
    rate = math.min(limit, math.max(rate + 1, stepped_up and before or 0))
    step_at = now + (rate <= before and 1 or tonumber(ARGV[18])) * window
    if rate >= limit then proven, backoff, step_at = limit, 1, NEVER end
    at = math.max(paused, log_free())
  end
  local quiet = now < contended + tonumber(ARGV[14]) * window
  local running = now - last <= 2 * span and now - run_since >= tonumber(ARGV[15]) * window
  local contends = paced and (quiet or running)
  if last > -NEVER and (contends or now < recovering) then
    at = math.max(at, last + window / rate)
  end
  if contends and rate > 1 then  -- the last free start kept until the next is near
    local nth = redis.call('ZREVRANGEBYSCORE', log, '+inf', '-inf', 'WITHSCORES',
      'LIMIT', rate - 2, 1)
    if nth[2] then at = math.max(at, tonumber(nth[2]) + span - window / rate) end
  end
  -- The line of processes waiting for this pool: interactive ones first, then by when
  -- each joined (a process that had a start joins again at the back: round-robin). The
  -- free starts go to the first waiters, one each; the others ask again a moment later.
  local line, gone = KEYS[6], KEYS[7]
  for _, c in ipairs(redis.call('ZRANGEBYSCORE', gone, '-inf', '(' .. now)) do
    redis.call('ZREM', line, c)
  end
  redis.call('ZREMRANGEBYSCORE', gone, '-inf', '(' .. now)
  redis.call('ZADD', line, 'LT', (bulk and NEVER or 0) + now, ARGV[12])
  local ahead = redis.call('ZRANK', line, ARGV[12])
  if at <= now and ahead > 0 then
    local free = rate - in_span(now)
    if paced and (quiet or running) or now < recovering then free = 1 end
    if free <= ahead then at = now + math.min(margin, 250000) end
  end
  if now < first and redis.call('ZCARD', log) >= tonumber(ARGV[16]) then
    at = math.max(at, math.min(first, now + margin))  -- asked again soon: it may settle
  end
  if at <= now then
    redis.call('ZADD', log, now, ARGV[9])
    if now < first then redis.call('SADD', KEYS[4], ARGV[12]) end
    if now - last > 2 * span then run_since = now end
    last = now
    redis.call('ZREM', line, ARGV[12])
    wait = 0
  else
    wait = at - now
    -- A process gone leaves the line a margin after it was due to ask again.
    redis.call('ZADD', gone, at + margin, ARGV[12])
  end
elseif mode == 'learn' then
  local kind, at, e, untl = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  if kind ~= 'fell_short' then
    paused = math.max(paused, untl)
    if untl - at < tonumber(ARGV[15]) * window then recovering = paused + window end
  end
  if ARGV[6] == '1' then
    if kind == 'step_refused' then
      if rate > proven then
        if rate > proven + 1 then before = proven end
        rate = proven
        backoff = math.min(2 * backoff, tonumber(ARGV[17]))
        step_at = untl + backoff * window
      end
    else
      local began = e - window - tonumber(ARGV[13]) - margin
      local took = redis.call('ZCOUNT', KEYS[5], '(' .. began, '+inf')
      if kind == 'fell_short' then
        took = rate - tonumber(ARGV[14])
      elseif redis.call('ZCOUNT', log, '(' .. began, '+inf') > took and now < untl then
        -- Some starts in that window are still unanswered (other processes'): learn
        -- once they are, or once the window is over (a process gone answers nothing).
        wait = -2
        took = rate
      end
      if took >= 1 and took < rate then
        before = math.max(took, redis.call('ZCOUNT', KEYS[5], '(' .. (began - span), began))
        rate, proven = took, took
        if at < stepped + 2 * tonumber(ARGV[16]) * window then
          backoff = math.min(2 * backoff, tonumber(ARGV[17]))
        end
        step_at = untl + math.max(tonumber(ARGV[16]), backoff) * window
      end
    end
  end
elseif mode == 'settle' then
  -- Over once every client with starts in it has judged its part.
  redis.call('SREM', KEYS[4], ARGV[9])
  if redis.call('SCARD', KEYS[4]) == 0 then first = -NEVER end
elseif mode == 'forget' then
  for i = 9, #ARGV do
    redis.call('ZREM', log, ARGV[i])
    redis.call('ZREM', KEYS[5], ARGV[i])
  end
elseif mode == 'ok' then
  for i = 9, #ARGV do
    local at = redis.call('ZSCORE', log, ARGV[i])
    if at then redis.call('ZADD', KEYS[5], at, ARGV[i]) end
  end
elseif mode == 'add' then
  for i = 9, #ARGV do
    redis.call('ZADD', log, tonumber(ARGV[i]), ARGV[8] .. ':' .. i)
    redis.call('ZADD', KEYS[5], tonumber(ARGV[i]), ARGV[8] .. ':' .. i)
  end
end
if mode ~= 'read' then
  redis.call('HSET', rule, 'rate', rate, 'proven', proven, 'before', before,
    'backoff', backoff, 'step_at', step_at, 'paused', paused, 'recovering', recovering,
    'contended', contended, 'run_since', run_since, 'last', last,
    'first', first, 'stepped', stepped, 'epoch', epoch)
  local keep = math.ceil(2 * span / 1000) + 60000
  redis.call('PEXPIRE', rule, keep)
  redis.call('PEXPIRE', log, keep)
  redis.call('PEXPIRE', KEYS[4], keep)
  redis.call('PEXPIRE', KEYS[5], keep)
  redis.call('PEXPIRE', KEYS[6], keep)
  redis.call('PEXPIRE', KEYS[7], keep)
end
local function us(t) return string.format('%.0f', t) end
if wait > 0 then wait = math.ceil(wait) end  -- a wait never rounds to 0 (admitted)
local free = mode == 'read' and math.max(paused, log_free()) or now
return {us(wait), rate, proven, us(paused), us(now), epoch, clients, in_span(now), us(free)}
"""


def _unheard(error: Exception) -> None:
    raise error


class SharedLimits:
    """The runtime side of a :class:`SharedQuota`: one Redis connection for both metered
    pools, its failures, and the fallback while Redis does not answer."""

    def __init__(
        self,
        config: SharedQuota,
        account: str | Callable[[], Awaitable[str]],
        limits: RateLimits,
        clock: Clock,
        pump: Callable[[], None],
        emit: OnEvent,
        first_round: int,
    ) -> None:
        self.config, self.clock, self.pump, self.emit = config, clock, pump, emit
        self.first_round = first_round  # the most that start before a first answer
        self.connection = connect(config.url, config.timeout, SharedQuotaError)
        self._script = self.connection.client.register_script(SCRIPT)
        # The default clock differs between processes: Redis's TIME is the one they share.
        self._own_time = not isinstance(clock, LoopClock)
        self.offset = 0.0  # Redis's time minus the client's clock, in seconds
        self._account = account
        self._base: str | None = None
        self.id = uuid.uuid4().hex
        self.clients = 1  # processes seen lately
        self.down_since: float | None = None  # when Redis stopped answering
        self.retry_at = -math.inf
        self._pools: dict[str, SharedPool] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def pool(self, name: str, local: Rule) -> SharedPool:
        """The shared side of the metered pool ``name``, whose own rule is ``local``."""
        pool = SharedPool(self, name, local)
        self._pools[name] = pool
        return pool

    async def _keys(self, pool: str) -> list[str]:
        if self._base is None:
            account = self._account if isinstance(self._account, str) else await self._account()
            self._base = f"{self.config.prefix}:{{{token_key(account)}}}"
        base = self._base
        return [
            f"{base}:{pool}:log",
            f"{base}:{pool}:rule",
            f"{base}:clients",
            f"{base}:{pool}:first",
            f"{base}:{pool}:ok",
            f"{base}:{pool}:line",
            f"{base}:{pool}:gone",
        ]

    async def run(self, pool: SharedPool, mode: str, *args: object) -> list[Any] | None:
        """One call of the script for ``pool``; ``None`` while Redis does not answer (the
        fallback applies). A refusal is raised."""
        now = self.clock.now()
        if self.down_since is not None and now < self.retry_at:
            return None
        rule = pool.local
        argv: list[object] = [
            mode,
            str(round(now * _US)) if self._own_time else "",
            rule.limit,
            round(rule.window * _US),
            round(rule.margin * _US),
            "1" if pool.adaptive else "0",
            pool.epoch if mode == "admit" else "",
            uuid.uuid4().hex[:12],
            *args,
        ]
        try:
            reply = await self.connection.run(
                self._script(keys=await self._keys(pool.name), args=argv)
            )
        except RedisUnavailable as exc:
            self._lost(str(exc), now)
            return None
        if self.down_since is not None:
            await self._rejoin(now)
        self.offset = float(reply[4]) / _US - self.clock.now()
        if mode == "admit":
            epoch = reply[5].decode() if isinstance(reply[5], bytes) else str(reply[5])
            if pool.epoch and pool.epoch != epoch:
                said = "the shared quota's state in Redis was lost: the pool waits a window"
                self.emit(notice("warning", "ratelimit", said, pool=pool.name, time=now))
            pool.epoch, self.clients = epoch, max(int(reply[6]), 1)
        return list(reply)

    def _lost(self, why: str, now: float) -> None:
        self.retry_at = now + self.config.retry_interval
        if self.down_since is None:
            self.down_since = now
            share = max(self.config.workers, self.clients)
            for pool in self._pools.values():
                pool.fall_back(now, share)
            self.emit(
                notice(
                    "warning",
                    "ratelimit",
                    f"{why}: each process keeps to 1/{share} of the quota alone until it "
                    "answers again",
                    time=now,
                )
            )

    async def _rejoin(self, now: float) -> None:
        """Redis answers again: the starts made alone go into the shared log."""
        self.down_since = None
        for pool in self._pools.values():
            starts = pool.rejoin()
            if starts:
                ages = [str(round((t + self.offset) * _US)) for t in starts]
                await self.run(pool, "add", *ages)
        self.emit(notice("info", "ratelimit", "Redis answers again: the quota is shared", time=now))

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` in the background (closing waits for it)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def quota(self, view: PoolQuota) -> PoolQuota:
        """``view`` (this process's) as the shared quota sees it: every process's starts,
        the shared rate and pause; ``view`` itself when Redis does not answer."""
        pool = self._pools.get(view.pool)
        if pool is None or self.closed:
            return view
        reply = await self.run(pool, "read")
        if reply is None:
            return view
        rule = pool.local
        now = float(reply[4]) / _US
        rate, paused_for = int(reply[1]), max(0.0, float(reply[3]) / _US - now)
        used, free_in = int(reply[7]), max(0.0, float(reply[8]) / _US - now)
        return PoolQuota(
            pool=view.pool,
            limit=rate * view.period / rule.window,
            configured=view.configured,
            period=view.period,
            used=used,
            left=0 if free_in else max(rate - used, 0),
            next_start_in=free_in,
            paused_for=paused_for,
            shared=True,
        )

    async def aclose(self) -> None:
        """Wait for what is being written, then close the connection. Idempotent."""
        if self.closed:
            return
        while self._tasks:
            await asyncio.wait(set(self._tasks))
        self.closed = True
        await self.connection.aclose()


class SharedPool:
    """One metered pool's side of the shared quota: it asks Redis for each start on behalf
    of its pool's line (one ask at a time), mirrors the shared rate and pause, and hands
    on what the pool's rounds teach."""

    def __init__(self, shared: SharedLimits, name: str, local: Rule) -> None:
        self.shared, self.name, self.local = shared, name, local
        self.adaptive = local.adaptive
        self.rate, self.proven = local.rate, local.proven
        self.paused_until = -math.inf
        self._ticket: str | None = None  # an admission in hand
        self._asking = False
        self._next_ask = -math.inf
        self._contends = False
        self._settled = False
        self.epoch = ""  # the shared state's epoch, once Redis said it
        self._answered: list[str] = []  # answered without a 429, not yet told
        self._seq = 0
        self._fallback: Rule | None = None  # while Redis does not answer
        self.fail: Callable[[Exception], None] = _unheard  # the pool's: fails its waiters
        self._alone: list[float] = []  # the starts made meanwhile

    def contend(self) -> None:
        """A call a burst would hold back arrived: the next ask says so."""
        self._contends = True

    def next_start(self, now: float, kind: str) -> float:
        """When this process may start its next request (``inf``: once Redis answers)."""
        shared = self.shared
        if self._fallback is not None and shared.down_since is not None and now < shared.retry_at:
            return self._fallback.next_start(now, paced=kind != "i")
        if self._ticket is not None:
            return now
        if self._asking:
            return math.inf
        if now < self._next_ask:
            return self._next_ask
        self._asking = True
        self.shared.spawn(self._ask(kind))
        return math.inf

    def take(self) -> str | None:
        """The admission in hand, for the start made now (``None`` in the fallback)."""
        ticket, self._ticket = self._ticket, None
        if ticket is None and self._fallback is not None:
            now = self.shared.clock.now()
            self._fallback.start(now)
            self._alone.append(now)
        return ticket

    async def _ask(self, kind: str) -> None:
        shared = self.shared
        self._seq += 1
        ticket = f"{shared.id}:{self._seq}"
        contends, self._contends = self._contends or kind != "b", False
        try:
            reply = await shared.run(
                self, "admit", ticket, kind, "1" if contends else "0",
                shared.id, round(max(4 * self.local.span, 10.0) * _US), QUIET, RUN,
                shared.first_round, round(FIRST_HOLD * _US), FIRST_STEP,
            )  # fmt: skip
        except Exception as exc:  # a refusal, or a token callable that raised
            self.fail(exc)  # every waiting call raises it; a later one asks again
            return
        finally:
            self._asking = False
        if reply is None:
            shared.pump()
            return
        self._mirror(reply)
        wait = float(reply[0]) / _US
        if wait == 0:
            self._ticket = ticket
            shared.pump()
            if self._ticket is not None:  # not used in this turn of the loop: given back
                self._ticket = None
                self.forget(Start(0.0, ticket))
        else:
            self._next_ask = shared.clock.now() + wait
            shared.pump()

    def _mirror(self, reply: list[Any]) -> None:
        self.rate, self.proven = int(reply[1]), int(reply[2])
        self.paused_until = float(reply[3]) / _US - self.shared.offset

    def settle(self) -> None:
        """This process judged its first round: the others' first starts may go."""
        if not self._settled:
            self._settled = True
            self.shared.spawn(self._quietly("settle", self.shared.id))

    def forget(self, start: Start) -> None:
        """A start that spent nothing (refused, or never sent) leaves the shared log."""
        if start.ticket is not None:
            self.shared.spawn(self._quietly("forget", start.ticket))

    def learn(self, verdict: Verdict) -> None:
        """What a round of this process's answers taught, for every process."""
        if self._fallback is not None and self.shared.down_since is not None:
            self._fallback.apply(verdict)
            return
        offset = self.shared.offset
        args: list[object] = [
            verdict.kind,
            *(round((t + offset) * _US) for t in (verdict.at, verdict.end, verdict.until)),
            round(verdict.rtt * _US),
            verdict.refused,
            REFILL,
            FIRST_STEP,
            MAX_BACKOFF,
        ]
        self.shared.spawn(self._learn(args))

    async def _learn(self, args: list[object]) -> None:
        with contextlib.suppress(Exception):  # a refusal: the next ask raises it
            while True:
                await self._flush()  # what this process knows goes first
                reply = await self.shared.run(self, "learn", *args)
                if reply is not None:
                    self._mirror(reply)
                if reply is None or float(reply[0]) != -2:
                    break
                await self.shared.clock.sleep(self.local.margin)
        self.shared.pump()

    def answered(self, start: Start) -> None:
        """A start answered without a 429: told with the others of this turn."""
        if start.ticket is not None:
            self._answered.append(start.ticket)
            if len(self._answered) == 1:
                self.shared.spawn(self._flush(wait=True))

    async def _flush(self, *, wait: bool = False) -> None:
        if wait:
            await asyncio.sleep(0)  # gather the answers of this turn of the loop
        tickets, self._answered = self._answered, []
        if tickets:
            await self._quietly("ok", *tickets)

    async def _quietly(self, mode: str, *args: object) -> None:
        with contextlib.suppress(Exception):  # a refusal: the next ask raises it
            await self.shared.run(self, mode, *args)

    def fall_back(self, now: float, share: int) -> None:
        """Redis stopped answering: keep to ``limit / share`` alone, after a window."""
        rule = self.local
        limit = max(1, rule.rate // share)
        self._fallback = Rule(
            limit, rule.window * max(1, math.ceil(share / rule.rate)), rule.margin
        )
        self._fallback.paused_until = now + rule.span
        self._alone = []

    def rejoin(self) -> list[float]:
        """Redis answers again: the starts made alone, for the shared log."""
        alone, self._alone, self._fallback = self._alone, [], None
        return alone
