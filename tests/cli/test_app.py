"""The command line as a whole: help, usage errors, exit codes, the console script, no rich.

Run as users run it: ``python -m magisterium_async`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.credentials import credentials, save_credentials

from .helpers import TIMEOUT, clean_env, cli


def test_the_console_script_runs_the_same_command_line() -> None:
    script = Path(sys.executable).with_name("magisterium-async")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("magisterium-async ")


def test_without_rich_every_command_prints_plain_text() -> None:
    """Without the [cli] extra nothing fails after a request was spent: rich only adds
    colour, tables and live progress."""
    code = (
        "import sys; sys.modules['rich'] = None; "
        "from magisterium_async._cli import main; sys.exit(main(sys.argv[1:]))"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", code, *args]
        return subprocess.run(
            command, capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT
        )

    found = run("search", "--emulator", "grace")
    assert found.returncode == 0, found.stderr
    assert "documents for 'grace'" in found.stdout and "  1  " in found.stdout
    document_id = found.stdout.splitlines()[1].split()[1]
    fetched = run("fetch", "--emulator", document_id)
    assert fetched.returncode == 0, fetched.stderr
    assert f"id {document_id}" in fetched.stdout and "─" in fetched.stdout
    answered = run("ask", "--emulator", "what is grace?")
    assert answered.returncode == 0, answered.stderr
    assert "Sources" in answered.stdout and "context " in answered.stdout
    assert json.loads(run("search", "--emulator", "--json", "grace").stdout)


def test_under_json_an_error_is_one_json_object_on_stderr() -> None:
    run = cli("saints", "--emulator", "--json", "2026-02-30")
    assert run.code == 2 and run.out == ""
    record = json.loads(run.err)
    assert record["exit_code"] == 2 and "'2026-02-30' is not a date that exists" in record["error"]
    plain = cli("saints", "--emulator", "2026-02-30")
    assert plain.code == 2 and plain.err.startswith("magisterium-async: error: when: '2026-02-30'")


def test_under_json_a_library_warning_is_a_json_object_on_stderr_too() -> None:
    """A cache that cannot be used is bypassed with a warning: under ``--json`` it is a
    line a program parses like the rest; without, the plain line."""
    unused = ("search", "--emulator", "--cache", "redis://127.0.0.1:1", "grace")
    run = cli("--json", *unused)
    assert run.code == 0 and json.loads(run.out), run.err
    [warning] = [json.loads(line) for line in run.err.splitlines()]
    assert warning["level"] == "warning" and warning["logger"] == "magisterium_async.cache"
    assert "cannot be used" in warning["message"]
    plain = cli(*unused)
    assert plain.code == 0 and plain.err.startswith("cache redis://127.0.0.1:1 cannot be used")


def test_a_sign_in_for_another_server_exits_3(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, credentials())  # for https://www.magisterium.com
    args = ("search", "grace", "--credentials", str(path))
    run = cli(*args, "--base-url", "https://elsewhere.example/a2a")
    assert run.code == 3, run.err
    assert "are for https://www.magisterium.com" in run.err
    missing = cli("search", "grace", "--credentials", str(tmp_path / "none.json"))
    assert missing.code == 3 and "no credentials file" in missing.err


def test_a_usage_error_under_json_is_json_wherever_json_stands(tmp_path: Path) -> None:
    """The user's line: ``--json`` before the command, and a value the command refuses."""
    out = str(tmp_path / "z.jsonl")
    harvest = ["harvest", "--emulator", "-q", "grace", "--concurrency", "0", "--out", out]
    for words in (["--json", *harvest], [*harvest, "--json"], ["--json", "search"]):
        run = cli(*words)
        assert run.code == 2 and run.out == "", run.err
        [line] = run.err.splitlines()
        record = json.loads(line)
        assert record["exit_code"] == 2 and record["error"], record
        assert words[1] == "search" or "--concurrency" in record["error"]
    assert list(tmp_path.iterdir()) == []
    plain = cli(*harvest)
    assert plain.code == 2 and plain.err.startswith("usage: magisterium-async harvest")


