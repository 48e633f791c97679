"""The command line, run as users run it: ``python -m magisterium_async`` in a subprocess.

Most runs use ``--emulator`` (an in-process emulator); the standalone ``emulator`` command
serves the tests that need a server that outlives one command (a wrong token, tasks).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TIMEOUT = 60


@dataclass
class Run:
    code: int
    out: str
    err: str


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAGISTERIUM_")}
    env.update(COLUMNS="200", PYTHONIOENCODING="utf-8", **extra)
    return env


def cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(**(env or {})),
        cwd=cwd,
        timeout=TIMEOUT,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


@dataclass
class Served:
    base_url: str
    token: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """The standalone ``emulator`` command on a free port, told apart by its printed line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", "emulator", "--port", "0", "--no-limits"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        for line in proc.stdout:
            if line.strip().startswith("export "):
                values = dict(item.split("=", 1) for item in line.split()[1:])
                break
        else:
            pytest.fail(f"the emulator printed no export line: {proc.stderr.read()}")
        yield Served(values["MAGISTERIUM_BASE_URL"], values["MAGISTERIUM_TOKEN"])
    finally:
        proc.terminate()
        assert proc.wait(timeout=TIMEOUT) == 0  # SIGTERM stops it cleanly
        proc.stdout.close()
        proc.stderr.close()


# -- help and usage -------------------------------------------------------------------------


def test_help_lists_the_commands_and_the_exit_codes() -> None:
    run = cli("--help")
    assert run.code == 0
    for word in ("ask", "search", "fetch", "readings", "saints", "task", "harvest", "emulator"):
        assert word in run.out
    assert "exit codes:" in run.out
    assert "130" in run.out and "MAGISTERIUM_TOKEN" in run.out


def test_a_usage_error_exits_2() -> None:
    run = cli("search")
    assert run.code == 2
    assert "required" in run.err


def test_a_missing_token_is_one_line_naming_the_variable_and_exits_3() -> None:
    run = cli("search", "grace")
    assert run.code == 3
    assert run.out == ""
    assert len(run.err.strip().splitlines()) == 1
    assert "MAGISTERIUM_TOKEN" in run.err


# -- every command against --emulator -------------------------------------------------------


def test_search_prints_a_table_and_json() -> None:
    human = cli("search", "--emulator", "grace")
    assert human.code == 0, human.err
    assert "Ineffabilis Deus" in human.out and "10301" in human.out
    machine = cli("--json", "search", "--emulator", "grace")
    assert machine.code == 0, machine.err
    results = json.loads(machine.out)
    assert results and {"id", "url", "title"} <= results[0].keys()
    assert "Ineffabilis Deus" in [r["title"] for r in results]


def test_ask_prints_the_answer_sources_and_related_questions() -> None:
    run = cli("ask", "--emulator", "What", "is", "grace?")
    assert run.code == 0, run.err
    assert "Sources" in run.out and "[1] Ineffabilis Deus — Pope Pius IX, 1854" in run.out
    assert "https://www.magisterium.com/library/10301" in run.out
    assert "Related questions" in run.out


def test_ask_json_is_the_answer_with_its_task() -> None:
    run = cli("ask", "--emulator", "--json", "What is grace?")
    assert run.code == 0, run.err
    answer = json.loads(run.out)
    assert {"text", "citations", "related_questions", "context_id", "task"} <= answer.keys()
    assert answer["citations"][0]["document_title"] == "Ineffabilis Deus"
    assert answer["task"]["status"]["state"] == "completed"


def test_fetch_prints_a_document_and_json() -> None:
    human = cli("fetch", "--emulator", "10301")
    assert human.code == 0, human.err
    assert "Ineffabilis Deus" in human.out and "Pope Pius IX" in human.out
    machine = cli("fetch", "--emulator", "--json", "10301")
    document = json.loads(machine.out)
    assert document["id"] == "10301" and document["author"] == "Pope Pius IX"
    assert "Immaculate Conception" in document["text"]


def test_fetch_of_a_missing_document_exits_6() -> None:
    run = cli("fetch", "--emulator", "424242")
    assert run.code == 6
    assert run.out == ""
    assert run.err.strip() == "magisterium-async: error: document 424242 not found"


def test_readings_and_saints() -> None:
    readings = cli("readings", "--emulator", "next", "Sunday")
    assert readings.code == 0, readings.err
    assert "Gospel:" in readings.out
    saints = cli("saints", "--emulator", "--json", "2026-03-19")
    assert saints.code == 0, saints.err
    body = json.loads(saints.out)
    assert body["when"] == "2026-03-19" and "Saint Joseph" in body["text"]


