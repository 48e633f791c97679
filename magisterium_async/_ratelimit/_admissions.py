"""A pool's admissions from its remote gate (a shared quota's Redis).

While calls wait, the pool asks the gate for one start at a time on behalf of its line
(never one per call: the gate is told how many wait). An admission that comes back is
used by the line's head in the same turn of the loop, or given back: the gate logged its
start then, and a request sent later would not be where the shared log says.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from magisterium_async._errors import ClientClosedError
from magisterium_async._ratelimit._limiter import RemoteGate
from magisterium_async._ratelimit._lines import Priority
from magisterium_async._ratelimit._log import Start

__all__ = ["Admissions"]


class Admissions:
    """The admissions of one pool's :class:`RemoteGate`: asked for, held, used or given back."""

    __slots__ = ("_asking", "_tickets", "gate")

    def __init__(self, gate: RemoteGate) -> None:
        self.gate = gate
        self._asking: asyncio.Task[None] | None = None
        self._tickets: deque[str] = deque()

    def ready(self, line: Callable[[], tuple[Priority, int]], pump: Callable[[], None]) -> bool:
        """Whether an admission is in hand; if not, ask the gate for one (one ask at a
        time). ``line`` tells the gate the line's first priority and how many could start;
        ``pump`` is called once an admission comes, to use it."""
        if self._tickets:
            return True
        if self._asking is None:
            self._asking = asyncio.ensure_future(self._ask(line, pump))
        return False

    def take(self) -> str:
        """The admission in hand, for the start being made now."""
        return self._tickets.popleft()

    def answered(self, start: Start) -> None:
        """A request the gate admitted is over."""
        self.gate.answered(start)

    async def _ask(
        self, line: Callable[[], tuple[Priority, int]], pump: Callable[[], None]
    ) -> None:
        try:
            ticket = await self.gate.admit(line)
        except ClientClosedError:
            return  # closing: every waiter is told
        finally:
            self._asking = None
        self._tickets.append(ticket)
        pump()
        if ticket in self._tickets:  # not used in this turn of the loop: given back
            self._tickets.remove(ticket)
            self.gate.give_back(ticket)

    async def aclose(self) -> None:
        """Stop asking."""
        asking, self._asking = self._asking, None
        if asking is not None:
            asking.cancel()
            await asyncio.wait((asking,))
