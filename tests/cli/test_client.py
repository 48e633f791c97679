"""Where a command's client gets its token, server, quota and cache: the token file (read
as every file a user names is), the environment, the stored sign-in, ``--emulator``.

Run as users run it: the command line in a subprocess, against the standalone emulator.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from magisterium_async.testing import Emulator, EmulatorConfig

from .conftest import Served
from .helpers import TIMEOUT, Run, clean_env, cli


def _token_file(path: Path, served: Served, *args: str) -> Run:
    """``search`` against ``served`` with ``--token-file path`` (a wrong token in the
    environment: the file wins)."""
    env = {"MAGISTERIUM_BASE_URL": served.base_url, "MAGISTERIUM_TOKEN": "sk-not-this-one"}
    return cli("search", "--token-file", str(path), *args, "grace", env=env)


@pytest.mark.parametrize(
    "content",
    [
        b"TOKEN\n",
        b"  TOKEN  \n\n",
        b"\xef\xbb\xbfTOKEN\r\n",  # Notepad: a byte-order mark, CRLF (#50, 5)
        b"\xef\xbb\xbfTOKEN",
        b"TOKEN\r",  # an old Mac's line end
    ],
)
def test_a_token_file_wins_and_is_read_as_any_editor_saved_it(
    content: bytes, served: Served, tmp_path: Path
) -> None:
    path = tmp_path / "token.txt"
    path.write_bytes(content.replace(b"TOKEN", served.token.encode()))
    run = _token_file(path, served, "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "is empty"),
        (b"\xef\xbb\xbf\r\n  \r\n", "is empty"),
        (b"sk-one\r\nsk-two\r\n", "holds 2 lines: a token is one"),
        (b"sk-\x07bell\n", "holds a character no token has"),
        ("sk-caf\u00e9\n".encode(), "holds a character no token has"),
        ("TOKEN".encode("utf-16"), "is not UTF-8 text (byte 0 is not): save it as UTF-8"),
        (b"sk-" + b"x" * (1 << 20) + b"\n", "holds more than 64 KiB"),
    ],
)
def test_a_token_file_that_holds_no_token_is_named_with_what_it_holds(
    content: bytes, says: str, served: Served, tmp_path: Path
) -> None:
    path = tmp_path / "token.txt"
    path.write_bytes(content)
    run = _token_file(path, served)
    assert run.code == 3, run.err
    assert run.err.startswith(f"magisterium-async: error: the token file {path} {says}"), run.err
    assert len(run.err.splitlines()) == 1 and "sk-one" not in run.err and "xxxx" not in run.err


def test_a_token_path_that_is_no_file_is_named_with_what_it_is(
    served: Served, tmp_path: Path
) -> None:
    for path, says in (
        (tmp_path / "missing", "does not exist"),
        (tmp_path, "is a directory, not a file"),
        (Path("/dev/null"), "is empty"),
    ):
        run = _token_file(path, served)
        assert run.code == 3, run.err
        assert f"the token file {path} {says}" in run.err, run.err
    if Path("/dev/zero").exists():  # read up to a bound, never whole
        run = _token_file(Path("/dev/zero"), served)
        assert run.code == 3 and "the token file /dev/zero holds more than" in run.err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_token_fifo_is_read_as_a_process_substitution_gives_it(
    served: Served, tmp_path: Path
) -> None:
    """``--token-file <(pass show magisterium)``: a FIFO with a writer."""
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as writer:  # opens once the command opens it to read
            writer.write(served.token + "\r\n")

    writer = threading.Thread(target=write)
    writer.start()
    run = _token_file(fifo, served)
    writer.join(TIMEOUT)
    assert run.code == 0, run.err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_token_fifo_nobody_writes_ends_at_a_signal(
    signum: int, code: int, tmp_path: Path
) -> None:
    """The careless user's FIFO: its writer opens it and says nothing (or never comes):
    SIGTERM and Ctrl-C end the command as they end any (#50, 1)."""
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "magisterium_async", "search", "--token-file", str(fifo), "x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    # Opening it to write returns once the command has opened it to read: it now waits
    # for a token that never comes, its signal handlers in place.
    try:
        with open(fifo, "w"):
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()  # whatever happened, nothing is left behind
        proc.communicate()
    assert (proc.returncode, out) == (code, "")
    assert (
        err == f"magisterium-async: error: interrupted ({'SIGTERM' if code == 143 else 'Ctrl-C'})\n"
    )


def test_the_token_of_the_environment_is_named_when_it_cannot_be_one() -> None:
    for value in ("\ufeffsk-pasted", "sk one\ttwo"):
        run = cli("search", "grace", env={"MAGISTERIUM_TOKEN": value})
        assert run.code == 2, run.err
        assert run.err.startswith("magisterium-async: error: $MAGISTERIUM_TOKEN: "), run.err


def test_no_token_at_all_says_every_way_to_give_one(tmp_path: Path) -> None:
    run = cli("search", "grace")
    assert run.code == 3 and run.out == ""
    assert len(run.err.splitlines()) == 1
    for way in ("magisterium-async login", "MAGISTERIUM_TOKEN", "--token-file", "--emulator"):
        assert way in run.err
    missing = tmp_path / "mine.json"
    named = cli("search", "grace", "--credentials", str(missing))
    assert named.code == 3, named.err
    assert f"no credentials file at {missing} (--credentials)" in named.err
    assert f"`magisterium-async login --credentials {missing}`" in named.err
    from_env = cli("search", "grace", env={"MAGISTERIUM_CREDENTIALS": str(missing)})
    assert from_env.code == 3 and "($MAGISTERIUM_CREDENTIALS)" in from_env.err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--emulator", "--base-url", "https://x.example/a2a"], "drop --base-url and --token-file"),
        (["--emulator", "--token-file", "t"], "drop --base-url and --token-file"),
        (["--synthetic", "10"], "--synthetic and --emulator-limits need --emulator"),
        (["--emulator-limits"], "--synthetic and --emulator-limits need --emulator"),
        # The token would travel in clear:
        (["--base-url", "http://example.com/a2a"], "--base-url (or $MAGISTERIUM_BASE_URL)"),
    ],
)
def test_options_that_cannot_go_together_exit_2(args: list[str], says: str) -> None:
    run = cli("search", "grace", *args, env={"MAGISTERIUM_TOKEN": "sk-test"})
    assert run.code == 2 and says in run.err, run.err


