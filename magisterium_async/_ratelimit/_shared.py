"""A quota shared by every process on one account, through Redis.

``AsyncMagisterium(shared_quota=SharedQuota("redis://host:6379/0"))``: each metered pool
keeps its log of starts and what its rule learned in Redis, and each decision is made by
the same rule as a local pool's (``_rule.py``), over that state: read with Redis's time,
decided here, written back only if no other process wrote meanwhile (else decided again).
So every process on the account draws on one log, pauses with the others, lowers and
steps up one rate, paces bulk starts while any process has an interactive call about, and
lines up the processes that wait: those with an interactive call first, then round-robin.
Each process still judges its own rounds of answers (a 429 is judged once what it had in
flight is answered) and hands on what it learned.

One key per account (``P`` = ``SharedQuota.prefix``, ``H`` = the first 16 hex digits of
the SHA-256 of the account or token, never the token; the braces keep an account's keys in
one Cluster slot) and pool (``default`` or ``expensive``), ``P:{H}:POOL:state``: a JSON object
of what the rule keeps (rate, pause, ...), its log of starts not refused (time, ticket,
outcome), the state's epoch, the first round's clients, the line of clients waiting (and
when each leaves it if it asks no more) and the clients seen lately (they size the fallback).

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
import dataclasses
import itertools
import json
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._errors import SharedQuotaError
from magisterium_async._events import OnEvent, notice
from magisterium_async._ratelimit._quota import SharedQuota
from magisterium_async._ratelimit._rule import Rule, Start, Verdict
from magisterium_async._redis import RedisUnavailable, connect, token_key

__all__ = ["SharedLimits", "SharedPool"]

T = TypeVar("T")
State = dict[str, Any]
Change = Callable[[Rule, State, float], T]
"""A decision: the pool's rule and state rebuilt at a time, changed (unless only read)."""

