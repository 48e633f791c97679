"""Tools for LLM frameworks: the service's skills as function tools, and the glue to run them.

>>> from magisterium_async import AsyncMagisterium, tools
>>> specs = tools.tool_specs("openai")           # or "anthropic", "mcp"
>>> result = await tools.call_tool(client, "document_search", {"query": "grace"})

One tool per skill of the service (ten), named by the skill id, described for a model,
its one argument (and ``context_id`` for ``catholic_qa``) named and described by the skill
table (``_skills.py``), so a tool cannot drift from what the client sends. The schema is
msgspec's of a struct made from that row; :func:`call_tool` checks the arguments with the
same struct before anything is sent, runs the skill through the client (its quota,
retries, priority) and returns plain JSON values. Optional fields are ``T | None = None``
only: OpenAI's strict mode wants every property present, with ``null`` for "not given".
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import msgspec

from magisterium_async._models import Answer, Document, Lookup, SearchResult
from magisterium_async._skills import SKILLS, Skill, read_result

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

__all__ = ["ToolStyle", "call_tool", "tool_specs"]

ToolStyle = Literal["openai", "anthropic", "mcp"]
"""The tool formats :func:`tool_specs` writes."""

_STYLES = get_args(ToolStyle)
# OpenAI's strict mode refuses these keywords; msgspec checks them in call_tool anyway.
_NOT_STRICT = ("default", "minLength", "maxLength")
_CONTEXT = (
    "The context_id of an earlier answer, to ask a follow-up in the same conversation; "
    "null to start a new one."
)


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
        schema = copy.deepcopy(_schema(skill.id))
        if style == "openai":
            schema["required"] = list(schema["properties"])
            for prop in schema["properties"].values():
                for keyword in _NOT_STRICT:
                    prop.pop(keyword, None)
            function = {"name": skill.id, "description": skill.description, "parameters": schema}
            specs.append({"type": "function", "function": {**function, "strict": True}})
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
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (str, bytes, bytearray, Mapping)):
        kind = type(arguments).__name__
        raise ValueError(f"{name}: arguments must be a dict or a JSON string, not {kind}")
    try:
        if isinstance(arguments, Mapping):
            args = msgspec.convert(dict(arguments), _struct(name))
        else:
            args = msgspec.json.decode(arguments or b"{}", type=_struct(name))
        given = getattr(args, skill.argument)
        if given is None:  # optional, with a default ("today")
            given = skill.default
        parts = skill.build(skill.from_text(given))
    except (TypeError, ValueError) as exc:
        json = isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError)
        what = "the arguments are not JSON" if json else "bad arguments"
        raise ValueError(f"{name}: {what}: {exc}") from None
    context = getattr(args, "context_id", None)
    task = await client.send_message(parts, skill_id=skill.id, context_id=context)
    return _jsonable(skill, read_result(skill, task))


@functools.cache
def _struct(skill_id: str) -> type[msgspec.Struct]:
    """The skill's arguments as a struct: its one argument (a non-empty string, or one
    that may be ``null`` when the skill has a default) and, for a conversation, the
    ``context_id`` to continue."""
    skill = SKILLS[skill_id]
    if skill.default is None:
        about = msgspec.Meta(min_length=1, description=skill.about)
        fields: list[Any] = [(skill.argument, Annotated[str, about])]
    else:
        fields = [
            (skill.argument, Annotated[str | None, msgspec.Meta(description=skill.about)], None)
        ]
    if skill.conversation:
        fields.append(
            ("context_id", Annotated[str | None, msgspec.Meta(description=_CONTEXT)], None)
        )
    return msgspec.defstruct(
        f"{skill_id}_arguments", fields, forbid_unknown_fields=True, kw_only=True
    )


@functools.cache
def _schema(skill_id: str) -> dict[str, Any]:
    """The struct's object schema, inline (msgspec puts it under ``$defs``)."""
    generated = msgspec.json.schema(_struct(skill_id))
    schema: dict[str, Any] = generated["$defs"][generated["$ref"].rsplit("/", 1)[-1]]
    schema.pop("title", None)  # the tool's name and description say what it is
    return schema


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
    if isinstance(result, Lookup):
        return {"text": result.text, "data": result.data}
    assert isinstance(result, list), result  # the table's types: this is a search's
    return {"results": [_plain(hit) for hit in result if isinstance(hit, SearchResult)]}


def _plain(struct: msgspec.Struct, *, drop_none: bool = True) -> dict[str, Any]:
    """A result struct as a dict, its ``extra`` keys merged in (the struct's win); without
    its ``None`` fields unless ``drop_none`` is false."""
    values: dict[str, Any] = msgspec.to_builtins(struct)
    extra = values.pop("extra", None) or {}
    plain = {k: v for k, v in values.items() if v is not None or not drop_none}
    return {**{k: v for k, v in extra.items() if k not in plain}, **plain}
