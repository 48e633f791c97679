"""A client's life: unopened, opened in one event loop, closed.

The one home of "may this client still be used?": :class:`Lifetime` is held by the client
(and shared by the views :meth:`AsyncMagisterium.with_options` makes), as httpx keeps its
client's state on the client. A closed client cannot be reopened; a client opened in an
event loop that has ended (an earlier ``asyncio.run()``) counts as closed: its
connections ended with that loop.
"""

from __future__ import annotations

import asyncio
import enum

from magisterium_async._errors import ClientClosedError

__all__ = ["CLOSED_MESSAGE", "OTHER_LOOP_MESSAGE", "ClientState", "Lifetime"]

CLOSED_MESSAGE = "the client is closed; create a new AsyncMagisterium"
OTHER_LOOP_MESSAGE = (
    "the client was opened in another event loop, which has ended (an earlier "
    "asyncio.run()?); its connections ended with it. Create the client in the loop that "
    "uses it: `async with AsyncMagisterium() as client:` inside each asyncio.run()"
)


class ClientState(enum.Enum):
    """Where a client is in its life: a closed client cannot be reopened."""

    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class Lifetime:
    """One client's state, and the event loop its first call bound it to."""

    __slots__ = ("_loop", "state")

    def __init__(self) -> None:
        self.state = ClientState.UNOPENED
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<Lifetime {self.state.value}>"

    @property
    def is_closed(self) -> bool:
        """Whether the client was closed."""
        return self.state is ClientState.CLOSED

    def check_not_closed(self) -> None:
        """:class:`ClientClosedError` if the client was closed."""
        if self.state is ClientState.CLOSED:
            raise ClientClosedError(CLOSED_MESSAGE)

    def open(self) -> None:
        """Before each call: bind the client to the running loop on its first call, and
        raise :class:`ClientClosedError` if it is closed or its loop has ended (it then
        counts as closed)."""
        self.check_not_closed()
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop, self.state = loop, ClientState.OPENED
        elif self._loop is not loop:
            self.state = ClientState.CLOSED
            raise ClientClosedError(OTHER_LOOP_MESSAGE)

    def close(self) -> None:
        """The client is closed, for good."""
        self.state = ClientState.CLOSED
