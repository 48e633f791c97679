"""The parser: every registered command is reachable, ``--help`` says what users need
(the commands, the environment, the exit codes), and bad arguments are usage errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import magisterium_async
from magisterium_async import _config as _env
from magisterium_async._cli import main
from magisterium_async._cli._app import _negative_values_joined, _taking_values
from magisterium_async._cli._command import Command, Group
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._parser import COMMANDS, PROG, build_parser
from magisterium_async._version import __version__
from tests.cli.helpers import cli


def test_every_registered_command_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    groups = {entry.name for entry in COMMANDS if isinstance(entry, Group)}
    commands = [entry for entry in COMMANDS if isinstance(entry, Command)]
    assert {c.name for c in commands} >= {"ask", "search", "fetch", "harvest", "emulator"}
    for command in commands:
        words = command.name.split()
        assert len(words) == 1 or words[0] in groups
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([*words, "--help"])
        assert exited.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {PROG} {command.name} ")
        assert " ".join(command.help.split()[:3]) in " ".join(out.split())


def test_a_command_line_carries_its_command() -> None:
    args = build_parser().parse_args(["search", "grace"])
    assert isinstance(args.command, Command) and args.command.name == "search"


def test_help_lists_the_commands_the_environment_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {PROG} ")
    for entry in COMMANDS:
        if " " not in entry.name:
            assert entry.name in out
    for variable in (_env.TOKEN_ENV, _env.CREDENTIALS_ENV, _env.BASE_URL_ENV):
        assert variable in out
    assert "exit codes:" in out
    for code in (ExitCode.USAGE, ExitCode.AUTH, ExitCode.INTERRUPTED):
        assert f"  {int(code)} " in out


def test_help_names_every_environment_variable_the_library_reads() -> None:
    """Each MAGISTERIUM_* name anywhere in the package's source is in ``--help``."""
    package = Path(magisterium_async.__file__).parent
    read = {
        name
        for source in package.rglob("*.py")
        for name in re.findall(r"\bMAGISTERIUM_[A-Z_]*[A-Z]\b", source.read_text("utf-8"))
    }
    assert {"MAGISTERIUM_TOKEN", "MAGISTERIUM_REDIS_URL", "MAGISTERIUM_QUOTA"} <= read
    run = cli("--help")
    assert run.code == 0, run.err
    assert sorted(name for name in read if f"  {name} " not in run.out) == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"{PROG} {__version__}"


@pytest.mark.parametrize(
    "argv", [[], ["search"], ["bogus"], ["task"], ["search", "x", "--timeout", "soon"]]
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # whoever parses without main() exits 2 too
        build_parser().parse_args(argv)
    assert exited.value.code == ExitCode.USAGE
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and f"{PROG}" in err and "error: " in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "search"],
        ["search", "--json"],
        ["--json", "bogus"],
        ["--json", "search", "x", "--timeout", "soon"],
        ["search", "x", "--timeout", "0", "--json"],
        ["--js", "task"],  # a prefix argparse takes for --json
    ],
)
def test_under_json_a_usage_error_is_one_json_object_wherever_json_stands(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    record = json.loads(line)
    assert record["exit_code"] == 2 and set(record) == {"error", "exit_code"}
    assert record["error"] and "usage:" not in record["error"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "x", "--quota", "-1/2"], "argument --quota: expected DEFAULT/EXPENSIVE"),
        (["--json", "harvest", "-q", "x", "--quota", "-1/2/60"], "got '-1/2/60'"),
        (["search", "x", "--timeout", "-3s"], "argument --timeout: "),
    ],
)
def test_a_value_that_starts_with_a_minus_is_judged_as_the_option_s_value(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert says in err and "expected one argument" not in err


def test_a_negative_number_a_question_or_anything_after_a_double_dash_stays_a_query() -> None:
    parser = build_parser()
    options = _taking_values(parser)
    assert parser.parse_args(["search", "--emulator", "-5"]).query == ["-5"]
    for argv in (
        ["search", "--", "--quota", "-1/2"],
        ["ask", "--emulator", "-3 reasons for hope?"],  # after a flag: a question
        ["search", "--json", "-1/2"],
        ["ask", "--context-id", "c1", "-3 reasons for hope?"],
    ):
        assert _negative_values_joined(argv, options) == argv
    asked = parser.parse_args(["ask", "--emulator", "-3 reasons for hope?"])
    assert asked.question == ["-3 reasons for hope?"]


def test_json_after_a_double_dash_is_an_argument_not_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["search", "--bogus", "--", "--json"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("usage: ")


def test_common_options_are_taken_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--emulator", "search", "grace"])
    after = parser.parse_args(["search", "grace", "--json", "--emulator"])
    assert (before.json, before.emulator) == (after.json, after.emulator) == (True, True)
