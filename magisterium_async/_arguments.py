"""The skills' arguments as tools take them: typed structs, checked by msgspec.

Each is the JSON Schema of a tool (``msgspec.json.schema``) and what the skill's ``build``
makes a message of (:meth:`Arguments.value`), so a tool's arguments are checked by the
same types that build its request. Optional fields are ``T | None = None`` only: OpenAI's
strict mode wants every property present, with ``null`` for "not given".
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Generic, TypeVar

import msgspec

__all__ = [
    "Arguments",
    "DayArguments",
    "DocumentArguments",
    "LookupArguments",
    "QueryArguments",
    "QuestionArguments",
    "SaintsDayArguments",
]

In = TypeVar("In")


class Arguments(msgspec.Struct, Generic[In], forbid_unknown_fields=True, kw_only=True):
    """A skill's arguments as a tool takes them: the struct msgspec checks them against
    (its JSON Schema is the tool's), and what the skill's ``build`` makes a message of."""

    def value(self) -> In:
        """The argument the skill's ``build`` takes."""
        raise NotImplementedError

    @property
    def context(self) -> str | None:
        """The conversation to continue (``catholic_qa`` only); ``None``: a new one."""
        return None


_Text = Annotated[str, msgspec.Meta(min_length=1)]
_WHEN = (
    "The day: a date as YYYY-MM-DD, or words such as 'today', 'tomorrow', 'next Sunday', "
    "'Easter Sunday 2026'. null means today."
)
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class QuestionArguments(Arguments[str]):
    """What ``catholic_qa`` takes."""

    question: Annotated[_Text, msgspec.Meta(description="The question, in full sentences.")]
    context_id: Annotated[
        str | None,
        msgspec.Meta(
            description="The context_id of an earlier answer, to ask a follow-up in the same "
            "conversation; null to start a new one."
        ),
    ] = None

    def value(self) -> str:
        return self.question

    @property
    def context(self) -> str | None:
        return self.context_id


class QueryArguments(Arguments[str]):
    """What ``document_search`` takes."""

    query: Annotated[_Text, msgspec.Meta(description="What to look for; the search is semantic.")]

    def value(self) -> str:
        return self.query


class DocumentArguments(Arguments[str]):
    """What ``document_fetch`` takes."""

    id: Annotated[
        _Text, msgspec.Meta(description="The document's id, as document_search returned it.")
    ]

    def value(self) -> str:
        return self.id


class DayArguments(Arguments[str]):
    """What ``liturgical_readings`` takes."""

    when: Annotated[str | None, msgspec.Meta(description=_WHEN)] = None

    def value(self) -> str:
        return "today" if self.when is None else self.when


class SaintsDayArguments(Arguments[str | dt.date]):
    """What ``saints_of_the_day`` takes: a date goes as one, anything else as a query."""

    when: Annotated[str | None, msgspec.Meta(description=_WHEN)] = None

    def value(self) -> str | dt.date:
        when = "today" if self.when is None else self.when
        if _ISO_DATE.fullmatch(when.strip()):
            try:
                return dt.date.fromisoformat(when.strip())
            except ValueError:
                raise ValueError(f"when: {when!r} is not a date that exists") from None
        return when


class LookupArguments(Arguments[str]):
    """What the lookup skills take."""

    query: Annotated[_Text, msgspec.Meta(description="A name, or a canonical id.")]

    def value(self) -> str:
        return self.query
