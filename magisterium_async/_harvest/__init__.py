"""Batches and harvests: many searches and fetches at once, and a harvest that fetches
every document a list of queries finds once, resumable from a SQLite state, into a JSON
Lines file that holds each document once.

The parts, each one job: :mod:`._batch` (``search_many``/``fetch_many`` and the
background iterator they and the harvest share), :mod:`._harvest` (the :class:`Harvest`,
its run's stages and counts), :mod:`._state` (the state in SQLite and the documents it
keeps), :mod:`._lock` (one harvest at a time per state and per output), :mod:`._jsonl`
(the JSON Lines writer and the checks of the file it appends to).

This module is the subpackage's seam: the client, the command line and the tests import
from here.
"""

from magisterium_async._harvest._batch import (
    DEFAULT_CONCURRENCY,
    MAX_CONCURRENCY,
    Batch,
    BatchItem,
    fetch_many,
    search_many,
)
from magisterium_async._harvest._harvest import (
    Acknowledge,
    Harvest,
    HarvestFailure,
    HarvestStats,
    OnError,
    harvest,
    hold,
)
from magisterium_async._harvest._jsonl import JsonlWriter, OutputMark, quoted, why_not_written
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._state import (
    Fetched,
    HarvestedDocument,
    HarvestState,
    Searched,
    StateSummary,
    check_is_state,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_CONCURRENCY",
    "Acknowledge",
    "Batch",
    "BatchItem",
    "Fetched",
    "Harvest",
    "HarvestFailure",
    "HarvestLock",
    "HarvestState",
    "HarvestStats",
    "HarvestedDocument",
    "JsonlWriter",
    "OnError",
    "OutputMark",
    "Searched",
    "StateSummary",
    "check_is_state",
    "fetch_many",
    "harvest",
    "hold",
    "quoted",
    "search_many",
    "why_not_written",
]
