"""Tools for LLM frameworks: the service's skills as function tools, and the glue to run them.

>>> from magisterium_async import AsyncMagisterium, tools
>>> specs = tools.tool_specs("openai")           # or "anthropic", "mcp"
>>> result = await tools.call_tool(client, "document_search", {"query": "grace"})

One tool per skill of the service (ten), named by the skill id, described for a model;
the schemas are made from the skill table (``_skills.py``) and the argument structs here,
so they cannot drift from what the client sends. :func:`call_tool` checks the arguments
with those same structs before anything is sent, runs the skill through the client (its
quota, retries, priority) and returns plain JSON values.

Each argument struct is the JSON Schema of a tool (``msgspec.json.schema``) and what the
skill's ``build`` makes a message of (:meth:`Arguments.value`). Optional fields are
``T | None = None`` only: OpenAI's strict mode wants every property present, with
``null`` for "not given".
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar

import msgspec

from magisterium_async._models import Answer, Document, SearchResult
from magisterium_async._skills import SKILLS, Skill, read_result

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["ToolStyle", "call_tool", "tool_specs"]

In = TypeVar("In")

ToolStyle = Literal["openai", "anthropic", "mcp"]
"""The tool formats :func:`tool_specs` writes."""

_STYLES = ("openai", "anthropic", "mcp")
# OpenAI's strict mode refuses these keywords; msgspec checks them in call_tool anyway.
_NOT_STRICT = ("default", "minLength", "maxLength")


# The arguments ------------------------------------------------------------------------
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


_ARGUMENTS: dict[str, type[Arguments[Any]]] = {
    "catholic_qa": QuestionArguments,
    "document_search": QueryArguments,
    "document_fetch": DocumentArguments,
    "liturgical_readings": DayArguments,
    "saints_of_the_day": SaintsDayArguments,
}
"""Each skill's arguments struct; the lookups (any other skill of the table) take
:class:`LookupArguments`."""


# The tools ----------------------------------------------------------------------------


def tool_specs(style: ToolStyle) -> list[dict[str, Any]]:
    """One tool per skill, in ``style``'s format, ready to hand to the framework.

    - ``"openai"``: Chat Completions function tools, ``{"type": "function", "function":
      {"name", "description", "parameters", "strict": True}}``, the schemas strict-mode
      ready (every property required, optional ones nullable, no extra properties);
    - ``"anthropic"``: ``{"name", "description", "input_schema"}``;
    - ``"mcp"``: ``{"name", "description", "inputSchema"}`` (an MCP ``Tool``).

    Each schema is JSON Schema (Draft 2020-12). The list is new on every call: change it
    freely.
    """
    if style not in _STYLES:
        raise ValueError(f"style must be one of {', '.join(map(repr, _STYLES))}, not {style!r}")
    specs: list[dict[str, Any]] = []
    for skill in SKILLS.values():
        schema = copy.deepcopy(_schema(_arguments_of(skill)))
        if style == "openai":
            function = {
                "name": skill.id,
                "description": skill.description,
                "parameters": _strict(schema),
                "strict": True,
            }
            specs.append({"type": "function", "function": function})
        else:
            key = "input_schema" if style == "anthropic" else "inputSchema"
            specs.append({"name": skill.id, "description": skill.description, key: schema})
    return specs


async def call_tool(
    client: AsyncMagisterium, name: str, arguments: Mapping[str, Any] | str | bytes | None
) -> dict[str, Any]:
    """Run the tool ``name`` with ``arguments`` (a dict, or the JSON text a model wrote)
    through ``client``; the result as JSON values (``json.dumps`` takes it as it is).

    - ``catholic_qa``: ``{"text", "citations", "related_questions", "context_id"}``;
    - ``document_search``: ``{"results": [{"id", "url", "title"}, ...]}``;
    - ``document_fetch``: ``{"id", "title", "author", "ref", "text"}``;
    - ``liturgical_readings``, ``saints_of_the_day``: ``{"text"}``;
    - the lookups: ``{"text", "data": [...]}`` (the service does not state their shape);
    - nothing found: ``{"found": false, "message": ...}``.

    An unknown tool, or arguments that do not fit its schema, raise ``ValueError`` naming
    the problem before anything is sent. The client's errors (a :class:`MagisteriumError`,
    :class:`TaskFailedError` for a skill that failed) are raised as they are: tell the
    model, or stop.
    """
    skill = SKILLS.get(name) if isinstance(name, str) else None
    if skill is None:
        raise ValueError(f"unknown tool {name!r}; the tools are: {', '.join(SKILLS)}")
    args = _checked(skill, arguments)
    try:
        parts = skill.build(args.value())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: bad arguments: {exc}") from None
    task = await client.send_message(parts, skill_id=skill.id, context_id=args.context)
    return _jsonable(skill, read_result(skill, task))


def _arguments_of(skill: Skill[Any, Any]) -> type[Arguments[Any]]:
    return _ARGUMENTS.get(skill.id, LookupArguments)


@functools.cache
def _schema(arguments: type[Arguments[Any]]) -> dict[str, Any]:
    """The struct's object schema, inline (msgspec puts it under ``$defs``)."""
    generated = msgspec.json.schema(arguments)
    ref = generated["$ref"].rsplit("/", 1)[-1]
    schema: dict[str, Any] = generated["$defs"][ref]
    # The tool's description says what it is; the class name and docstring are ours.
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as OpenAI's strict mode wants it: every property required."""
    schema["required"] = list(schema["properties"])
    schema["additionalProperties"] = False
    for prop in schema["properties"].values():
        for keyword in _NOT_STRICT:
            prop.pop(keyword, None)
    return schema