def test_readings_not_found_exits_6() -> None:
    run = cli("readings", "--emulator", "no", "such", "day")
    assert run.code == 6
    assert "no Mass readings found" in run.err


# -- against the standalone emulator command ------------------------------------------------


def test_token_file_and_base_url_from_the_environment(served: Served, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(served.token + "\n")
    env = {"MAGISTERIUM_BASE_URL": served.base_url}
    run = cli("search", "--json", "--token-file", str(token_file), "Eucharist", env=env)
    assert run.code == 0, run.err
    assert json.loads(run.out)


def test_a_refused_token_exits_3_without_printing_it(served: Served) -> None:
    secret = "sk-wrong-1234567890"
    run = cli("search", "--base-url", served.base_url, "grace", env={"MAGISTERIUM_TOKEN": secret})
    assert run.code == 3
    assert "token was refused" in run.err
    assert secret not in run.err + run.out


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
    assert "Invalid state transition" in cancel.err
    assert cli("task", "get", "no-such-task", env=env).code == 6


# -- harvest --------------------------------------------------------------------------------


def test_harvest_writes_jsonl_once_and_resume_adds_nothing(tmp_path: Path) -> None:
    args = ("harvest", "--emulator", "--query", "grace", "--query", "Eucharist")
    first = cli(*args, "--out", "docs.jsonl", cwd=tmp_path)
    assert first.code == 0, first.err
    lines = jsonl((tmp_path / "docs.jsonl").read_text())
    ids = [line["id"] for line in lines]
    assert ids and len(ids) == len(set(ids))
    assert all({"id", "title", "author", "ref", "text"} <= line.keys() for line in lines)
    assert f"Harvested {len(ids)} documents from 2 queries" in first.err
    assert (tmp_path / "docs.jsonl.state.sqlite").exists()

    again = cli(*args, "--out", "docs.jsonl", cwd=tmp_path)
    assert again.code == 2
    assert "--resume" in again.err

    resumed = cli(*args, "--out", "docs.jsonl", "--resume", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert jsonl((tmp_path / "docs.jsonl").read_text()) == lines
    assert "Harvested 0 documents" in resumed.err


def test_harvest_reads_stdin_and_writes_stdout() -> None:
    queries = "grace\n\nmercy and love\n"
    run = cli("harvest", "--emulator", "--synthetic", "1000", "--json", "-", stdin=queries)
    assert run.code == 0, run.err
    ids = [line["id"] for line in jsonl(run.out)]
    assert ids and len(ids) == len(set(ids))
    summary = json.loads(run.err)
    assert summary["queries"] == 2 and summary["written"] == len(ids)


def test_harvest_ctrl_c_exits_130_and_resume_completes_it(tmp_path: Path) -> None:
    state = str(tmp_path / "state.sqlite")
    command = [sys.executable, "-m", "magisterium_async", "harvest", "--emulator", "-"]
    proc = subprocess.Popen(
        [*command, "--state", state],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("grace\n")
        proc.stdin.flush()
        # The first document out: the harvest is under way (stdin still open).
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert ready, "no document within the timeout"
        first = [json.loads(proc.stdout.readline())]
        proc.send_signal(signal.SIGINT)  # while stdin stays open, as at a terminal
        # Read through the same buffered pipes as readline() above (communicate() would
        # read the raw descriptors and miss what the buffer already holds).
        out = proc.stdout.read()
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == 130, err
    assert "Interrupted after" in err and "--resume" in err
    first += jsonl(out)

    rest = cli("harvest", "--emulator", "--state", state, "--resume", "-", stdin="grace\n")
    assert rest.code == 0, rest.err
    fresh = cli("harvest", "--emulator", "-", stdin="grace\n")
    ids = [str(d["id"]) for d in first + jsonl(rest.out)]
    assert sorted(ids) == sorted(str(d["id"]) for d in jsonl(fresh.out))


# -- the console script and a missing rich --------------------------------------------------


def test_the_console_script_runs_the_same_command_line() -> None:
    script = Path(sys.executable).with_name("magisterium-async")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, env=_env(), timeout=TIMEOUT
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("magisterium-async ")


def test_without_rich_human_output_says_how_to_install_it_and_json_still_works() -> None:
    code = (
        "import sys; sys.modules['rich'] = None; "
        "from magisterium_async._cli import main; sys.exit(main(sys.argv[1:]))"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", code, *args]
        return subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=TIMEOUT)

    human = run("search", "--emulator", "grace")
    assert human.returncode == 1
    assert "pip install 'magisterium-async[cli]'" in human.stderr
    assert len(human.stderr.strip().splitlines()) == 1
    assert json.loads(run("search", "--emulator", "--json", "grace").stdout)
