"""The refreshes a process sends, counted as a user could: from the library's log.

``StoredToken`` logs ``refreshing the access token at ...`` (DEBUG, logger
``magisterium_async.auth``) once for each refresh it sends to the authorization server.
The worker scripts beside this file import it by its bare name (their directory is first
on ``sys.path``); the tests import it as ``tests.refresh_log``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "magisterium_async.auth"
SENT = "refreshing the access token"


class RefreshLog(logging.Handler):
    """Counts the refresh records it is handed: :attr:`count`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(SENT):
            self.count += 1


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
