"""The waiting line alone: whose turn is next (interactive first, round-robin over fairness
keys, first come first served within a key). Waiters hold a future: the tests are async."""

from __future__ import annotations

import itertools

from magisterium_async._ratelimit import Priority, WaitingLine
from magisterium_async._ratelimit._lines import Waiter

_seq = itertools.count()


def waiter(priority: Priority = "bulk", key: str | None = None) -> Waiter:
    return Waiter(next(_seq), 0.0, priority, key)


def order(line: WaitingLine) -> list[Waiter]:
    """Every turn, in the order the line hands them out."""
    out: list[Waiter] = []
    while line.head() is not None:
        out.append(line.pop())
    return out


async def test_interactive_calls_go_before_bulk_ones() -> None:
    line = WaitingLine()
    bulk = [waiter("bulk") for _ in range(3)]
    for w in bulk:
        line.push(w)
    person = waiter("interactive")
    line.push(person)
    assert line.head() is person
    assert order(line) == [person, *bulk]


async def test_fairness_keys_take_turns_within_a_priority() -> None:
    line = WaitingLine()
    a = [waiter(key="a") for _ in range(4)]
    b = [waiter(key="b") for _ in range(2)]
    none = waiter()
    for w in (*a, *b, none):
        line.push(w)
    assert order(line) == [a[0], b[0], none, a[1], b[1], a[2], a[3]]


async def test_a_key_with_many_waiting_never_holds_a_new_keys_first_call_back() -> None:
    line = WaitingLine()
    crowd = [waiter(key="crowd") for _ in range(1000)]
    for w in crowd:
        line.push(w)
    line.pop()  # the crowd's first turn
    newcomer = waiter(key="newcomer")
    line.push(newcomer)
    assert line.pop() is newcomer  # ahead of the crowd, which just had its turn
    assert line.pop() is crowd[1]


async def test_only_one_newcomer_goes_ahead_of_the_key_that_had_the_last_turn() -> None:
    line = WaitingLine()
    crowd = [waiter(key="crowd") for _ in range(10)]
    for w in crowd:
        line.push(w)
    line.pop()
    first, second = waiter(key="first"), waiter(key="second")
    line.push(first)
    line.push(second)  # behind the crowd: it had its turn before "first" went ahead
    assert order(line)[:4] == [first, crowd[1], second, crowd[2]]


async def test_a_key_that_had_the_last_turn_and_comes_back_stays_behind_a_newcomer() -> None:
    line = WaitingLine()
    a1 = waiter(key="a")
    line.push(a1)
    assert line.pop() is a1  # "a" leaves the rotation, nothing of it waiting
    a2, b1 = waiter(key="a"), waiter(key="b")
    line.push(a2)  # a batch feeds its calls one at a time
    line.push(b1)
    assert order(line) == [b1, a2]


async def test_first_come_first_served_within_a_key() -> None:
    line = WaitingLine()
    ws = [waiter("interactive", "k") for _ in range(5)]
    for w in ws:
        line.push(w)
    assert order(line) == ws


async def test_a_cancelled_waiter_is_skipped() -> None:
    line = WaitingLine()
    first, second = waiter(), waiter()
    line.push(first)
    line.push(second)
    first.future.cancel()
    assert line.waiting() == 1
    assert line.head() is second
    assert order(line) == [second]
    assert not line


async def test_a_key_whose_waiters_all_left_leaves_the_rotation() -> None:
    line = WaitingLine()
    gone = waiter(key="gone")
    stays = waiter(key="stays")
    line.push(gone)
    line.push(stays)
    line.remove(gone)
    assert line.waiting() == 1
    assert order(line) == [stays]


async def test_requeue_puts_a_waiter_back_in_its_place() -> None:
    line = WaitingLine()
    a1, a2, b1 = waiter(key="a"), waiter(key="a"), waiter(key="b")
    for w in (a1, a2, b1):
        line.push(w)
    taken = line.pop()
    assert taken is a1
    # Let through too early: it comes back ahead of later arrivals of its key, and its
    # key first in the rotation again.
    back = Waiter(a1.seq, a1.since, a1.priority, a1.key)
    line.requeue(back)
    assert order(line) == [back, b1, a2]


async def test_waiting_counts_the_calls_waiting() -> None:
    line = WaitingLine()
    assert line.waiting() == 0 and not line
    ws = [waiter("interactive"), waiter("bulk", "x"), waiter("bulk", "y")]
    for w in ws:
        line.push(w)
    assert line.waiting() == 3 and line
    line.pop()
    assert line.waiting() == 2


async def test_drain_takes_everyone_out() -> None:
    line = WaitingLine()
    ws = [waiter("interactive"), waiter("bulk", "x")]
    for w in ws:
        line.push(w)
    assert line.drain() == ws
    assert line.head() is None and line.waiting() == 0