def test_messages_name_flags_and_variables_never_constructor_arguments(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("sk-test\n")
    runs = [
        cli("search", "x", "--token-file", str(token), "--base-url", "https://u:pw@h.example/a2a"),
        cli("search", "x", "--token-file", str(token), "--max-retries", "-1"),
        cli("search", "x", "--token-file", str(token), "--max-retries", "1" + "0" * 30),
        cli("search", "x", "--credentials", str(tmp_path / "none.json")),
        cli("search", "x", env={"MAGISTERIUM_BASE_URL": "ftp://x", "MAGISTERIUM_TOKEN": "t"}),
    ]
    for run in runs:
        assert run.code in (2, 3), run.err
        assert not re.search(r"\b[a-z_]+=(\s|$|\)|;|,)", run.err), run.err  # "token=", ...
    assert "--base-url" in runs[0].err and "--token-file" in runs[0].err
    assert "argument --max-retries: must be a whole number from 0 to 100, got -1" in runs[1].err
    assert (
        "argument --max-retries: must be a whole number from 0 to 100, got 1" in runs[2].err
    )  # a call ends
    assert "(--credentials)" in runs[3].err
    assert "$MAGISTERIUM_BASE_URL" in runs[4].err


def test_one_result_is_one_document(tmp_path: Path) -> None:
    run = cli("search", "--emulator", "--synthetic", "1", "grace")
    assert run.code == 0, run.err
    assert run.out.startswith("1 document for 'grace'"), run.out


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_unwritable_stdout_and_a_bad_cache_exit_2_as_the_harvest_does(tmp_path: Path) -> None:
    """One rule for exit codes: what the user named that cannot be used, or an output that
    cannot be written, is a usage error (2) for every command, as for the harvest."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "magisterium_async", "search", "--emulator", "grace"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            timeout=TIMEOUT,
        )
    assert proc.returncode == 2, proc.stderr
    assert "error: cannot write stdout: the disk is full" in proc.stderr
    harvest = cli("harvest", "--emulator", "-q", "grace", "--out", "/dev/full")
    assert harvest.code == 2 and "the disk is full" in harvest.err
    missing = str(tmp_path / "nowhere" / "c.sqlite")
    for argv in (("search", "grace"), ("harvest", "-q", "grace")):
        run = cli(*argv, "--emulator", "--cache", missing, cwd=tmp_path)
        assert run.code == 2, run.err
        assert "does not exist" in run.err
    named = cli("search", "grace", "--emulator", env={"MAGISTERIUM_CACHE": missing}, cwd=tmp_path)
    assert named.code == 2, named.err
    assert "error: $MAGISTERIUM_CACHE: " in named.err and "does not exist" in named.err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_redis_url_with_an_unknown_option_exits_2_naming_it_before_anything(
    tmp_path: Path,
) -> None:
    # Not a traceback at the first call: the URL is refused as ?db=abc is, wherever it is
    # named, the option named and the password masked.
    url = "redis://:hunter2@127.0.0.1:1/0?foo=bar"
    out = str(tmp_path / "d.jsonl")
    runs = {
        "--cache": cli("search", "grace", "--emulator", "--cache", url),
        "--credentials": cli("search", "grace", "--credentials", url),
        "--redis": cli("harvest", "-q", "grace", "--emulator", "--out", out, "--redis", url),
        "$MAGISTERIUM_CACHE": cli("search", "grace", "--emulator", env={"MAGISTERIUM_CACHE": url}),
    }
    for named, run in runs.items():
        assert run.code == 2 and run.out == "", run.err
        assert (
            f"error: {named}: invalid Redis URL 'redis://:***@127.0.0.1:1/0?foo=bar': " in run.err
        )
        assert "unknown option 'foo'" in run.err
        assert "hunter2" not in run.err and "Traceback" not in run.err
    cluster = "rediss+cluster://127.0.0.1:1?sentinel_password=hunter2"
    record = json.loads(cli("--json", "search", "grace", "--emulator", "--cache", cluster).err)
    assert record["exit_code"] == 2 and "unknown option 'sentinel_password'" in record["error"]
    assert "hunter2" not in record["error"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.access("/proc/sys", os.W_OK), reason="/proc/sys is writable here")
def test_a_cache_that_can_never_be_written_exits_2_before_sending(tmp_path: Path) -> None:
    # A read-only directory (as root, only a read-only mount is one: /proc/sys here).
    for argv in (("search", "grace"), ("harvest", "-q", "grace")):
        run = cli(*argv, "--emulator", "--cache", "/proc/sys/c.sqlite", cwd=tmp_path)
        assert run.code == 2, run.err
        assert "cannot be written (its directory '/proc/sys' is read-only)" in run.err
        assert "Traceback" not in run.err


@pytest.mark.parametrize(
    "argv",
    [("fetch", "10301"), ("search", "grace"), ("pope-lookup", "Pius X"), ("card",)],
    ids=lambda argv: argv[0],
)
def test_a_reader_gone_ends_every_command_quietly_with_0(argv: tuple[str, ...]) -> None:
    """`| head -1`: rich's text and plain text alike end with 0 and nothing on stderr (rich
    on its own exits 1, which says an error of the service)."""
    read, write = os.pipe()
    os.close(read)  # the reader gone before the first line
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "magisterium_async", *argv, "--emulator"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            timeout=TIMEOUT,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")


def _close_stdout() -> None:
    os.close(1)


@pytest.mark.parametrize(
    "argv",
    [("search", "grace", "--emulator"), ("--json", "search", "grace", "--emulator"), ("quota",)],
)
def test_a_closed_stdout_is_named_and_exits_2(argv: tuple[str, ...]) -> None:
    """`search grace >&-`: Python leaves ``sys.stdout`` None, where ``print()`` writes
    nothing (exit 0, no result) and ``--json`` met a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", *argv],
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
        preexec_fn=_close_stdout,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot write stdout: it is closed" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "code"),
    [(("search",), 2), (("fetch", "424242", "--emulator"), 6), (("--json", "search"), 2)],
)
def test_a_reader_of_stderr_gone_changes_no_exit_code(argv: tuple[str, ...], code: int) -> None:
    """`2>&1 | head -1` on an error: the code still says what went wrong (it was 1)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "magisterium_async", *argv],
            stdout=subprocess.DEVNULL,
            stderr=write,
            env=clean_env(),
            timeout=TIMEOUT,
        )
    finally:
        os.close(write)
    assert proc.returncode == code


def _run_hooked(hook: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line run with ``hook`` (Python) run first: a Ctrl-C sent at an instant
    no timing could hit every time."""
    program = f"import asyncio, signal, sys\n{hook}\nfrom magisterium_async._cli import main\n"
    return subprocess.run(
        [sys.executable, "-c", program + "sys.exit(main(sys.argv[1:]))", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
    )


def test_a_ctrl_c_as_the_event_loop_shuts_down_cannot_break_its_cleanup(tmp_path: Path) -> None:
    """A late Ctrl-C (the third of three) once raised KeyboardInterrupt in asyncio's
    shutdown: the worker threads it stops were left waiting, and the process with them,
    after it had said it was interrupted."""
    hook = textwrap.dedent(
        """
        shutdown_asyncgens = asyncio.BaseEventLoop.shutdown_asyncgens

        async def interrupted(loop):
            signal.raise_signal(signal.SIGINT)  # the command done, the loop shutting down
            await shutdown_asyncgens(loop)
            print("the loop shut down", file=sys.stderr, flush=True)

        asyncio.BaseEventLoop.shutdown_asyncgens = interrupted
        """
    )
    out = tmp_path / "docs.jsonl"
    run = _run_hooked(hook, "harvest", "--emulator", "--query", "grace", "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert run.stderr.endswith("the loop shut down\n"), run.stderr
    assert "interrupted" not in run.stderr.lower() and "Traceback" not in run.stderr


@pytest.mark.parametrize("json_asked", [False, True], ids=["plain", "--json"])
def test_a_ctrl_c_while_the_arguments_are_parsed_is_said_as_an_error(json_asked: bool) -> None:
    """Not a traceback: one line, or under ``--json`` one JSON object, and exit 130. (One
    during Python's imports, before the command line runs, is still a traceback.)"""
    hook = textwrap.dedent(
        """
        from magisterium_async._cli import _app

        build_parser = _app.build_parser

        def interrupted():
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while the parser is built
            return build_parser()

        _app.build_parser = interrupted
        """
    )
    json_option = ["--json"] if json_asked else []
    run = _run_hooked(hook, *json_option, "harvest", "--emulator", "--query", "grace")
    assert run.returncode == 130, run.stderr
    assert run.stdout == ""
    if json_asked:
        assert json.loads(run.stderr) == {"error": "interrupted (Ctrl-C)", "exit_code": 130}
    else:
        assert run.stderr == "magisterium-async: error: interrupted (Ctrl-C)\n"
