"""``card``, ``task list`` and ``--protocol``: which dialect the server speaks, from the CLI."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import Served
from .helpers import cli


def _env(served: Served) -> dict[str, str]:
    return {"MAGISTERIUM_BASE_URL": served.base_url, "MAGISTERIUM_TOKEN": served.token}


def test_card_says_the_service_speaks_today_s_dialect() -> None:
    run = cli("card", "--emulator")
    assert run.code == 0, run.err
    assert "speaks:   A2A 0.3 JSON-RPC" in run.out
    assert "card protocolVersion 0.2.6" in run.out
    record = json.loads(cli("card", "--emulator", "--json").out)
    assert (record["protocol"], record["card"]["protocolVersion"]) == ("0.3", "0.2.6")
    assert record["card_url"].endswith("/.well-known/agent.json")


@pytest.mark.parametrize(
    ("protocol", "path"),
    [
        ("auto", "agent.json"),  # the service's own (A2A 0.2.6)
        ("0.3", "agent-card.json"),  # A2A 0.3.0 renamed it
        ("1.0", "agent-card.json"),  # and 1.0 kept the name
    ],
)
def test_card_names_where_the_emulator_of_each_dialect_serves_it(protocol: str, path: str) -> None:
    run = cli("card", "--emulator", "--protocol", protocol)
    assert run.code == 0, run.err
    assert re.search(rf"^  card: +http://127\.0\.0\.1:\d+/\.well-known/{path}$", run.out, re.M)
    record = json.loads(cli("card", "--emulator", "--protocol", protocol, "--json").out)
    assert record["card_url"].endswith(f"/.well-known/{path}")


@pytest.mark.parametrize("server", ["served", "served_v1"])
def test_card_says_what_the_emulator_s_banner_says(
    server: str, request: pytest.FixtureRequest
) -> None:
    served: Served = request.getfixturevalue(server)
    path = "agent-card.json" if server == "served_v1" else "agent.json"
    assert served.card_url.endswith(f"/.well-known/{path}")
    for protocol in ("auto", "0.3", "1.0"):  # whatever the client speaks, it finds the card
        run = cli("card", "--json", "--protocol", protocol, env=_env(served))
        assert run.code == 0, run.err
        assert json.loads(run.out)["card_url"] == served.card_url, protocol
    assert f"  card:     {served.card_url}\n" in cli("card", env=_env(served)).out


def test_card_and_task_list_against_a_1_0_server(served_v1: Served) -> None:
    env = _env(served_v1)
    record = json.loads(cli("card", "--json", env=env).out)
    assert (record["protocol"], record["endpoint"]) == ("1.0", served_v1.base_url)
    assert "speaks:   A2A 1.0 JSON-RPC" in cli("card", env=env).out

    sent = json.loads(cli("search", "--json", "grace", env=env).out)
    assert sent
    listed = cli("task", "list", "--json", "--state", "completed", env=env)
    assert listed.code == 0, listed.err
    page = json.loads(listed.out)
    assert page["tasks"] and all(t["status"]["state"] == "completed" for t in page["tasks"])
    assert "completed" in cli("task", "list", "--page-size", "1", env=env).out


def test_task_list_where_the_server_has_none(served: Served) -> None:
    run = cli("task", "list", env=_env(served))
    assert run.code != 0
    assert "does not offer ListTasks" in run.err


def test_protocol_names_the_dialect(served_v1: Served) -> None:
    env = _env(served_v1)
    assert cli("search", "--protocol", "1.0", "grace", env=env).code == 0
    refused = cli("search", "--protocol", "0.3", "grace", env=env)
    assert refused.code != 0 and "Method not found" in refused.err
    assert cli("search", "--protocol", "2.0", "grace", env=env).code == 2
