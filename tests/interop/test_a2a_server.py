"""Our client against a2a-sdk servers: 0.3, 1.x in its v0.3 compat mode, and 1.x speaking
A2A 1.0 alone -- with the same client code and no dialect named.

Each server runs in its own virtualenv (see ``conftest``), serves ``document_search`` and
``document_fetch`` shaped like the Magisterium service (``agent_skills``) and checks that
every POST carries our bearer token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from magisterium_async import (
    AsyncMagisterium,
    AuthenticationError,
    DataPart,
    JSONRPCError,
    MagisteriumError,
    NotSupportedError,
    RateLimits,
    SkillNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    TextPart,
)

from . import agent_skills
from .conftest import A2A13, A2AServer

pytestmark = pytest.mark.interop


@pytest.fixture
async def client(a2a_server: A2AServer) -> AsyncIterator[AsyncMagisterium]:
    async with AsyncMagisterium(
        token=a2a_server.token,
        base_url=a2a_server.base_url,
        rate_limits=RateLimits.unlimited(),
        max_retries=0,
    ) as c:
        yield c


async def test_search(client: AsyncMagisterium) -> None:
    results = await client.search("social teaching")

    assert [(r.id, r.title) for r in results] == [
        ("10234", "Rerum Novarum"),
        ("12345", "Lumen Gentium"),
    ]
    assert [r.url for r in results] == [hit["url"] for hit in agent_skills.SEARCH_RESULTS]
    assert all(r.extra == {} for r in results)


async def test_search_nothing_found(client: AsyncMagisterium) -> None:
    assert await client.search(agent_skills.EMPTY_QUERY) == []


async def test_numeric_ids_decode_as_strings(
    client: AsyncMagisterium, a2a_server: A2AServer
) -> None:
    # The executor sends {"id": 12345}: 0.3 passes the integer through; 1.x's compat layer
    # goes through protobuf Value and sends 12345.0. Either way the id is the string "12345".
    task = await client.send_message("social teaching", skill_id="document_search")
    artifact = task.artifact("search_results")
    assert artifact is not None
    (part,) = artifact.parts
    assert isinstance(part, DataPart)
    raw_id = part.data["results"][1]["id"]
    assert type(raw_id) is (float if a2a_server.env is A2A13 else int)
    assert raw_id == 12345

    results = await client.search("social teaching")
    assert results[1].id == "12345"


async def test_fetch_found(client: AsyncMagisterium) -> None:
    document = await client.fetch("12345")

    assert document is not None
    assert document.id == "12345"  # sent as a number by the server
    assert document.title == "Lumen Gentium"
    assert document.author == "Second Vatican Council"
    assert document.ref == "LG"
    assert document.text == agent_skills.DOCUMENTS["12345"]["text"]
    assert document.extra == {"year": 1964}  # 1964.0 from 1.x compares equal


async def test_fetch_string_id(client: AsyncMagisterium) -> None:
    document = await client.fetch("10234")
    assert document is not None
    assert (document.id, document.title, document.ref) == ("10234", "Rerum Novarum", "RN")


async def test_fetch_not_found(client: AsyncMagisterium) -> None:
    assert await client.fetch("99999") is None


async def test_send_message(client: AsyncMagisterium) -> None:
    task = await client.send_message(
        [DataPart(data={"id": "10234"})], skill_id="document_fetch", context_id="ctx-interop"
    )

    assert task.state == TaskState.COMPLETED
    assert task.id
    assert task.context_id == "ctx-interop"
    artifact = task.artifact("document")
    assert artifact is not None and artifact.artifact_id
    assert isinstance(artifact.parts[0], TextPart)
    assert isinstance(artifact.parts[1], DataPart)
    user = task.history[0]
    assert user.role == "user"
    assert user.metadata == {"skillId": "document_fetch"}
    assert user.parts == [DataPart(data={"id": "10234"})]


async def test_failed_task_is_returned(client: AsyncMagisterium) -> None:
    # A generic A2A server has no "skill not found" error: this executor fails the task.
    task = await client.send_message("anything", skill_id="no_such_skill")

    assert task.state == TaskState.FAILED
    assert "Skill not found" in task.failure_reason


async def test_get_task(client: AsyncMagisterium) -> None:
    sent = await client.send_message("social teaching", skill_id="document_search")

    got = await client.get_task(sent.id)

    assert (got.id, got.context_id, got.state) == (sent.id, sent.context_id, "completed")
    assert got.artifacts == sent.artifacts


async def test_get_unknown_task(client: AsyncMagisterium) -> None:
    with pytest.raises(TaskNotFoundError) as caught:
        await client.get_task("00000000-0000-0000-0000-000000000000")

    assert caught.value.code == -32001
    assert isinstance(caught.value, MagisteriumError)


async def test_cancel_finished_task(client: AsyncMagisterium) -> None:
    # Generic A2A answers -32002 "task not cancelable" where the Magisterium service answers
    # -32602: the client raises TaskNotCancelableError (not a SkillNotFoundError, though
    # the service's contract gives -32002 that meaning).
    sent = await client.send_message("social teaching", skill_id="document_search")

    with pytest.raises(TaskNotCancelableError) as caught:
        await client.cancel_task(sent.id)

    assert caught.value.code == -32002
    assert not isinstance(caught.value, SkillNotFoundError)
    assert "cancel" in caught.value.message.lower()


async def test_cancel_unknown_task(client: AsyncMagisterium) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("00000000-0000-0000-0000-000000000000")


async def test_bearer_token_is_sent(a2a_server: A2AServer) -> None:
    # The server refuses a POST without the expected token (HTTP 401): so the passing
    # tests above prove the client sent it.
    async with AsyncMagisterium(
        token="not-the-token", base_url=a2a_server.base_url, max_retries=0
    ) as client:
        with pytest.raises(AuthenticationError) as caught:
            await client.search("social teaching")
    assert caught.value.status_code == 401


async def test_cancel_open_task(client: AsyncMagisterium, a2a_server: A2AServer) -> None:
    # A task left input-required, whose executor cannot cancel (as in the a2a-sdk samples).
    task = await client.send_message("which one?", skill_id=agent_skills.NEEDS_INPUT)
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.failure_reason == agent_skills.QUESTION

    with pytest.raises(JSONRPCError) as caught:
        await client.cancel_task(task.id)

    if a2a_server.env is A2A13:  # 1.x answers "not cancelable"
        assert isinstance(caught.value, TaskNotCancelableError)
    else:  # 0.3 passes on the executor's -32004 "unsupported operation", with HTTP 200
        assert (caught.value.code, caught.value.status_code) == (-32004, 200)


async def test_generic_unsupported_operation_is_not_an_auth_error(a2a_server: A2AServer) -> None:
    async with AsyncMagisterium(
        token=a2a_server.token, base_url=a2a_server.base_url, max_retries=0
    ) as client:
        task = await client.send_message("which one?", skill_id=agent_skills.NEEDS_INPUT)
        with pytest.raises(JSONRPCError) as caught:
            await client.cancel_task(task.id)
    assert not isinstance(caught.value, AuthenticationError)


async def test_agent_card(client: AsyncMagisterium, a2a_server: A2AServer) -> None:
    # a2a-sdk 1.x serves only A2A 0.3's /.well-known/agent-card.json: the client falls back.
    card = await client.agent_card()
    assert card.name.startswith("a2a-sdk")
    assert {skill.id for skill in card.skills} >= {"document_search", "document_fetch"}
    path = client.agent_card_url.rsplit("/", 1)[1]
    assert path in ("agent.json", "agent-card.json")
    if a2a_server.env is A2A13:
        assert path == "agent-card.json"
    assert await client.agent_card() is card  # cached


async def test_every_call_a_user_makes_with_no_configuration(
    client: AsyncMagisterium, a2a_server: A2AServer
) -> None:
    # The list, against each server: the card, a send to the default skill, search,
    # fetch, get, the cancel of a finished task, an input-required task and its cancel, and
    # an unknown task. The dialect is found, not named.
    card = await client.agent_card()
    assert card.name.startswith("a2a-sdk")
    assert client.protocol == ("1.0" if a2a_server.v1_only else "0.3")

    sent = await client.send_message("social teaching")  # no skill: the agent's default
    assert sent.state == "completed"
    assert sent.artifact("search_results") is not None
    assert [r.title for r in await client.search("social teaching")] == [
        "Rerum Novarum",
        "Lumen Gentium",
    ]
    document = await client.fetch("12345")
    assert document is not None and document.id == "12345" and document.ref == "LG"
    got = await client.get_task(sent.id)
    assert (got.id, got.state, got.artifacts) == (sent.id, "completed", sent.artifacts)
    assert [m.role for m in got.history] == ["user"]
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(sent.id)
    open_task = await client.send_message("which one?", skill_id=agent_skills.NEEDS_INPUT)
    assert open_task.state == TaskState.INPUT_REQUIRED
    with pytest.raises(JSONRPCError) as caught:
        await client.cancel_task(open_task.id)
    assert isinstance(caught.value, TaskNotCancelableError) == (a2a_server.env is A2A13)
    with pytest.raises(TaskNotFoundError):
        await client.get_task("00000000-0000-0000-0000-000000000000")


async def test_the_dialect_is_found_on_the_first_call(a2a_server: A2AServer) -> None:
    # No card read first: a pure 1.0 server refuses the first call's message/send as
    # "method not found"; the client reads the card and sends it again as SendMessage.
    async with AsyncMagisterium(
        token=a2a_server.token, base_url=a2a_server.base_url, max_retries=0
    ) as client:
        assert client.protocol == "0.3"
        results = await client.search("social teaching")
        assert [r.id for r in results] == ["10234", "12345"]
        assert client.protocol == ("1.0" if a2a_server.v1_only else "0.3")


async def test_list_tasks_where_the_server_offers_it(
    client: AsyncMagisterium, a2a_server: A2AServer
) -> None:
    if not a2a_server.v1_only:
        with pytest.raises(NotSupportedError, match="does not offer ListTasks"):
            await client.list_tasks()
        return
    first = await client.send_message("social teaching", skill_id="document_search")
    second = await client.send_message("which one?", skill_id=agent_skills.NEEDS_INPUT)
    page = await client.list_tasks(page_size=100)
    ids = [task.id for task in page.tasks]
    assert {first.id, second.id} <= set(ids)
    assert all(task.artifacts == [] for task in page.tasks)  # left out unless asked
    waiting = await client.list_tasks(state=TaskState.INPUT_REQUIRED, include_artifacts=True)
    assert second.id in [task.id for task in waiting.tasks]
    assert all(task.state == "input-required" for task in waiting.tasks)
