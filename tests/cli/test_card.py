"""``card``, ``task list`` and ``--protocol``: which dialect the server speaks, from the CLI."""

from __future__ import annotations

import json

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
