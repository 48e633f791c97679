"""The command line as a whole: help, usage errors, exit codes, the console script, no rich.

Run as users run it: ``python -m magisterium_async`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.credentials import credentials, save_credentials

from .conftest import Served
from .helpers import TIMEOUT, clean_env, cli


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
    assert record["exit_code"] == 2 and "2026-02-30 is not a date" in record["error"]
    plain = cli("saints", "--emulator", "2026-02-30")
    assert plain.code == 2 and plain.err.startswith("magisterium-async: error: 2026-02-30")


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


def _limited_memory() -> None:
    """In the child: 2 GiB of address space, so a file read whole fails fast, not the host."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(sys.platform == "win32", reason="no /dev/zero, no RLIMIT_AS")
def test_a_token_file_that_never_ends_is_refused_naming_it() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "magisterium_async", "search", "--token-file", "/dev/zero", "x"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
        preexec_fn=_limited_memory,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("magisterium-async: error: the token file /dev/zero holds more")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_token_file_too_large_or_not_text_is_refused_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_text("sk-" + "x" * (1 << 20) + "\n")  # a megabyte on one line: not a token
    run = cli("search", "--token-file", str(big), "x")
    assert run.code == 3 and f"the token file {big} holds more than 64 KiB" in run.err
    assert "xxxx" not in run.err
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe sk-token")
    run = cli("search", "--token-file", str(binary), "x")
    assert run.code == 3 and f"the token file {binary} is not UTF-8 text" in run.err
    folder = tmp_path / "folder"
    folder.mkdir()
    run = cli("search", "--token-file", str(folder), "x")
    assert run.code == 3 and f"cannot read the token file {folder}" in run.err


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
    assert "argument --max-retries: must be >= 0" in runs[1].err
    assert "argument --max-retries: must be <= 100" in runs[2].err  # a call must end
    assert "(--credentials)" in runs[3].err and "--token-file PATH" in runs[3].err
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