FIRST_HOLD = 2.0
"""The longest the shared first round (one client's ``max_concurrency`` of starts) holds
every other start while it is answered: a slow answer must not stall every process."""
_BULK = 1e12  # added to a bulk client's place in the line: after every interactive one
_KEPT = (
    "rate",
    "proven",
    "before",
    "backoff",
    "step_at",
    "stepped_at",
    "paused_until",
    "recovering_until",
    "contended_at",
    "run_since",
    "last_start",
)  # what the rule learned, kept in the state beside its log
_READ = "return {redis.call('TIME'), redis.call('GET', KEYS[1])}"
_WRITE = """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""  # written only if it is still what was read


def unanswered(rule: Rule, verdict: Verdict, now: float) -> bool:
    """Whether a window that ran out holds starts still unanswered (other processes'):
    the rate is learned once they are, or once the window is over (a process gone
    answers nothing); the pause at once."""
    if verdict.kind != "ran_out" or now >= verdict.until:
        return False
    began = rule._began(verdict.end, verdict.rtt)
    return any(s.outcome == "out" and s.time > began for s in rule.log)


def _state(value: bytes | None) -> State:
    """The state a key holds; a new one (a new epoch) for none, or for a value that is
    not a state (torn, or written by something else): as if Redis had lost it."""
    with contextlib.suppress(ValueError):
        state = json.loads(value) if value else None
        if isinstance(state, dict) and isinstance(state.get("epoch"), str):
            return state
    return {"epoch": uuid.uuid4().hex[:12]}


class SharedLimits:
    """The runtime side of a :class:`SharedQuota`: one Redis connection for both metered
    pools, its failures, and the fallback while Redis does not answer."""

    def __init__(
        self,
        config: SharedQuota,
        account: str | Callable[[], Awaitable[str]],
        clock: Clock,
        pump: Callable[[], None],
        emit: OnEvent,
        first_round: int,
    ) -> None:
        self.config, self.clock, self.pump, self.emit = config, clock, pump, emit
        self.first_round = first_round  # the most that start before a first answer
        self.connection = connect(config.url, config.timeout, SharedQuotaError)
        self._read = self.connection.client.register_script(_READ)
        self._write = self.connection.client.register_script(_WRITE)
        # The default clock differs between processes: Redis's TIME is the one they share.
        self._own_time = not isinstance(clock, LoopClock)
        self.offset = 0.0  # Redis's time minus the client's clock, in seconds
        self._account = account
        self._base: str | None = None
        self.id = uuid.uuid4().hex
        self.down_since: float | None = None  # when Redis stopped answering
        self.retry_at = -math.inf
        self._pools: dict[str, SharedPool] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    async def _key(self, pool: str) -> str:
        if self._base is None:
            account = self._account if isinstance(self._account, str) else await self._account()
            self._base = f"{self.config.prefix}:{{{token_key(account)}}}"
        return f"{self._base}:{pool}:state"  # the log, and what the rule learned beside it

    async def run(self, pool: SharedPool, change: Change[T], *, write: bool = True) -> T | None:
        """One decision for ``pool`` (see the module's docstring); what ``change`` returned,
        or ``None`` while Redis does not answer (the fallback applies). A refusal is
        raised."""
        now = self.clock.now()
        if self.down_since is not None and now < self.retry_at:
            return None
        key, run = await self._key(pool.name), self.connection.run
        try:
            while True:
                (seconds, micro), old = await run(self._read(keys=[key]))
                at = self.clock.now() if self._own_time else int(seconds) + int(micro) / 1e6
                state = _state(old)
                rule = pool.rule(state, at)
                result = change(rule, state, at)
                if not write:
                    break
                state.update({name: getattr(rule, name) for name in _KEPT})
                state["log"] = sorted((s.time, s.ticket, s.outcome) for s in rule.log)
                keep = round((2 * rule.span + 60) * 1000)
                if await run(self._write(keys=[key], args=[old or "", json.dumps(state), keep])):
                    break
        except RedisUnavailable as exc:
            self._lost(str(exc), now)
            return None
        if self.down_since is not None:
            await self._rejoin(now)
        self.offset = at - self.clock.now()
        pool.mirror(rule)
        return result

    def _lost(self, why: str, now: float) -> None:
        self.retry_at = now + self.config.retry_interval
        if self.down_since is None:
            self.down_since = now
            share = max([self.config.workers, *(p.clients for p in self._pools.values())])
            for pool in self._pools.values():
                pool.fall_back(now, share)
            said = (
                f"{why}: each process keeps to 1/{share} of the quota alone until it answers again"
            )
            self.emit(notice("warning", "ratelimit", said, time=now))

    async def _rejoin(self, now: float) -> None:
        """Redis answers again: the starts made alone go into the shared log."""
        self.down_since = None
        for pool in self._pools.values():
            alone = [t + self.offset for t in pool.rejoin()]
            if alone:

                def add(rule: Rule, state: State, now: float, alone: list[float] = alone) -> None:
                    rule.log.extend(Start(t, uuid.uuid4().hex, "ok") for t in alone)

                await self.run(pool, add)
        self.emit(notice("info", "ratelimit", "Redis answers again: the quota is shared", time=now))

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` in the background (closing waits for it)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def read(self, name: str) -> tuple[Rule, float] | None:
        """The shared rule of pool ``name`` and Redis's time, changing nothing; ``None``
        when Redis does not answer (or the pool is not shared)."""
        pool = self._pools.get(name)
        if pool is None or self.closed:
            return None
        return await self.run(pool, lambda rule, state, now: (rule, now), write=False)

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
    on what the pool's rounds teach. ``local`` is the pool's own rule; ``fail`` fails its
    waiting calls."""

    def __init__(
        self, shared: SharedLimits, name: str, local: Rule, fail: Callable[[Exception], None]
    ) -> None:
        self.shared, self.name, self.local, self.fail = shared, name, local, fail
        shared._pools[name] = self
        self.rate, self.proven = local.rate, local.proven
        self.paused_until = -math.inf
        self._ticket: str | None = None  # an admission in hand
        self._asking = False
        self._next_ask = -math.inf
        self._contends = False
        self._settled = False
        self.epoch = ""  # the shared state's epoch, once Redis said it
        self.clients = 1  # processes seen lately on this pool (they size the fallback)
        self._answered: list[str] = []  # answered without a 429, not yet told
        self._seq = itertools.count(1)
        # While Redis does not answer; its log is the starts made meanwhile (none is
        # answered there, so none leaves it), for the shared log once Redis is back.
        self._fallback: Rule | None = None

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
            self._fallback.start(self.shared.clock.now())
        return ticket

    async def _ask(self, kind: str) -> None:
        shared = self.shared
        ticket = f"{shared.id}:{next(self._seq)}"
        contends, self._contends = self._contends or kind != "b", False
        try:
            reply = await shared.run(
                self, lambda r, s, now: self._admit(r, s, now, ticket, kind, contends)
            )
        except Exception as exc:  # a refusal, or a token callable that raised
            self.fail(exc)  # every waiting call raises it; a later one asks again
            return
        finally:
            self._asking = False
        if reply is None:
            shared.pump()
            return
        wait, epoch, self.clients = reply
        if self.epoch and self.epoch != epoch:
            said = "the shared quota's state in Redis was lost: the pool waits a window"
            shared.emit(
                notice("warning", "ratelimit", said, pool=self.name, time=shared.clock.now())
            )
        self.epoch = epoch
        if wait == 0:
            self._ticket = ticket
            shared.pump()
            if self._ticket is not None:  # not used in this turn of the loop: given back
                self._ticket = None
                self.forget(Start(0.0, ticket))
        else:
            self._next_ask = shared.clock.now() + wait
            shared.pump()

    def _admit(
        self, rule: Rule, state: State, now: float, ticket: str, kind: str, contends: bool
    ) -> tuple[float, str, int]:
        """One ask for a start: the wait (0: admitted), the state's epoch, the clients
        seen lately."""
        me, epoch = self.shared.id, state["epoch"]
        if self.epoch and self.epoch != epoch:
            # The state was lost (or this client last saw another): the starts it held
            # are unknown.
            rule.paused_until = max(rule.paused_until, now + rule.span)
        if contends:
            rule.contended_at = now
        seen = state.get("clients", {})
        seen = state["clients"] = {
            c: t for c, t in seen.items() if t > now - max(4 * rule.span, 10.0)
        }
        seen[me] = now
        at = self._line(rule, state, now, kind, rule.next_start(now, paced=kind != "i"))
        # The first round: until a client has judged its first answers, no more start
        # than one client would send, so that told far more than allowed, four processes
        # send one round, not four, before they know.
        first = state.setdefault("first", now + FIRST_HOLD)
        if now < first and len(rule.log) >= self.shared.first_round:
            at = max(at, min(first, now + rule.margin))  # asked again soon: it may settle
        if at <= now:
            rule.start(now, ticket)
            firsts = state.setdefault("firsts", [])
            if now < first and not self._settled and me not in firsts:
                firsts.append(me)  # (a client that judged its part is not waited for)
            state.get("line", {}).pop(me, None)
            return 0.0, epoch, len(seen)
        # A process gone leaves the line a margin after it was due to ask again.
        state.setdefault("gone", {})[me] = at + rule.margin
        return at - now, epoch, len(seen)

    def _line(self, rule: Rule, state: State, now: float, kind: str, at: float) -> float:
        """The line of processes waiting for this pool: interactive ones first, then by
        when each joined (a process that had a start joins again at the back:
        round-robin). The free starts go to the first waiters, one each; the others ask
        again a moment later."""
        me = self.shared.id
        line, gone = state.setdefault("line", {}), state.setdefault("gone", {})
        for client in [c for c, t in gone.items() if t < now]:
            del gone[client]
            line.pop(client, None)
        line[me] = min(line.get(me, math.inf), now + (_BULK if kind == "b" else 0))
        ahead = sum(1 for c, place in line.items() if (place, c) < (line[me], me))
        if at <= now and ahead:
            free = rule.rate - rule.usage(now)[0]
            if (kind != "i" and rule.contended(now)) or now < rule.recovering_until:
                free = 1
            if free <= ahead:
                at = now + min(rule.margin, 0.25)
        return at

    def rule(self, state: State, now: float) -> Rule:
        """The shared rule as ``state`` holds it at ``now`` (its log: the last two spans)."""
        local = self.local
        rule = Rule(local.limit, local.window, local.margin, adaptive=local.adaptive)
        rule._first = False  # each process judges its own first round
        for name in _KEPT:
            setattr(rule, name, state.get(name, getattr(rule, name)))
        keep = now - 2 * rule.span
        rule.log = deque(
            Start(t, ticket, out) for t, ticket, out in state.get("log", ()) if t > keep
        )
        return rule

    def mirror(self, rule: Rule) -> None:
        """What the shared rule allows now, for the pool's own (on the client's clock)."""
        self.rate, self.proven = rule.rate, rule.proven
        self.paused_until = rule.paused_until - self.shared.offset

    def settle(self) -> None:
        """This process judged its first round: the others' first starts may go."""
        if not self._settled:
            self._settled = True
            me = self.shared.id

            def settled(rule: Rule, state: State, now: float) -> None:
                firsts = [c for c in state.get("firsts", ()) if c != me]
                state["firsts"] = firsts
                if not firsts:  # over once every client with starts in it judged its part
                    state["first"] = -math.inf

            self.shared.spawn(self._quietly(settled))

    def forget(self, start: Start) -> None:
        """A start that spent nothing (refused, or never sent) leaves the shared log."""
        if start.ticket is not None:
            ticket = start.ticket

            def forget(rule: Rule, state: State, now: float) -> None:
                rule.log = deque(s for s in rule.log if s.ticket != ticket)

            self.shared.spawn(self._quietly(forget))

    def learn(self, verdict: Verdict) -> None:
        """What a round of this process's answers taught, for every process."""
        if self._fallback is not None and self.shared.down_since is not None:
            self._fallback.apply(verdict)
            return
        offset = self.shared.offset
        at, end, until = (t + offset for t in (verdict.at, verdict.end, verdict.until))
        self.shared.spawn(self._learn(dataclasses.replace(verdict, at=at, end=end, until=until)))

    async def _learn(self, verdict: Verdict) -> None:
        def learn(rule: Rule, state: State, now: float) -> bool:
            again = unanswered(rule, verdict, now)
            rule.adaptive = rule.adaptive and not again  # the pause now, the rate later
            rule.apply(verdict)
            return again

        with contextlib.suppress(Exception):  # a refusal: the next ask raises it
            while True:
                await self._flush()  # what this process knows goes first
                if not await self.shared.run(self, learn):
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
        tickets, self._answered = set(self._answered), []

        def ok(rule: Rule, state: State, now: float) -> None:
            for start in rule.log:
                if start.ticket in tickets:
                    start.outcome = "ok"

        if tickets:
            await self._quietly(ok)

    async def _quietly(self, change: Change[None]) -> None:
        with contextlib.suppress(Exception):  # a refusal: the next ask raises it
            await self.shared.run(self, change)

    def fall_back(self, now: float, share: int) -> None:
        """Redis stopped answering: keep to ``limit / share`` alone, after a window."""
        rule = self.local
        limit = max(1, rule.rate // share)
        self._fallback = Rule(
            limit, rule.window * max(1, math.ceil(share / rule.rate)), rule.margin
        )
        self._fallback.paused_until = now + rule.span

    def rejoin(self) -> list[float]:
        """Redis answers again: the starts made alone, for the shared log."""
        alone, self._fallback = self._fallback, None
        return [start.time for start in alone.log] if alone is not None else []
