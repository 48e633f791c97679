"""The user message a ``message/send`` carries: its parts, ids and skill, checked.

Owns turning what a caller gives (a string, a part, or a sequence of them; a skill id; a
context id) into the request's params, refusing bad input with a message naming it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence

import msgspec

from magisterium_async._models import DataPart, FilePart, Message, Part, TextPart
from magisterium_async._skills import require_text

__all__ = ["SendParams", "new_message_id", "parts_from", "send_params"]


class _MessageIds:
    """Unique message ids in the shape of a version-4 UUID, at the cost of a counter.

    ``str(uuid.uuid4())`` asks the kernel for random bytes and builds a UUID object for
    every message: a few percent of what a request costs the client. Here the first 74
    random bits are drawn once per process (again in a forked child), and the last 48 count
    up from a random start, so ids are unique within the process and, with overwhelming
    probability, across processes and hosts, which is all the service asks of them.
    """

    def __init__(self) -> None:
        self._prefix = ""
        self._counter: Iterator[int] = iter(())
        self.reseed()

    def reseed(self) -> None:
        """Draw new random bits (a forked child must not repeat its parent's ids)."""
        r = os.urandom(16).hex()
        variant = "89ab"[int(r[16], 16) & 3]
        self._prefix = f"{r[:8]}-{r[8:12]}-4{r[13:16]}-{variant}{r[17:20]}-"
        self._counter = itertools.count(int(r[20:], 16))

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFF:012x}"


new_message_id = _MessageIds()
"""A new message id: UUID-shaped, unique (see :class:`_MessageIds`)."""
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=new_message_id.reseed)


class SendParams(msgspec.Struct, omit_defaults=True):
    """The params of ``message/send``."""

    message: Message


def parts_from(parts: str | Part | Sequence[str | Part]) -> list[Part]:
    """The parts of a message: a string is a text part; at least one part."""
    if isinstance(parts, (str, TextPart, DataPart, FilePart)):
        parts = [parts]
    if not isinstance(parts, Sequence):
        raise TypeError(f"parts must be a str, a Part or a sequence of them, not {type(parts)}")
    out: list[Part] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            out.append(TextPart(text=require_text(f"parts[{i}]", part)))
        elif isinstance(part, (TextPart, DataPart, FilePart)):
            out.append(part)
        else:
            raise TypeError(f"parts[{i}] must be a str or a Part, not {type(part).__name__}")
    if not out:
        raise ValueError("parts must hold at least one part")
    return out


def send_params(parts: list[Part], skill_id: str | None, context_id: str | None) -> SendParams:
    """A new user message of ``parts`` to ``skill_id`` (``None``: the service's default),
    in ``context_id``'s conversation when given."""
    if context_id is not None:
        require_text("context_id", context_id)
    message = Message(
        role="user",
        parts=parts,
        message_id=new_message_id(),
        context_id=context_id,
        metadata={"skillId": skill_id} if skill_id is not None else None,
    )
    return SendParams(message)
