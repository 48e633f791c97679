"""A client in memory for the harvest's tests: searches and fetches without a server."""

from __future__ import annotations

import asyncio

from magisterium_async import Document, SearchResult
from magisterium_async._ratelimit import PoolStats, SchedulerStats

__all__ = ["FakeClient"]


class FakeClient:
    """``per_query`` results per query; ids starting ``missing`` are not found."""

    def __init__(
        self,
        *,
        per_query: int = 3,
        size: int = 500,
        hang: str | None = None,
        crash: str | None = None,
    ) -> None:
        self.per_query = per_query
        self.size = size
        self.hang = hang
        self.crash = crash
        self.hanging = asyncio.Event()
        self.rate_limited = 0

    @property
    def stats(self) -> SchedulerStats:
        def pool(name: str, rate_limited: int = 0) -> PoolStats:
            return PoolStats(name, 0, rate_limited, 0, 0.0, 0.0, 0.0, 0, 0)

        default = pool("default", self.rate_limited)
        return SchedulerStats(default, pool("expensive"), pool("unmetered"), 0, 1)

    async def search(self, query: str) -> list[SearchResult]:
        await asyncio.sleep(0)
        return [
            SearchResult(id=f"{query}/{k}", url="https://x", title=query)
            for k in range(self.per_query)
        ]

    async def fetch(self, document_id: str) -> Document | None:
        await asyncio.sleep(0)
        if document_id == self.hang:
            self.hanging.set()
            await asyncio.Event().wait()
        if document_id == self.crash:
            raise RuntimeError("bug")
        if document_id.startswith("missing"):
            return None
        return Document(id=document_id, title=None, author=None, ref=None, text="x" * self.size)


class HeldClient(FakeClient):
    """A :class:`FakeClient` whose fetches, once :meth:`hold` is called, wait until the
    test answers them: the test decides when each answer arrives."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.sent: list[str] = []
        """Every fetch sent, in order (a repeat is a request paid twice)."""
        self.held: dict[str, asyncio.Future[None]] = {}
        self._holding = False
        self._more = asyncio.Event()

    def hold(self) -> None:
        """From now on each fetch waits for :meth:`answer` (or its cancellation)."""
        self._holding = True

    async def unanswered(self, count: int) -> list[str]:
        """The first ``count`` fetches held and not answered, once that many are."""
        while len(waiting := [i for i, answer in self.held.items() if not answer.done()]) < count:
            self._more.clear()
            await self._more.wait()
        return waiting[:count]

    def answer(self, ids: list[str]) -> None:
        """Let the answers of ``ids`` arrive, all in the same step of the event loop."""
        for document_id in ids:
            self.held[document_id].set_result(None)

    async def fetch(self, document_id: str) -> Document | None:
        self.sent.append(document_id)
        if not self._holding:
            return await super().fetch(document_id)
        self.held[document_id] = asyncio.get_running_loop().create_future()
        self._more.set()
        await self.held[document_id]
        # The answer arrives: returned to the harvest in this very step.
        return Document(id=document_id, title=None, author=None, ref=None, text="x")