def _checked(skill: Skill[Any, Any], arguments: object) -> Arguments[Any]:
    """The arguments as the skill's struct, or ``ValueError`` saying what does not fit."""
    struct = _arguments_of(skill)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (str, bytes, bytearray, Mapping)):
        kind = type(arguments).__name__
        raise ValueError(f"{skill.id}: arguments must be a dict or a JSON string, not {kind}")
    checked: Arguments[Any]
    try:
        if isinstance(arguments, Mapping):
            checked = msgspec.convert(dict(arguments), struct)
        else:
            checked = msgspec.json.decode(arguments or b"{}", type=struct)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{skill.id}: bad arguments: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"{skill.id}: the arguments are not JSON: {exc}") from None
    return checked


def _jsonable(skill: Skill[Any, Any], result: object) -> dict[str, Any]:
    """A skill's result as a JSON object, by its type (the table decides the type)."""
    if result is None:
        return {"found": False, "message": skill.not_found or "Nothing found."}
    if isinstance(result, Answer):
        return {
            "text": result.text,
            "citations": [_plain(c) for c in result.citations],
            "related_questions": list(result.related_questions),
            "context_id": result.context_id,
        }
    if isinstance(result, Document):
        return _plain(result, drop_none=False)
    if isinstance(result, str):
        return {"text": result}
    if isinstance(result, list) and all(isinstance(r, SearchResult) for r in result):
        return {"results": [_plain(r) for r in result]}
    if isinstance(result, dict):
        return result
    raise TypeError(f"{skill.id}: no JSON form for a {type(result).__name__}")  # a table bug


def _plain(struct: msgspec.Struct, *, drop_none: bool = True) -> dict[str, Any]:
    """A result struct as a dict, its ``extra`` keys merged in (the struct's win); without
    its ``None`` fields unless ``drop_none`` is false."""
    values: dict[str, Any] = msgspec.to_builtins(struct)
    extra = values.pop("extra", None) or {}
    plain = {k: v for k, v in values.items() if v is not None or not drop_none}
    return {**{k: v for k, v in extra.items() if k not in plain}, **plain}
