"""Virtual time for tests: :class:`VirtualClock` runs minute-long quotas in milliseconds:
time jumps to the next deadline whenever nothing else can run (or, with
``autojump=False``, stands still until a test moves it), and sleepers wake in time order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math

# A bound on the loop iterations of one settle, so a task that busy-yields cannot hang a test.
_SETTLE_LIMIT = 10_000
# Iterations of one settle on loops that do not expose their run queue (uvloop).
_SETTLE_FALLBACK = 100
# Loop iterations in a row with nothing but the clock's watch ready before time jumps: one
# would do on the default loop; a few more let a callback that another one scheduled (a
# done future waking its task) run first.
_IDLE_ROUNDS = 3


class VirtualClock:
    """Deterministic virtual time on a real asyncio loop, for tests; nothing really waits.

    With ``autojump`` (the default), whenever the loop has nothing else to run and a task
    sleeps on this clock, time jumps to the earliest deadline and that sleeper wakes, like
    trio's ``MockClock(autojump_threshold=0)``: a retried call or a minute of quota just
    finishes, in milliseconds, with no code to move the clock::

        clock = VirtualClock()
        client = AsyncMagisterium(..., clock=clock)   # its transport faked in memory
        results = await asyncio.gather(*(client.search(q) for q in queries))
        print(clock.now())                # the virtual seconds the quota took

    With ``autojump=False`` time stands still until :meth:`advance` or
    :meth:`run_until_idle` moves it, for a test that looks at each moment on the way.
    Either way sleepers wake one at a time in deadline order (ties: in the order they went
    to sleep), and every task that can run does so before the next one wakes, so a test
    reads the same on every run.

    "Can run" means: has a callback ready in the loop. Real I/O, threads and real timers (a
    socket, ``asyncio.to_thread``, ``asyncio.sleep(1)``) are not waited for (time may jump
    while they are under way), so pair it with an in-memory transport
    (``testing.MockTransport``), not a server on a socket. ``sleep(math.inf)`` sleeps until
    cancelled. One clock serves one event loop.

    Arguments:
        start: the virtual time to begin at, in seconds.
        autojump: jump to the next deadline by itself whenever the loop is idle.
    """

    __slots__ = ("_autojump", "_now", "_seq", "_sleepers", "_watch")

    def __init__(self, start: float = 0.0, *, autojump: bool = True) -> None:
        self._now = float(start)
        self._autojump = autojump
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        # The loop callback that looks for an idle loop, while anybody sleeps (autojump).
        self._watch: asyncio.Handle | None = None

    @property
    def autojump(self) -> bool:
        """Whether time jumps to the next deadline by itself when the loop is idle."""
        return self._autojump

    def now(self) -> float:
        """The virtual time, in seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has moved ``seconds`` forward; just yield for ``<= 0``."""
        if not seconds > 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        if self._autojump and self._watch is None:
            self._watch = loop.call_soon(self._look, loop, 0)
        await future  # a cancelled sleeper's future is cancelled too, and skipped when due

    @property
    def sleepers(self) -> int:
        """How many tasks are asleep on this clock."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    @property
    def next_wakeup(self) -> float | None:
        """The deadline of the next sleeper to wake, or ``None`` when nobody sleeps."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, waking every sleeper due by then, in order.

        A sleeper woken on the way that goes back to sleep within the interval wakes again
        before this returns; time ends exactly ``seconds`` later.

        Arguments:
            seconds: how far to move, ``>= 0``.
        """
        if not seconds >= 0:
            raise ValueError(f"cannot move time backwards or by {seconds!r}")
        target = self._now + seconds
        await self._settle()
        while (deadline := self.next_wakeup) is not None and deadline <= target:
            await self._wake_next()
        self._now = max(self._now, target)
        await self._settle()

    async def run_until_idle(self, *, max_wakeups: int = 1_000_000) -> None:
        """Move time forward, sleeper by sleeper, until nobody sleeps (or sleeps forever).

        Arguments:
            max_wakeups: raise ``RuntimeError`` after this many wake-ups (something keeps
                sleeping).
        """
        await self._settle()
        for _ in range(max_wakeups):
            deadline = self.next_wakeup
            if deadline is None or math.isinf(deadline):
                return
            await self._wake_next()
        raise RuntimeError(f"VirtualClock: still busy after {max_wakeups} wake-ups")

    async def _wake_next(self) -> None:
        self._wake()
        await self._settle()

    def _wake(self) -> None:
        deadline, _, future = heapq.heappop(self._sleepers)
        self._now = max(self._now, deadline)
        future.set_result(None)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    def _look(self, loop: asyncio.AbstractEventLoop, idle_rounds: int) -> None:
        # Called by the loop once an iteration while anybody sleeps: after a few iterations
        # in a row with nothing else ready, every task waits (on this clock, or on something
        # this clock cannot see): time jumps to the next deadline. asyncio has no "the loop
        # is idle" hook; its run queue tells, where it exists (not on uvloop: there, a fixed
        # number of iterations stands in for it).
        self._watch = None
        self._drop_cancelled()
        if not self._sleepers or math.isinf(self._sleepers[0][0]) or loop.is_closed():
            return  # nothing to jump to; the next sleep() looks again
        ready = getattr(loop, "_ready", None)
        idle_rounds = idle_rounds + 1 if not ready else 0
        if idle_rounds >= (_IDLE_ROUNDS if ready is not None else _SETTLE_FALLBACK):
            self._wake()
            idle_rounds = 0
        self._watch = loop.call_soon(self._look, loop, idle_rounds)

    async def _settle(self) -> None:
        # asyncio has no public "is the loop idle?"; its run queue tells, where it exists.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        rounds = _SETTLE_LIMIT if ready is not None else _SETTLE_FALLBACK
        for _ in range(rounds):
            await asyncio.sleep(0)
            if ready is not None and not any(h is not self._watch for h in ready):
                return

    def __repr__(self) -> str:
        jump = "" if self._autojump else ", autojump=False"
        return f"VirtualClock(now={self._now!r}, sleepers={self.sleepers}{jump})"
