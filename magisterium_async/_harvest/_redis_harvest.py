"""One harvest split over many workers (processes, hosts), coordinated through Redis.

Every worker runs the ordinary harvest (:mod:`._harvest`) with its own sqlite state and
output, on the same queries. Redis decides who does what, atomically (``HSETNX``: the
first to claim owns it)::

    P:harvest:{JOB}:queries    hash: query -> the worker that searches it
    P:harvest:{JOB}:documents  hash: document id -> the worker that fetches it
    P:harvest:{JOB}:epoch      made once; gone or changed means the state was lost

A worker only sees the queries it owns (:func:`claimed_queries` filters the input) and
only fetches the ids it owns (:class:`CoordinatedClient` filters each search's results),
so every query is searched once and every document fetched once over all the workers.

A claim belongs to a worker *identity* that outlives its process: a hash of the host name
and the path of its state file. Done-ness stays where it always was, in that worker's
state, so a worker that dies leaves its claims to itself: run it again with ``--resume``
(same state) and it finishes them; claiming again what it already owns is allowed. A
worker's claims are never taken over by another worker (a state that is never resumed
leaves its unfinished queries undone; that is what ``--resume`` is for).

If Redis fails, or its state was lost (a restart without persistence), the harvest stops
with :class:`SharedStateError`; nothing is lost, every worker's state is on disk. On every
start a worker first registers what its state already holds (:meth:`Coordinator.hydrate`),
so a resumed harvest rebuilds the claims even in an empty Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from magisterium_async._errors import SharedStateError
from magisterium_async._harvest._batch import items_of
from magisterium_async._harvest._state import recorded_items
from magisterium_async._models import Document, SearchResult
from magisterium_async._redis import connect, redis_errors

if TYPE_CHECKING:
    from magisterium_async._ratelimit import SchedulerStats

__all__ = [
    "CoordinatedClient",
    "Coordinator",
    "SharedStateError",
    "claimed_queries",
    "worker_identity",
]

_BATCH = 500

# KEYS: claims hash, epoch. ARGV: worker, known epoch ('' first), new epoch, items...
# Returns {epoch, lost (0/1), the items this worker owns...}.
_CLAIM = """
local epoch = redis.call('GET', KEYS[2])
local lost = 0
if not epoch then
  epoch = ARGV[3]
  redis.call('SET', KEYS[2], epoch)
  if ARGV[2] ~= '' then lost = 1 end
elseif ARGV[2] ~= '' and ARGV[2] ~= epoch then
  lost = 1
end
local out = {epoch, lost}
if lost == 1 then return out end
for i = 4, #ARGV do
  local item = ARGV[i]
  if redis.call('HSETNX', KEYS[1], item, ARGV[1]) == 1
     or redis.call('HGET', KEYS[1], item) == ARGV[1] then
    out[#out + 1] = item
  end
end
return out
"""


def worker_identity(state: str | os.PathLike[str] | None) -> str:
    """A worker's durable name: its host and state file (a fresh one without a state)."""
    if state is None:
        return uuid.uuid4().hex[:16]
    where = f"{socket.gethostname()}:{os.path.abspath(os.fspath(state))}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


class Coordinator:
    """The claims of one harvest job in Redis, for one worker."""

    def __init__(
        self,
        url: str,
        job: str,
        worker: str,
        *,
        timeout: float = 5.0,
        prefix: str = "magisterium",
    ) -> None:
        self.url = url
        self.worker = worker
        self.timeout = timeout
        self._redis = connect(url, timeout)
        self._errors = redis_errors()
        self._claim = self._redis.register_script(_CLAIM)
        base = f"{prefix}:harvest:{{{job}}}"
        self._queries = f"{base}:queries"
        self._documents = f"{base}:documents"
        self._epoch_key = f"{base}:epoch"
        self._epoch = ""
        self.skipped_queries = 0
        """Queries left to the workers that claimed them first."""
        self.skipped_ids = 0
        """Ids found here and left to the workers that found them first."""

    async def _call(self, key: str, items: Sequence[str]) -> set[str]:
        args: list[Any] = [self.worker, self._epoch, uuid.uuid4().hex, *items]
        try:
            reply = await asyncio.wait_for(
                self._claim(keys=[key, self._epoch_key], args=args), self.timeout
            )
        except self._errors as exc:
            raise SharedStateError(
                f"the harvest's Redis at {self.url} failed ({exc or type(exc).__name__}); "
                "every worker's state is intact: run the harvest again with --resume"
            ) from exc
        epoch = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        if int(reply[1]):
            raise SharedStateError(
                f"the harvest's state in Redis at {self.url} was lost (restarted without "
                "persistence?); every worker's state is intact: run the harvest again with "
                "--resume"
            )
        self._epoch = epoch
        return {item.decode() if isinstance(item, bytes) else str(item) for item in reply[2:]}

    async def claim_queries(self, queries: Sequence[str]) -> set[str]:
        """The ``queries`` this worker searches (new claims, or its own already)."""
        return await self._call(self._queries, queries)

    async def claim_ids(self, ids: Sequence[str]) -> set[str]:
        """The document ``ids`` this worker fetches (new claims, or its own already)."""
        mine: set[str] = set()
        for start in range(0, len(ids), _BATCH):
            mine |= await self._call(self._documents, ids[start : start + _BATCH])
        return mine

    async def hydrate(self, state: str | os.PathLike[str]) -> None:
        """Claim for this worker what its state file already holds (a resumed worker).

        Read-only (:func:`._state.recorded_items`).
        """
        queries, ids = await recorded_items(state)
        for start in range(0, len(queries), _BATCH):
            await self._call(self._queries, queries[start : start + _BATCH])
        await self.claim_ids(ids)

    async def aclose(self) -> None:
        """Close the connection."""
        await self._redis.aclose()


async def claimed_queries(
    queries: Iterable[str] | AsyncIterable[str], coordinator: Coordinator, *, batch: int = 1
) -> AsyncIterator[str]:
    """The queries of ``queries`` this worker owns, in order (claimed ``batch`` at a time)."""
    pending: list[str] = []

    async def flush() -> AsyncIterator[str]:
        mine = await coordinator.claim_queries(pending)
        for query in pending:
            if query in mine:
                yield query
            else:
                coordinator.skipped_queries += 1
        pending.clear()

    async for query in items_of(queries):
        pending.append(query)
        if len(pending) >= batch:
            async for claimed in flush():
                yield claimed
    if pending:
        async for claimed in flush():
            yield claimed


class CoordinatedClient:
    """A client whose searches return only the results this worker is to fetch."""

    def __init__(self, client: Any, coordinator: Coordinator) -> None:
        self._client = client
        self._coordinator = coordinator

    @property
    def stats(self) -> SchedulerStats:
        stats: SchedulerStats = self._client.stats
        return stats

    async def search(self, query: str) -> list[SearchResult]:
        results: list[SearchResult] = await self._client.search(query)
        ids = list(dict.fromkeys(r.id for r in results))
        mine = await self._coordinator.claim_ids(ids) if ids else set()
        self._coordinator.skipped_ids += len(ids) - len(mine)
        return [r for r in results if r.id in mine]

    async def fetch(self, document_id: str) -> Document | None:
        document: Document | None = await self._client.fetch(document_id)
        return document
