"""The library's log on stderr, for people: ``$MAGISTERIUM_LOG``, or the command line's
``-v``/``-vv``.

Every module logs under ``magisterium_async`` (``.retry``: retries and 429s, ``.ratelimit``:
pauses and rates, ``.auth``: refreshes, ``.transport``: each request, at DEBUG, ``.cli``:
the command line's waits). Nothing shows until an application configures logging, or
``$MAGISTERIUM_LOG=info`` or ``debug`` asks for it (read once, when the package is
imported), or ``-v`` does. No record carries a token, a refresh token or a password.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from magisterium_async._env import log_level

__all__ = ["LOGGER", "from_environment", "log_to_stderr"]

LOGGER = "magisterium_async"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes (a test may have replaced it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def log_to_stderr(level: int) -> None:
    """Show the library's records of ``level`` and above on stderr.

    One handler however often it is called; the most verbose level asked for wins (``-v``
    does not quieten ``$MAGISTERIUM_LOG=debug``).
    """
    logger = logging.getLogger(LOGGER)
    handler = next((h for h in logger.handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
        handler.setLevel(level)
        logger.addHandler(handler)
    else:
        handler.setLevel(min(handler.level, level))
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)


def from_environment() -> None:
    """Turn the log on as ``$MAGISTERIUM_LOG`` asks (``info`` or ``debug``); a value it
    does not know is said, once, and ignored."""
    try:
        level = log_level()
    except ValueError as exc:
        logging.getLogger(LOGGER).warning("%s; ignored", exc)
        return
    if level is not None:
        log_to_stderr(level)
