"""The user message a ``message/send`` carries: its parts, ids and skill, checked.

Owns turning what a caller gives (a string, a part, or a sequence of them; a skill id; a
context id) into the request's params, refusing bad input with a message naming it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import msgspec

from ._models import DataPart, FilePart, Message, Part, TextPart
from ._skills import require_text

__all__ = ["SendParams", "parts_from", "send_params"]


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
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        metadata={"skillId": skill_id} if skill_id is not None else None,
    )
    return SendParams(message)
