"""What a harvest yields and counts: :class:`HarvestedDocument` (a document and the
queries that found it), :class:`HarvestFailure` and :class:`HarvestStats`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple, cast

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._models import Document

__all__ = ["HarvestFailure", "HarvestStats", "HarvestedDocument"]


class HarvestedDocument(Document, frozen=True, kw_only=True):
    """A :class:`Document` as a harvest yields it, with the queries that found it.

    ``queries`` holds every query whose answer, recorded before the document was handed
    over, contained it (in the order the queries were first read, over every run of a
    resumed harvest). A query answered *after* the document was handed over is not in it;
    :meth:`Harvest.found_by` reads them all from the state. Encoded (``msgspec``,
    :class:`JsonlWriter`, the command line) it is the document's fields plus ``"queries"``.
    """

    queries: tuple[str, ...] = ()


class HarvestFailure(NamedTuple):
    """A search or fetch that failed after the client's retries."""

    kind: Literal["search", "fetch"]
    input: object
    """The query (``kind == "search"``) or the document id (``"fetch"``)."""
    error: Exception


@dataclass
class HarvestStats:
    """Live counters of one harvest run; read them during and after the harvest."""

    # The client's clock: ``started``, ``finished`` and ``elapsed`` are times on it. Not
    # annotated, so no field of the dataclass (``dataclasses.asdict`` leaves it out).
    _clock = cast(Clock, LoopClock())

    queries: int = 0
    """Queries read from the input."""
    searched: int = 0
    """Searches answered in this run."""
    skipped_queries: int = 0
    """Queries not searched: answered in an earlier run, or repeated in the input."""
    repeated_queries: int = 0
    """Of :attr:`skipped_queries`, those repeated in this run's input (the same query
    read again): ``searched + skipped_queries - repeated_queries`` is the distinct
    queries of the input answered, now or before."""
    results: int = 0
    """Search results received, duplicates included."""
    unique_ids: int = 0
    """Document ids found for the first time (in this run or any earlier one)."""
    fetched: int = 0
    """Documents fetched in this run."""
    resumed: int = 0
    """Documents fetched by an earlier run and yielded now, without a request."""
    yielded: int = 0
    """Documents handed to the consumer."""
    not_found: int = 0
    """Ids the service answered "Document not found." for."""
    failed: int = 0
    """Searches and fetches that failed after retries (see :attr:`Harvest.failures`)."""
    rate_limited: int = 0
    """429 answers the client met (and waited out) during the harvest."""
    started: float | None = field(default=None, repr=False)
    finished: float | None = field(default=None, repr=False)

    @property
    def elapsed(self) -> float:
        """Seconds since the harvest started (until it finished)."""
        if self.started is None:
            return 0.0
        end = self.finished if self.finished is not None else self._clock.now()
        return end - self.started

    def start(self, clock: Clock) -> None:
        """Mark the start, on ``clock`` (the client's)."""
        self._clock = clock
        self.started = clock.now()

    def finish(self) -> None:
        """Mark the end, on the clock given to :meth:`start`."""
        self.finished = self._clock.now()
