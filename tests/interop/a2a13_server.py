"""An A2A server built on a2a-sdk 1.x, answering ``document_search`` and ``document_fetch``
the way the Magisterium service does. Run with the .venv-interop13 python; see
``server_common``.

By default its v0.3 compatibility mode is on
(``create_jsonrpc_routes(..., enable_v0_3_compat=True)``) and its card names a 0.3
interface; with ``--v1-only`` it serves A2A 1.0 alone (0.3's methods are "method not
found", a request without ``A2A-Version: 1.0`` is "version not supported") and its card
names a 1.0 interface.

The v1.x core is protobuf: a data part is a ``google.protobuf.Value``, which stores every
number as a double, so the compat layer sends the integer ``12345`` as ``12345.0``.
"""

from __future__ import annotations

from a2a.helpers import new_data_part, new_text_message, new_text_part
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
)
from a2a.utils.errors import UnsupportedOperationError
from agent_skills import answer
from google.protobuf.json_format import MessageToDict
from server_common import RPC_PATH, endpoint, parse_args, serve
from starlette.applications import Starlette


class SkillExecutor(AgentExecutor):
    """Runs the skill named by ``message.metadata.skillId``; the task ends at once."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        texts = [p.text for p in message.parts if p.HasField("text")]
        datas = [MessageToDict(p.data) for p in message.parts if p.HasField("data")]
        metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
        outcome = answer(metadata.get("skillId"), texts, datas)
        if outcome.state != "completed":
            reply = new_text_message(
                outcome.reason, context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT
            )
            if outcome.state == "input-required":
                await updater.requires_input(reply)
            else:
                await updater.failed(reply)
            return
        parts = [
            new_text_part(value) if kind == "text" else new_data_part(value)
            for kind, value in outcome.parts
        ]
        await updater.add_artifact(parts, name=outcome.artifact)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # What the a2a-sdk samples do; 1.x's handler turns it into -32002 "not cancelable".
        raise UnsupportedOperationError()


def main() -> None:
    args = parse_args(v1_only=True)
    compat = not args.v1_only
    serve(lambda port: _app(port, compat=compat), args.token)


def _app(port: int, *, compat: bool) -> Starlette:
    card = AgentCard(
        name="a2a-sdk 1.x test agent " + ("(v0.3 compat)" if compat else "(A2A 1.0 only)"),
        description="document_search and document_fetch, shaped like the Magisterium service",
        supported_interfaces=[
            AgentInterface(
                url=endpoint(port),
                protocol_binding="JSONRPC",
                protocol_version="0.3" if compat else "1.0",
            )
        ],
        version="1.3.0",
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id=skill, name=skill, description=skill, tags=["documents"])
            for skill in ("document_search", "document_fetch")
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=SkillExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(
        handler, RPC_PATH, enable_v0_3_compat=compat
    )
    return Starlette(routes=routes)


if __name__ == "__main__":
    main()
