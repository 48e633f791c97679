"""A stand-in for the openai SDK, for the docs' tool-loop example: a "model" that calls
``document_search`` once, then answers from what the tool returned. Only what the example
uses (``AsyncOpenAI().chat.completions.create``) is here; nothing leaves the machine."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any


class _Completions:
    async def create(self, *, model: str, messages: list[Any], tools: list[Any]) -> Any:
        assert any(spec["function"]["name"] == "document_search" for spec in tools)
        results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        if not results:
            call = SimpleNamespace(
                id="call-1",
                function=SimpleNamespace(name="document_search", arguments='{"query": "grace"}'),
            )
            message = SimpleNamespace(content=None, tool_calls=[call])
        else:
            hits = json.loads(results[-1]["content"])["results"]
            titles = ", ".join(hit["title"] for hit in hits)
            message = SimpleNamespace(content=f"From {titles}: grace is a gift.", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


class AsyncOpenAI:
    def __init__(self) -> None:
        self.chat = SimpleNamespace(completions=_Completions())
