"""A pool's admissions from its remote gate: one ask at a time, used at once or given back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from magisterium_async._ratelimit._admissions import Admissions
from magisterium_async._ratelimit._lines import Priority
from magisterium_async._ratelimit._log import Start


class Gate:
    """A gate that admits when the test says so, and records what it is told."""

    def __init__(self) -> None:
        self.asks = 0
        self.told: list[tuple[Priority, int]] = []
        self.given_back: list[str] = []
        self.answered_starts: list[Start] = []
        self.admit_now = asyncio.Event()
        self.asked = asyncio.Event()
        self.gave_back = asyncio.Event()

    async def admit(self, line: Callable[[], tuple[Priority, int]]) -> str:
        self.asks += 1
        self.told.append(line())
        self.asked.set()
        await self.admit_now.wait()
        return f"ticket-{self.asks}"

    def give_back(self, ticket: str) -> None:
        self.given_back.append(ticket)
        self.gave_back.set()

    def answered(self, start: Start) -> None:
        self.answered_starts.append(start)


async def test_the_line_asks_once_at_a_time_and_tells_the_gate_how_many_wait() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    for _ in range(3):  # three pumps while the first ask is out
        assert admissions.ready(lambda: ("bulk", 7), lambda: None) is False
    await gate.asked.wait()
    assert admissions.ready(lambda: ("bulk", 7), lambda: None) is False
    assert gate.asks == 1 and gate.told == [("bulk", 7)]
    await admissions.aclose()


async def test_an_admission_the_head_takes_at_once_is_kept() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    taken: list[str] = []
    started = asyncio.Event()

    def pump() -> None:  # the pool's pump: the head starts now, with the admission
        assert admissions.ready(lambda: ("interactive", 1), pump) is True
        taken.append(admissions.take())
        started.set()

    admissions.ready(lambda: ("interactive", 1), pump)
    gate.admit_now.set()
    await started.wait()  # the ask's step ends (given back or not) before this resumes
    assert taken == ["ticket-1"] and gate.given_back == []


async def test_an_admission_nobody_takes_in_that_turn_is_given_back() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    admissions.ready(lambda: ("interactive", 1), lambda: None)  # the waiter left meanwhile
    gate.admit_now.set()
    await gate.gave_back.wait()
    assert gate.given_back == ["ticket-1"]
    assert admissions.ready(lambda: ("interactive", 1), lambda: None) is False  # asks anew
    await admissions.aclose()


async def test_closing_stops_the_ask_in_flight() -> None:
    gate = Gate()
    admissions = Admissions(gate)
    admissions.ready(lambda: ("bulk", 1), lambda: None)
    await gate.asked.wait()
    await admissions.aclose()  # returns once the ask is cancelled and done
    gate.admit_now.set()
    assert gate.given_back == [] and admissions.ready(lambda: ("bulk", 1), lambda: None) is False
    await admissions.aclose()
