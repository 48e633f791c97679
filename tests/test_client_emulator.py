"""The client against the emulator: real exchanges, row by row of the contract.

Every test runs against the emulator in each dialect: the service's own (0.2.6), A2A 0.3's
card, and A2A 1.0; the client is made the same way each time (``protocol="auto"``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

import magisterium_async as m
from magisterium_async.testing import Emulator, EmulatorConfig, Fault, RateLimitConfig
from magisterium_async.testing.emulator._config import Protocol


@pytest.fixture(params=["0.2.6", "0.3", "1.0"])
def protocol(request: pytest.FixtureRequest) -> Protocol:
    """The dialect the emulator speaks."""
    value: Protocol = request.param
    return value


@pytest.fixture
async def emulator(protocol: Protocol) -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        tokens={"emu-token": "pro", "free-token": "free"},
        rate_limits=None,
        today=lambda: dt.date(2026, 3, 19),
        protocol=protocol,
    )
    async with Emulator(config) as emu:
        yield emu


@pytest.fixture
async def client(emulator: Emulator) -> AsyncIterator[m.AsyncMagisterium]:
    async with m.AsyncMagisterium(
        token=emulator.token, base_url=emulator.base_url, rate_limits=m.RateLimits.unlimited()
    ) as c:
        yield c


async def test_every_skill(client: m.AsyncMagisterium) -> None:
    answer = await client.ask("What does Lumen Gentium teach about the Church?")
    assert answer.text and answer.citations and answer.related_questions
    assert answer.citations[0].document_title
    follow_up = await client.ask("And the laity?", context_id=answer.context_id)
    assert follow_up.context_id == answer.context_id
    hits = await client.search("Lumen Gentium")
    assert hits[0].title == "Lumen Gentium"
    document = await client.fetch(hits[0].id)
    assert document is not None and document.id == hits[0].id and document.text
    assert await client.fetch("999999999") is None
    assert await client.mass_readings("today")
    assert "Joseph" in (await client.saints(dt.date(2026, 3, 19)) or "")
    assert await client.saints("today") == await client.saints(dt.date(2026, 3, 19))
    assert await client.mass_readings("the day after never") is None


async def test_tasks_get_and_cancel(client: m.AsyncMagisterium) -> None:
    task = await client.send_message("grace", skill_id="document_search")
    assert (await client.get_task(task.id)).id == task.id
    with pytest.raises(m.InvalidParamsError, match="Invalid state transition"):
        await client.cancel_task(task.id)
    with pytest.raises(m.TaskNotFoundError):
        await client.get_task("no-such-task")


async def test_unknown_skill_and_failed_task(client: m.AsyncMagisterium) -> None:
    with pytest.raises(m.SkillNotFoundError):
        await client.send_message("x", skill_id="no_such_skill")
    with pytest.raises(m.TaskFailedError, match="index offline") as info:
        await client.search("__fail__: index offline")
    assert info.value.task.state == "failed"


async def test_wrong_token_and_free_plan(emulator: Emulator) -> None:
    for token, error in (("wrong", m.AuthenticationError), ("free-token", m.PlanRequiredError)):
        async with m.AsyncMagisterium(token=token, base_url=emulator.base_url) as client:
            with pytest.raises(error) as info:
                await client.search("grace")
            assert token not in str(info.value)
    assert emulator.stats.count(outcome="unauthorized") == 1
    assert emulator.stats.count(outcome="forbidden") == 1


async def test_faults_are_retried_and_counted(
    emulator: Emulator, client: m.AsyncMagisterium
) -> None:
    emulator.script(Fault.http_502(), Fault.drop(), Fault.internal_error())
    policy = m.RetryPolicy(max_retries=3, initial_backoff=0.001, max_backoff=0.002)
    async with m.AsyncMagisterium(
        token=emulator.token,
        base_url=emulator.base_url,
        rate_limits=m.RateLimits.unlimited(),
        retry_policy=policy,
    ) as fast:
        assert await fast.search("grace")
    assert emulator.stats.count(skill="document_search", outcome="ok") == 1
    assert emulator.stats.count(outcome="fault") == 3


async def test_rate_limit_pauses_and_retries_within_the_quota(protocol: Protocol) -> None:
    # The server allows 3 per 0.5 s; the client believes 10: it meets 429s, waits them out
    # and every call still succeeds.
    config = EmulatorConfig(
        rate_limits=RateLimitConfig(
            default=3, expensive=1, period=0.5, retry_after_rounding="exact"
        ),
        protocol=protocol,
    )
    async with (
        Emulator(config) as emu,
        m.AsyncMagisterium(
            token=emu.token, base_url=emu.base_url, rate_limits=m.RateLimits(10, 1, period=0.5)
        ) as client,
    ):
        for item in [i async for i in client.search_many([f"grace {i}" for i in range(8)])]:
            assert item.error is None
        assert client.stats.default.rate_limited >= 1
        assert emu.stats.count(skill="document_search", outcome="ok") == 8


async def test_agent_card(client: m.AsyncMagisterium, protocol: Protocol) -> None:
    card = await client.agent_card()
    assert client.protocol == ("1.0" if protocol == "1.0" else "0.3")
    assert {s.id for s in card.skills} >= {
        "catholic_qa",
        "document_search",
        "document_fetch",
        "liturgical_readings",
        "saints_of_the_day",
    }


async def test_every_lookup_returns_what_the_service_sent(client: m.AsyncMagisterium) -> None:
    pope = await client.pope_lookup("Pius X")
    assert isinstance(pope, m.Lookup)
    assert pope.text == "Pope Pius X (Giuseppe Melchiorre Sarto), 1903-1914"
    assert pope.data[0]["birth_name"] == "Giuseppe Melchiorre Sarto"
    assert pope.task.state == m.TaskState.COMPLETED
    assert pope.task.history[0].metadata == {"skillId": "pope_lookup"}
    saint = await client.saint_lookup("Thérèse of Lisieux")
    assert saint.data[0]["feast_day"] == "10-01"
    person = await client.person_lookup("Basil Hume")
    assert person.data[0]["name"] and person.text
    diocese = await client.diocese_lookup("Westminster")
    assert diocese.data[0]["name"] and diocese.text
    statistics = await client.diocese_statistics_lookup("Westminster")
    assert statistics.data[0]["rows"] and len(statistics.data[0]["metrics"]) == 19
    # A name the service does not know: its own words, no data, no error.
    nobody = await client.pope_lookup("nobody at all")
    assert nobody.text == "No pope found." and nobody.data == []


def test_every_lookup_of_the_skill_table_is_a_client_method() -> None:
    from magisterium_async._skills import LOOKUPS

    assert len(LOOKUPS) == 5
    for skill in LOOKUPS:
        method = getattr(m.AsyncMagisterium, skill.id)
        assert method.__annotations__["return"] in ("Lookup", m.Lookup), skill.id
        assert method.__doc__, skill.id
