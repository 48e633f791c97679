"""An A2A server built on a2a-sdk 0.3 (``A2AStarletteApplication``, ``DefaultRequestHandler``,
``InMemoryTaskStore``) answering ``document_search`` and ``document_fetch`` the way the
Magisterium service does. Run with the .venv-interop03 python; see ``server_common``.
"""

from __future__ import annotations

from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    Part,
    TextPart,
    UnsupportedOperationError,
)
from a2a.utils import new_agent_text_message, new_task
from a2a.utils.errors import ServerError
from agent_skills import answer
from server_common import RPC_PATH, endpoint, parse_args, serve


class SkillExecutor(AgentExecutor):
    """Runs the skill named by ``message.metadata.skillId``; the task ends at once."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task or new_task(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        texts = [p.root.text for p in message.parts if isinstance(p.root, TextPart)]
        datas = [p.root.data for p in message.parts if isinstance(p.root, DataPart)]
        outcome = answer((message.metadata or {}).get("skillId"), texts, datas)
        if outcome.state != "completed":
            reply = new_agent_text_message(outcome.reason, task.context_id, task.id)
            if outcome.state == "input-required":
                await updater.requires_input(reply)
            else:
                await updater.failed(reply)
            return
        parts = [
            Part(root=TextPart(text=value)) if kind == "text" else Part(root=DataPart(data=value))
            for kind, value in outcome.parts
        ]
        await updater.add_artifact(parts, name=outcome.artifact)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # What the a2a-sdk samples do: the handler answers -32004 "unsupported operation".
        raise ServerError(error=UnsupportedOperationError())


def main() -> None:
    args = parse_args()
    serve(_app, args.token)


def _app(port: int) -> Any:
    card = AgentCard(
        name="a2a-sdk 0.3 test agent",
        description="document_search and document_fetch, shaped like the Magisterium service",
        url=endpoint(port),
        version="0.3.26",
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id=skill, name=skill, description=skill, tags=["documents"])
            for skill in ("document_search", "document_fetch")
        ],
    )
    handler = DefaultRequestHandler(agent_executor=SkillExecutor(), task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=card, http_handler=handler).build(rpc_url=RPC_PATH)


if __name__ == "__main__":
    main()