def test_the_quota_is_the_option_s_else_the_environment_s_else_the_pro_plan_s() -> None:
    def limit(*args: str, quota: str | None = None) -> object:
        env = {} if quota is None else {"MAGISTERIUM_QUOTA": quota}
        run = cli("quota", "--json", *args, env=env)
        assert run.code == 0, run.err
        return json.loads(run.out)["pools"]["default"]["limit"]

    assert limit() == 15
    assert limit(quota="30/4") == 30
    assert limit("--quota", "5/1", quota="30/4") == 5
    assert limit(quota="unlimited") is None
    assert limit("--emulator") is None  # the emulator's client: lifted
    assert limit("--emulator", "--emulator-limits") == 15
    bad = cli("quota", env={"MAGISTERIUM_QUOTA": "lots"})
    assert bad.code == 2 and "$MAGISTERIUM_QUOTA is not a quota" in bad.err


def test_a_cache_file_keeps_answers_between_commands(served: Served, tmp_path: Path) -> None:
    """``-vv`` says each request sent: the second command sends none."""
    path = str(tmp_path / "answers.sqlite")
    env = {"MAGISTERIUM_BASE_URL": served.base_url, "MAGISTERIUM_TOKEN": served.token}
    first = cli("search", "grace", "--cache", path, "-vv", env=env)
    second = cli("search", "grace", "-vv", env={**env, "MAGISTERIUM_CACHE": path})
    assert first.code == second.code == 0, first.err + second.err
    assert first.out == second.out
    sent = "transport: message/send: ok after"  # -vv's line for each request answered
    assert sent in first.err and sent not in second.err


def test_the_emulator_speaks_the_dialect_protocol_names() -> None:
    card = cli("--emulator", "--protocol", "1.0", "card", "--json")
    assert card.code == 0, card.err
    assert json.loads(card.out)["protocol"] == "1.0"
    found = cli("--emulator", "--protocol", "1.0", "search", "grace", "--json")
    assert found.code == 0, found.err
    assert json.loads(found.out)
    assert json.loads(cli("--emulator", "card", "--json").out)["protocol"] == "0.3"


@pytest.mark.parametrize(
    ("served", "spoken", "offered"), [("1.0", "0.3", "1.0"), ("0.2.6", "1.0", "0.3")]
)
async def test_a_protocol_the_server_does_not_speak_says_what_its_card_offers(
    served: str, spoken: str, offered: str, tmp_path: Path
) -> None:
    async with Emulator(EmulatorConfig(protocol=served)) as emulator:  # type: ignore[arg-type]
        env = {"MAGISTERIUM_TOKEN": emulator.token, "MAGISTERIUM_BASE_URL": emulator.base_url}
        for argv in (
            ("search", "grace"),
            ("harvest", "-q", "grace", "-q", "mercy", "--out", "docs.jsonl"),
        ):
            run = await asyncio.to_thread(cli, "--protocol", spoken, *argv, cwd=tmp_path, env=env)
            assert run.code == 2, run.err
            assert (
                f"the server does not understand A2A {spoken}, the dialect --protocol {spoken} "
                f"sends; its agent card offers A2A {offered}"
            ) in run.err
            assert (
                f"drop --protocol (auto speaks what the card offers) or give --protocol {offered}"
            ) in run.err
