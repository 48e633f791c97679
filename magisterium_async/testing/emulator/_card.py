"""The A2A agent card, in the shape of each protocol the emulator speaks.

The default is the service's own card (A2A 0.2.6: top-level ``url`` and
``protocolVersion``, ``stateTransitionHistory: true``; see the service's Discovery); A2A
0.3's differs only in ``protocolVersion``; A2A 1.0's names its endpoint in
``supportedInterfaces`` and its security in protobuf's JSON shapes.
"""

from __future__ import annotations

from typing import Any

from magisterium_async.testing.emulator._config import Protocol

__all__ = ["CARD_PATH", "agent_card"]

CARD_PATH: dict[Protocol, str] = {
    "0.2.6": "/.well-known/agent.json",
    "0.3": "/.well-known/agent-card.json",
    "1.0": "/.well-known/agent-card.json",
}
"""Where a server of each protocol serves its card, and where the emulator serves it (there
alone, so a client finds the card where it would find the real one's). A2A 0.2.6's
specification names ``/.well-known/agent.json``; 0.3.0 renamed it ``agent-card.json``
(A2A's changelog, #841), and 1.0 kept that; the service, 0.2.6, serves ``agent.json``."""

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


def agent_card(url: str, protocol: Protocol = "0.2.6") -> dict[str, Any]:
    """The agent card of ``protocol``, naming ``url`` as the JSON-RPC endpoint."""
    card: dict[str, Any] = {
        "name": "Magisterium AI",
        "description": "Catholic teaching, documents and liturgy over A2A "
        "(magisterium_async offline emulator).",
    }
    if protocol == "1.0":
        card["supportedInterfaces"] = [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
    else:
        card["url"] = url
    card["version"] = "emulator"
    if protocol != "1.0":
        card["protocolVersion"] = "0.2.6" if protocol == "0.2.6" else "0.3.0"
        card["preferredTransport"] = "JSONRPC"
    card["provider"] = {"organization": "Magisterium AI", "url": "https://www.magisterium.com"}
    if protocol == "1.0":
        card["capabilities"] = {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
        }
        card["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}}}
        card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    else:
        card["capabilities"] = {
            "streaming": False,
            "pushNotifications": False,
            "stateTransitionHistory": True,
        }
        card["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        card["security"] = [{"bearer": []}]
    card["defaultInputModes"] = ["text/plain", "application/json"]
    card["defaultOutputModes"] = ["text/plain", "application/json"]
    card["skills"] = [dict(skill) for skill in _SKILLS]
    return card
