"""The A2A agent card served at ``/.well-known/agent.json``."""

from __future__ import annotations

from typing import Any

__all__ = ["agent_card"]

_SKILLS: tuple[dict[str, Any], ...] = (
    {
        "id": "catholic_qa",
        "name": "Catholic Q&A",
        "description": "Answers questions on Catholic teaching from magisterial sources, "
        "with citations and related questions.",
        "tags": ["catholic", "theology", "qa", "citations"],
        "examples": ["What does the Church teach about the Eucharist?"],
    },
    {
        "id": "document_search",
        "name": "Document search",
        "description": "Semantic search over Church documents; returns ids, titles and urls.",
        "tags": ["search", "documents", "magisterium"],
        "examples": ["encyclicals on human work"],
    },
    {
        "id": "document_fetch",
        "name": "Document fetch",
        "description": "The text and metadata of one document by id.",
        "tags": ["documents", "fetch"],
        "examples": ['{"id": "10234"}'],
    },
    {
        "id": "liturgical_readings",
        "name": "Liturgical readings",
        "description": "The Mass readings for a date given in natural language.",
        "tags": ["liturgy", "readings", "mass"],
        "examples": ["today", "next Sunday", "Easter Sunday 2026"],
    },
    {
        "id": "saints_of_the_day",
        "name": "Saints of the day",
        "description": "The Roman Martyrology entry for a date.",
        "tags": ["saints", "martyrology", "calendar"],
        "examples": ['{"date": "2026-03-19"}', "tomorrow"],
    },
    # Listed by the service's skills page; the emulator's answers to them are invented.
    {
        "id": "saint_lookup",
        "name": "Saint lookup",
        "description": "A saint, blessed, venerable or servant of God, by name or canonical id.",
        "tags": ["saints", "lookup"],
        "examples": ["Thérèse of Lisieux", "pius-x"],
    },
    {
        "id": "person_lookup",
        "name": "Person lookup",
        "description": "A Catholic clergy figure (bishop, cardinal, archbishop, ...) by name "
        "or canonical id.",
        "tags": ["clergy", "lookup"],
        "examples": ["Basil Hume"],
    },
    {
        "id": "pope_lookup",
        "name": "Pope lookup",
        "description": "A pope by name or canonical id.",
        "tags": ["popes", "lookup"],
        "examples": ["Pius X", "leo-xiii"],
    },
    {
        "id": "diocese_lookup",
        "name": "Diocese lookup",
        "description": "An ecclesiastical jurisdiction (diocese, archdiocese, eparchy): "
        "directory metadata, headline statistics, latest financials.",
        "tags": ["dioceses", "lookup"],
        "examples": ["Archdiocese of Milan"],
    },
    {
        "id": "diocese_statistics_lookup",
        "name": "Diocese statistics",
        "description": "A diocese's full yearly statistics time series: 19 metrics, one row "
        "per year.",
        "tags": ["dioceses", "statistics"],
        "examples": ["westminster"],
    },
)


def agent_card(url: str) -> dict[str, Any]:
    """The agent card, naming ``url`` as the JSON-RPC endpoint."""
    return {
        "name": "Magisterium AI",
        "description": "Catholic teaching, documents and liturgy over A2A "
        "(magisterium_async offline emulator).",
        "url": url,
        "version": "emulator",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "provider": {"organization": "Magisterium AI", "url": "https://www.magisterium.com"},
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "stateTransitionHistory": False,
        },
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "security": [{"bearer": []}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [dict(skill) for skill in _SKILLS],
    }
