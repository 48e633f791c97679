"""``task get`` and ``task cancel`` against the standalone emulator."""

from __future__ import annotations

import json

from .conftest import Served
from .helpers import cli


def test_task_get_and_cancel(served: Served) -> None:
    env = {"MAGISTERIUM_BASE_URL": served.base_url, "MAGISTERIUM_TOKEN": served.token}
    answer = json.loads(cli("ask", "--json", "What is grace?", env=env).out)
    task_id = answer["task"]["id"]
    got = cli("task", "get", task_id, env=env)
    assert got.code == 0, got.err
    assert task_id in got.out and "completed" in got.out
    assert json.loads(cli("task", "get", "--json", task_id, env=env).out)["id"] == task_id
    cancel = cli("task", "cancel", task_id, env=env)
    assert cancel.code == 1
    assert f"error: task {task_id} is already completed: only a task still running can be " in (
        cancel.err
    )
    assert "Traceback" not in cancel.err
    assert cli("task", "get", "no-such-task", env=env).code == 6


def test_task_calls_refuse_the_emulator_of_one_command() -> None:
    for action in ("get", "cancel"):
        run = cli("task", action, "--emulator", "some-task")
        assert run.code == 2
        assert len(run.err.strip().splitlines()) == 1
        assert "`magisterium-async emulator`" in run.err and "fresh emulator" in run.err
