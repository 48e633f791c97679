"""``harvest --workers N`` and ``--redis/--job``: every query searched once, every document
written once over all the outputs; clear errors when Redis cannot coordinate.

Runs the command line in subprocesses (as test_cli does) against a real ``redis-server``;
skipped when redis-server or redis-py is missing, and failing then when ``CI=true``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from magisterium_async._cli import build_parser
from magisterium_async._cli._command import Invocation
from magisterium_async._cli._options import output
from magisterium_async._cli.harvest import _workers
from magisterium_async._cli.harvest._plan import WorkerPaths
from magisterium_async._cli.harvest._workers import _argv, _Worker
from tests.cli.helpers import cli, jsonl
from tests.helpers.redis_server import RedisServer

QUERIES = 30
SYNTHETIC = ("--emulator", "--synthetic", "3000")


@pytest.fixture
def queries(tmp_path: Path) -> Path:
    path = tmp_path / "queries.txt"
    path.write_text("".join(f"grace nature word{i}\n" for i in range(QUERIES)))
    return path


def written_ids(tmp: Path, pattern: str) -> list[str]:
    return [str(d["id"]) for p in sorted(tmp.glob(pattern)) for d in jsonl(p.read_text())]


def check_exactly_once(summary: dict[str, object], tmp: Path, pattern: str) -> list[str]:
    per_worker = summary["per_worker"]
    assert isinstance(per_worker, list)
    ids = written_ids(tmp, pattern)
    assert len(ids) == len(set(ids))  # each document written once over all the outputs
    assert summary["written"] == len(ids)
    assert summary["searched"] == QUERIES  # each query searched once over all the workers
    assert summary["fetched"] == len(ids) and summary["failed"] == 0
    assert sum(1 for w in per_worker if w["searched"]) >= 2  # the work was shared
    return ids


def test_three_workers_harvest_exactly_once_and_resume_adds_nothing(
    redis_server: RedisServer, queries: Path, tmp_path: Path
) -> None:
    args = ("harvest", *SYNTHETIC, "--workers", "3", str(queries), "--out", "docs.jsonl", "--json")
    shared = ("--redis", redis_server.url, "--job", "test")
    run = cli(*args, *shared, cwd=tmp_path)
    assert run.code == 0, run.err
    summary = json.loads(run.err.splitlines()[-1])
    assert summary["ending"] == "done" and summary["workers"] == 3
    ids = check_exactly_once(summary, tmp_path, "docs.w*.jsonl")

    # One worker finds the same documents.
    alone = cli("harvest", *SYNTHETIC, str(queries), "--out", "one.jsonl", cwd=tmp_path)
    assert alone.code == 0, alone.err
    assert sorted(ids) == sorted(written_ids(tmp_path, "one.jsonl"))

    # Resumed on a private, empty Redis: each worker claims what its state holds first.
    again = cli(*args, "--resume", cwd=tmp_path)
    assert again.code == 0, again.err
    resumed = json.loads(again.err.splitlines()[-1])
    assert resumed["redis"] == "private"
    assert resumed["searched"] == 0 and resumed["fetched"] == 0 and resumed["written"] == 0
    assert written_ids(tmp_path, "docs.w*.jsonl") == ids


def test_invocations_sharing_a_job_split_the_work(
    redis_server: RedisServer, queries: Path, tmp_path: Path
) -> None:
    shared = ("--redis", redis_server.url, "--job", "split", "--json")
    first = cli("harvest", *SYNTHETIC, str(queries), "-o", "a.jsonl", *shared, cwd=tmp_path)
    assert first.code == 0, first.err
    # A second invocation of the same job finds every query claimed: it writes nothing.
    second = cli("harvest", *SYNTHETIC, str(queries), "-o", "b.jsonl", *shared, cwd=tmp_path)
    assert second.code == 0, second.err
    a, b = (json.loads(run.err.splitlines()[-1]) for run in (first, second))
    assert a["searched"] == QUERIES and a["written"] > 0
    assert b["searched"] == 0 and b["written"] == 0 and b["queries_elsewhere"] == QUERIES


def test_workers_without_redis_or_redis_server_is_a_usage_error(
    queries: Path, tmp_path: Path
) -> None:
    run = cli(
        "harvest",
        "--emulator",
        "--workers",
        "2",
        str(queries),
        "--out",
        "docs.jsonl",
        cwd=tmp_path,
        env={"PATH": str(tmp_path)},  # no redis-server on it
    )
    assert run.code == 2
    assert len(run.err.strip().splitlines()) == 1
    assert "--redis URL" in run.err and "redis-server" in run.err
    assert not list(tmp_path.glob("docs*"))


def test_unreachable_redis_is_one_line_and_exits_5(queries: Path, tmp_path: Path) -> None:
    pytest.importorskip("redis", reason="redis-py is not installed")
    unreachable = ("--redis", "redis://:secret@127.0.0.1:1/0", "--job", "j")
    run = cli("harvest", "--emulator", str(queries), "-o", "d.jsonl", *unreachable, cwd=tmp_path)
    assert run.code == 5
    assert len(run.err.strip().splitlines()) == 1
    assert "cannot reach Redis" in run.err and "secret" not in run.err


def test_redis_without_a_job_is_a_usage_error(queries: Path, tmp_path: Path) -> None:
    run = cli("harvest", "--emulator", str(queries), "--redis", "redis://127.0.0.1:1/0")
    assert run.code == 2
    assert "--job NAME" in run.err


def test_a_missing_redis_py_names_the_extra(queries: Path, tmp_path: Path) -> None:
    import subprocess

    from tests.cli.helpers import TIMEOUT, clean_env

    code = (
        "import sys; sys.modules['redis'] = None; "
        "from magisterium_async._cli import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ("harvest", "--emulator", "--workers", "2", str(queries), "--out", "d.jsonl")
    args += ("--redis", "redis://127.0.0.1:1/0", "--job", "j")
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "magisterium-async: error: several workers need redis-py: "
        "pip install 'magisterium-async[redis]'"
    ]


def test_a_workers_argv_does_not_hold_the_redis_url(tmp_path: Path) -> None:
    # A URL may hold a password; every user of the host can read argv (ps), not environ.
    url = "redis://:s3cret@127.0.0.1:6379/0"
    out = str(tmp_path / "d.jsonl")
    words = ["harvest", "-q", "grace", "--out", out, "--workers", "2", "--redis", url, "--job", "j"]
    args = build_parser().parse_args(words)
    worker = _Worker(WorkerPaths(1, str(tmp_path / "d.w1.jsonl"), str(tmp_path / "s.w1")))
    argv = _argv(Invocation(args, output(args)), worker, "j")
    assert not any("s3cret" in word for word in argv)
    assert argv[argv.index("--job") + 1] == "j"


async def test_workers_get_a_credentials_url_in_their_environment_not_argv(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: dict[str, Any] = {}

    async def supervise(workers: object, argvs: list[list[str]], env: dict[str, str]) -> None:
        started.update(argvs=argvs, env=env)  # what the workers would be started with

    monkeypatch.setattr(_workers, "_supervise", supervise)
    credentials = "redis://:s3cret@127.0.0.1:1/0"
    out = str(tmp_path / "d.jsonl")
    words = ["harvest", "-q", "grace", "--out", out, "--workers", "2", "--job", "j"]
    words += ["--redis", redis_server.url, "--credentials", credentials]
    args = build_parser().parse_args(words)
    await _workers.run_workers(Invocation(args, output(args)))
    assert started["env"]["MAGISTERIUM_CREDENTIALS"] == credentials
    assert len(started["argvs"]) == 2
    assert not any("s3cret" in word for argv in started["argvs"] for word in argv)
