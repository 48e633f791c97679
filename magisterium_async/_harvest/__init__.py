"""Batches and harvests: many searches and fetches at once, and a harvest that fetches
every document a list of queries finds once, resumable from a SQLite state, into a JSON
Lines file that holds each document once.

The parts, each one job: :mod:`._batch` (``search_many``/``fetch_many`` and the
background iterator they and the harvest share), :mod:`._harvest` (the :class:`Harvest`
its consumer holds), :mod:`._pipeline` (one run's stages and the delivery bookkeeping),
:mod:`._results` (what a harvest yields and counts), :mod:`._state` (the state in
SQLite), :mod:`._lock` (one harvest at a time per state and per output),
:mod:`._jsonl` (the JSON Lines writer and the checks of the file it appends to).

This module is the subpackage's seam: the client, the command line and the tests import
from here.
"""

from magisterium_async._harvest._batch import (
    DEFAULT_CONCURRENCY,
    MAX_CONCURRENCY,
    Batch,
    BatchItem,
    SearchFetchClient,
    fetch_many,
    search_many,
)
from magisterium_async._harvest._harvest import Acknowledge, Harvest, harvest, harvest_holding
from magisterium_async._harvest._jsonl import JsonlWriter, OutputMark
from magisterium_async._harvest._lock import HarvestLock
from magisterium_async._harvest._pipeline import HarvestClient, OnError
from magisterium_async._harvest._results import (
    QUOTED,
    HarvestedDocument,
    HarvestFailure,
    HarvestStats,
    quoted,
)
from magisterium_async._harvest._state import (
    HarvestState,
    StateSummary,
    answered,
    check_is_state,
    is_finished,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_CONCURRENCY",
    "QUOTED",
    "Acknowledge",
    "Batch",
    "BatchItem",
    "Harvest",
    "HarvestClient",
    "HarvestFailure",
    "HarvestLock",
    "HarvestState",
    "HarvestStats",
    "HarvestedDocument",
    "JsonlWriter",
    "OnError",
    "OutputMark",
    "SearchFetchClient",
    "StateSummary",
    "answered",
    "check_is_state",
    "fetch_many",
    "harvest",
    "harvest_holding",
    "is_finished",
    "quoted",
    "search_many",
]
