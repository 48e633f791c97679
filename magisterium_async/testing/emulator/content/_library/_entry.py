"""The shape of one document of the bundled corpus, as the library's modules write it."""

from __future__ import annotations

__all__ = ["Entry"]

Entry = tuple[str, str, str, str, int, str, str, str]
"""``(id, title, kind, author, year, ref, heading, excerpt)``."""
