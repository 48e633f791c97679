"""``card``: the agent card, and which A2A dialect the server speaks (no token, no quota)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from magisterium_async._cli._command import Command, Invocation, with_client
from magisterium_async._cli._errors import ExitCode
from magisterium_async._models import AgentCard

if TYPE_CHECKING:  # the client loads when a command runs, not for --help
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._http._dialect import Dialect

__all__ = ["COMMAND"]


def _speaks(card: AgentCard, dialect: Dialect) -> str:
    """The dialect in words: ``A2A 1.0 (SendMessage, GetTask, ...)`` or today's."""
    if dialect.version == "1.0":
        return "A2A 1.0 JSON-RPC (SendMessage, GetTask, CancelTask, ListTasks)"
    said = f", card protocolVersion {card.protocol_version}" if card.protocol_version else ""
    return f"A2A 0.3 JSON-RPC (message/send, tasks/get, tasks/cancel{said})"


async def _card(invocation: Invocation, client: AsyncMagisterium) -> int:
    from magisterium_async._http._dialect import offered

    card = await client.agent_card()

    dialect = offered(card, client.base_url)
    endpoint = dialect.url or client.base_url
    record: dict[str, Any] = {
        "card_url": client.agent_card_url,
        "protocol": dialect.version,
        "endpoint": endpoint,
        "card": msgspec.to_builtins(card),
    }

    def show() -> None:
        print(f"{card.name}" + (f" (version {card.version})" if card.version else ""))
        print(f"  card:     {client.agent_card_url}")
        print(f"  speaks:   {_speaks(card, dialect)}")
        print(f"  endpoint: {endpoint}")
        print(f"  skills:   {', '.join(skill.id for skill in card.skills) or '(none listed)'}")

    invocation.output.result(record, show)
    return ExitCode.OK


COMMAND = Command(
    "card",
    "the agent card and the A2A dialect the server speaks (spends no quota)",
    with_client(_card, "reading the agent card", "unmetered"),
)
