"""Tools for LLM frameworks: the specs each framework takes, and call_tool on the emulator."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

import magisterium_async as m
from magisterium_async import tools
from magisterium_async._skills import SKILLS
from magisterium_async.testing import Emulator, EmulatorConfig, MockResponse, MockTransport

# The ten skills of the service spec: the contract's five and the five more it lists.
TEN = {
    "catholic_qa",
    "document_search",
    "document_fetch",
    "liturgical_readings",
    "saints_of_the_day",
    "saint_lookup",
    "person_lookup",
    "pope_lookup",
    "diocese_lookup",
    "diocese_statistics_lookup",
}
STYLES = ("openai", "anthropic", "mcp")


def _schemas(style: str) -> dict[str, dict[str, Any]]:
    specs = tools.tool_specs(style)  # type: ignore[arg-type]
    if style == "openai":
        return {s["function"]["name"]: s["function"]["parameters"] for s in specs}
    key = "input_schema" if style == "anthropic" else "inputSchema"
    return {s["name"]: s[key] for s in specs}


@pytest.mark.parametrize("style", STYLES)
def test_ten_tools_named_by_skill_with_valid_schemas(style: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    specs = tools.tool_specs(style)  # type: ignore[arg-type]
    schemas = _schemas(style)
    assert len(specs) == 10 and set(schemas) == TEN == set(SKILLS)
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
    descriptions = [
        s["function"]["description"] if style == "openai" else s["description"] for s in specs
    ]
    assert all(len(d) > 40 for d in descriptions)


def test_openai_specs_are_strict_mode_ready() -> None:
    for spec in tools.tool_specs("openai"):
        assert spec["type"] == "function" and spec["function"]["strict"] is True
        schema = spec["function"]["parameters"]
        assert schema["required"] == list(schema["properties"])
        for prop in schema["properties"].values():
            assert not {"default", "minLength", "maxLength"} & set(prop)


def test_a_schema_accepts_what_call_tool_accepts() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    strict = _schemas("openai")
    loose = _schemas("anthropic")
    jsonschema.validate({"question": "Why?", "context_id": None}, strict["catholic_qa"])
    jsonschema.validate({"question": "Why?"}, loose["catholic_qa"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"question": "Why?", "extra": 1}, loose["catholic_qa"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"question": "Why?"}, strict["catholic_qa"])


def test_specs_are_fresh_copies() -> None:
    tools.tool_specs("mcp")[0]["inputSchema"]["properties"].clear()
    assert tools.tool_specs("mcp")[0]["inputSchema"]["properties"]


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="'openai', 'anthropic', 'mcp'"):
        tools.tool_specs("langchain")  # type: ignore[arg-type]


# The frameworks' own types take them -----------------------------------------------------


def _typed_dict_takes(cls: Any, value: dict[str, Any]) -> None:
    """``value`` fits the TypedDict ``cls``: pydantic validates it, and no key is unknown."""
    pydantic = pytest.importorskip("pydantic")
    pydantic.TypeAdapter(cls).validate_python(value)
    assert set(value) <= set(cls.__annotations__), set(value) - set(cls.__annotations__)
    assert cls.__required_keys__ <= set(value)


def test_the_openai_package_takes_the_openai_specs() -> None:
    chat = pytest.importorskip("openai.types.chat")
    shared = pytest.importorskip("openai.types.shared_params")
    # Before openai 1.99 the function tool was ChatCompletionToolParam itself.
    function_tool = getattr(chat, "ChatCompletionFunctionToolParam", None)
    for spec in tools.tool_specs("openai"):
        _typed_dict_takes(function_tool or chat.ChatCompletionToolParam, spec)
        _typed_dict_takes(shared.FunctionDefinition, spec["function"])


def test_the_anthropic_package_takes_the_anthropic_specs() -> None:
    types = pytest.importorskip("anthropic.types")
    for spec in tools.tool_specs("anthropic"):
        _typed_dict_takes(types.ToolParam, spec)


def test_the_mcp_package_takes_the_mcp_specs() -> None:
    mcp = pytest.importorskip("mcp.types")
    for spec in tools.tool_specs("mcp"):
        tool = mcp.Tool.model_validate(spec)
        assert tool.name == spec["name"]
        assert (
            tool.model_dump(by_alias=True, exclude_none=True)["inputSchema"] == spec["inputSchema"]
        )


# call_tool -----------------------------------------------------------------------------


@pytest.fixture
def magisterium_emulator_config() -> EmulatorConfig:
    return EmulatorConfig(rate_limits=None, today=lambda: dt.date(2026, 3, 19))


async def test_call_tool_runs_all_ten_and_gives_json(
    magisterium_client: m.AsyncMagisterium, magisterium_emulator: Emulator
) -> None:
    client, emulator = magisterium_client, magisterium_emulator
    results: dict[str, Any] = {}
    results["catholic_qa"] = await tools.call_tool(
        client, "catholic_qa", {"question": "What does Lumen Gentium teach about the Church?"}
    )
    results["document_search"] = await tools.call_tool(
        client, "document_search", '{"query": "Lumen Gentium"}'
    )
    hit = results["document_search"]["results"][0]
    results["document_fetch"] = await tools.call_tool(client, "document_fetch", {"id": hit["id"]})
    results["liturgical_readings"] = await tools.call_tool(client, "liturgical_readings", {})
    results["saints_of_the_day"] = await tools.call_tool(
        client, "saints_of_the_day", {"when": "2026-03-19"}
    )
    results["saint_lookup"] = await tools.call_tool(client, "saint_lookup", {"query": "pius-x"})
    results["person_lookup"] = await tools.call_tool(
        client, "person_lookup", {"query": "Basil Hume"}
    )
    results["pope_lookup"] = await tools.call_tool(client, "pope_lookup", {"query": "leo-xiii"})
    results["diocese_lookup"] = await tools.call_tool(
        client, "diocese_lookup", {"query": "Archdiocese of Milan"}
    )
    results["diocese_statistics_lookup"] = await tools.call_tool(
        client, "diocese_statistics_lookup", {"query": "westminster"}
    )
    assert set(results) == TEN
    assert json.loads(json.dumps(results)) == results  # JSON values, nothing else
    answer = results["catholic_qa"]
    assert answer["text"] and answer["context_id"] and answer["related_questions"]
    assert answer["citations"][0]["document_title"]
    assert hit["title"] == "Lumen Gentium" and hit["url"]
    assert results["document_fetch"]["id"] == hit["id"] and results["document_fetch"]["text"]
    assert results["liturgical_readings"]["text"]
    assert "Joseph" in results["saints_of_the_day"]["text"]
    for lookup in ("saint_lookup", "pope_lookup", "diocese_statistics_lookup"):
        assert results[lookup]["text"] and results[lookup]["data"], lookup
    skills = {a.skill for a in emulator.arrivals}
    assert skills == TEN


async def test_call_tool_continues_a_conversation_and_reports_nothing_found(
    magisterium_client: m.AsyncMagisterium,
) -> None:
    client = magisterium_client
    first = await tools.call_tool(client, "catholic_qa", {"question": "What is grace?"})
    follow = await tools.call_tool(
        client, "catholic_qa", {"question": "And sin?", "context_id": first["context_id"]}
    )
    assert follow["context_id"] == first["context_id"]
    missing = await tools.call_tool(client, "document_fetch", {"id": "999999999"})
    assert missing == {"found": False, "message": "Document not found."}


async def test_a_failed_skill_raises_the_clients_error(
    magisterium_client: m.AsyncMagisterium,
) -> None:
    with pytest.raises(m.TaskFailedError, match="index offline"):
        await tools.call_tool(
            magisterium_client, "document_search", {"query": "__fail__: index offline"}
        )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("no_such_tool", {}, r"unknown tool 'no_such_tool'; the tools are: catholic_qa, "),
        (
            "document_search",
            {},
            r"document_search: bad arguments: .*missing required field `query`",
        ),
        ("document_search", {"query": 3}, r"Expected `str`, got `int` - at `\$.query`"),
        ("document_search", {"query": ""}, r"length >= 1 - at `\$.query`"),
        ("document_search", {"query": "   "}, r"document_search: bad arguments: query must not"),
        ("document_search", {"query": "x", "top": 5}, r"unknown field `top`"),
        ("document_search", "{not json", r"document_search: the arguments are not JSON"),
        ("document_search", "[1]", r"document_search: bad arguments: Expected `object`"),
        ("document_search", 42, r"arguments must be a dict or a JSON string, not int"),
        ("saints_of_the_day", {"when": "2026-02-30"}, r"when: '2026-02-30' is not a date that"),
        ("liturgical_readings", {"when": ""}, r"when must not be empty"),
        ("document_fetch", {"id": "d", "extra": 1}, r"unknown field `extra`"),
        ("catholic_qa", {"question": "q", "context_id": 7}, r"at `\$.context_id`"),
    ],
)
async def test_bad_calls_are_refused_before_anything_is_sent(
    name: str, arguments: Any, message: str
) -> None:
    transport = MockTransport(lambda r: MockResponse(500))
    async with m.AsyncMagisterium(
        token="t", base_url="https://a2a.example/api", transport=transport
    ) as client:
        with pytest.raises(ValueError, match=message):
            await tools.call_tool(client, name, arguments)
    assert transport.requests == []


def _recording(sent: list[Any]) -> MockTransport:
    """A transport answering every message with a completed task, keeping what was sent."""

    def answer(request: Any) -> MockResponse:
        message = request.json["params"]["message"]
        sent.append((message["parts"], message.get("contextId")))
        skill = SKILLS[message["metadata"]["skillId"]]
        name = skill.artifact or "any"
        part = {"kind": "text", "text": skill.not_found or "Saint Joseph"}
        task = {
            "kind": "task",
            "id": "t",
            "contextId": "c",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "name": name, "parts": [part]}],
        }
        return MockResponse.result(request, task)

    return MockTransport(answer)


async def test_call_tool_sends_what_the_client_method_sends() -> None:
    sent: list[Any] = []
    async with m.AsyncMagisterium(
        token="t", base_url="https://a2a.example/api", transport=_recording(sent)
    ) as client:
        await client.saints(dt.date(2026, 3, 19))
        await tools.call_tool(client, "saints_of_the_day", {"when": "2026-03-19"})
        await tools.call_tool(client, "saints_of_the_day", {"when": " 2026-03-19 "})
        await client.saints("next Sunday")
        await tools.call_tool(client, "saints_of_the_day", {"when": "next Sunday"})
        await client.saints()
        await tools.call_tool(client, "saints_of_the_day", {"when": None})  # strict mode's
        await tools.call_tool(client, "saints_of_the_day", b"{}")
        await client.mass_readings("Easter Sunday 2026")
        await tools.call_tool(client, "liturgical_readings", {"when": "Easter Sunday 2026"})
        await client.mass_readings()
        await tools.call_tool(client, "liturgical_readings", {})
    parts = [p for p, _ in sent]
    assert parts[0] == parts[1] == parts[2] == [{"kind": "data", "data": {"date": "2026-03-19"}}]
    assert parts[3] == parts[4] and parts[5] == parts[6] == parts[7]
    assert parts[5] == parts[10] == parts[11] == [{"kind": "text", "text": "today"}]

    assert parts[8] == parts[9] == [{"kind": "text", "text": "Easter Sunday 2026"}]


async def test_a_question_continues_a_conversation_only_when_given_one() -> None:
    sent: list[Any] = []
    async with m.AsyncMagisterium(
        token="t", base_url="https://a2a.example/api", transport=_recording(sent)
    ) as client:
        await tools.call_tool(client, "catholic_qa", {"question": "Why?", "context_id": None})
        await tools.call_tool(client, "catholic_qa", '{"question": "And?", "context_id": "c-1"}')
        await tools.call_tool(client, "document_fetch", {"id": "doc-1"})
    assert [context for _, context in sent] == [None, "c-1", None]
    assert sent[2][0] == [{"kind": "data", "data": {"id": "doc-1"}}]
