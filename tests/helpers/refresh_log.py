"""The refreshes a process sends, counted as a user could: from the library's log.

``StoredToken`` tells a ``refreshing`` event once for each refresh it sends to the
authorization server, just before sending it, and the log says it (``refreshing the access
token ...``, INFO, logger ``magisterium_async.auth``): the record's time is when the
process decided to refresh.
The worker scripts beside this file import it by its bare name (their directory is first
on ``sys.path``); the tests import it as ``tests.refresh_log``.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

LOGGER = "magisterium_async.auth"
SENT = "refreshing the access token"


class RefreshLog(logging.Handler):
    """Counts the refresh records it is handed: :attr:`count`, and when each was sent
    (:attr:`times`, wall-clock seconds: comparable between processes of one host)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.times: list[float] = []

    @property
    def count(self) -> int:
        return len(self.times)

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(SENT):
            self.times.append(record.created)


@contextmanager
def counted_refreshes() -> Iterator[RefreshLog]:
    """Count the refreshes this process sends while the block runs."""
    logger = logging.getLogger(LOGGER)
    handler, level = RefreshLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def assert_one_refresh_per_lifetime(sent: Iterable[float], lifetime: float) -> None:
    """What the code decides of processes sharing one sign-in: a token is refreshed once
    90% of its life has passed (or once the service refused it), whichever process
    refreshes it. So the refreshes every process sent (``sent``: their times, from
    :attr:`RefreshLog.times`), put in one line, are at least that far apart; processes
    refreshing on their own would send theirs within moments of each other. A slow
    machine only spaces them out: this holds however long anything takes (the allowance
    is for clock readings, not for scheduling)."""
    times = sorted(sent)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps, default=math.inf) >= 0.9 * lifetime - 0.02, gaps
