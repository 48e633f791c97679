"""The bundled corpus: real public Church documents, each with a short excerpt.

Ids are the emulator's own (numeric strings, as the service uses); references follow the
Acta Apostolicae Sedis (AAS) or Acta Sanctae Sedis (ASS) where one exists. The documents
are kept by collection: councils (:mod:`._councils`), popes (:mod:`._papal`) and reference
works (:mod:`._reference`); this package owns their order, which is the corpus's.
"""

from __future__ import annotations

from magisterium_async.testing.emulator.content._library._councils import COUNCILS
from magisterium_async.testing.emulator.content._library._entry import Entry
from magisterium_async.testing.emulator.content._library._papal import PAPAL
from magisterium_async.testing.emulator.content._library._reference import REFERENCE

__all__ = ["ENTRIES", "Entry"]

ENTRIES: tuple[Entry, ...] = COUNCILS + PAPAL + REFERENCE
"""Every document: ``(id, title, kind, author, year, ref, heading, excerpt)``."""
