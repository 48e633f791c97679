"""What the consumer has been given: the one home of a harvest's delivery bookkeeping.

Ids noted as delivered (and where the consumer's output file now ends) wait here until a
transaction takes them to the state: the next fetch's own (:meth:`Deliveries.take`), one
of their own while the pipeline runs (:meth:`Deliveries.commit`, :meth:`Deliveries.keep`),
or, after the pipeline is gone, one on the state reopened (:meth:`Deliveries.commit_to`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import anyio

from magisterium_async._harvest._jsonl import OutputMark
from magisterium_async._harvest._state import HarvestState

__all__ = ["Deliveries"]


class Deliveries:
    """Documents delivered and not yet committed to the state."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._output: OutputMark | None = None
        self._noted: anyio.Event | None = None
        self._open = True

    @property
    def pending(self) -> bool:
        """Whether anything waits to be committed."""
        return bool(self._ids) or self._output is not None

    def note(self, document_ids: Iterable[str], output: OutputMark | None = None) -> None:
        """Note documents as delivered (and where the output now ends); committed promptly."""
        self._ids.extend(document_ids)
        if output is not None:
            self._output = output
        if self._noted is not None:
            self._noted.set()

    def take(self) -> tuple[list[str], OutputMark | None]:
        """What waits, handed to a transaction about to commit it (``record_fetches``)."""
        ids, self._ids = self._ids, []
        output, self._output = self._output, None
        return ids, output

    async def commit(self, state: HarvestState) -> None:
        """Commit what waits, in a transaction of its own (nothing when nothing waits)."""
        if self.pending:
            await state.record_fetches((), *self.take())

    async def commit_to(self, path: str | os.PathLike[str] | None) -> None:
        """Commit what waits to the state at ``path``, reopened (the pipeline is gone);
        without a path (a temporary state, gone too) it is dropped."""
        if self.pending and path is not None:
            with anyio.CancelScope(shield=True):
                state = await HarvestState.open(path, new_run=False)
                try:
                    await self.commit(state)
                finally:
                    await state.aclose()
        self.take()

    def close(self) -> None:
        """No more deliveries through the pipeline: :meth:`keep` ends."""
        self._open = False
        if self._noted is not None:
            self._noted.set()

    async def keep(self, state: HarvestState) -> None:
        """Commit each delivery as it comes, until :meth:`close`.

        A delivery waits for one transaction, not for the next fetch: while the pipeline
        stalls (a quota window) a kill must not lose what the consumer already has.
        """
        while self._open:
            self._noted = anyio.Event()
            await self.commit(state)
            if self._open and not self.pending:
                await self._noted.wait()
