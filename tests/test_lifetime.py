"""A client's life: bound to the loop of its first call, closed for good."""

from __future__ import annotations

import asyncio

import pytest

import magisterium_async as m
from magisterium_async._lifetime import ClientState, Lifetime
from magisterium_async.testing import MockRequest, MockResponse, MockTransport


async def _open(lifetime: Lifetime) -> None:
    lifetime.open()


def test_a_lifetime_bound_to_an_ended_loop_counts_as_closed() -> None:
    lifetime = Lifetime()
    assert lifetime.state is ClientState.UNOPENED
    asyncio.run(_open(lifetime))
    assert lifetime.state is ClientState.OPENED
    with pytest.raises(m.ClientClosedError, match="opened in another event loop"):
        asyncio.run(_open(lifetime))
    assert lifetime.is_closed


async def test_a_closed_lifetime_stays_closed() -> None:
    lifetime = Lifetime()
    lifetime.open()
    lifetime.open()  # the same loop: still open
    lifetime.close()
    with pytest.raises(m.ClientClosedError, match="the client is closed"):
        lifetime.open()
    with pytest.raises(m.ClientClosedError):
        lifetime.check_not_closed()


async def test_closing_a_client_closes_its_views_and_they_say_so() -> None:
    def answer(request: MockRequest) -> MockResponse:
        return MockResponse(status=500)

    client = m.AsyncMagisterium(token="t", transport=MockTransport(answer))
    view = client.with_options(max_retries=0)
    assert not view.is_closed
    await client.aclose()
    assert view.is_closed
    with pytest.raises(m.ClientClosedError, match="the client is closed"):
        await view.search("grace")
    with pytest.raises(m.ClientClosedError):
        await view.agent_card()
    with pytest.raises(m.ClientClosedError):
        async with client:
            pass
