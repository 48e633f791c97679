"""The parser: every registered command is reachable, ``--help`` says what users need
(the commands, the environment, the exit codes), and bad arguments are usage errors."""

from __future__ import annotations

import pytest

from magisterium_async import _config as _env
from magisterium_async._cli._command import Command, Group
from magisterium_async._cli._errors import ExitCode
from magisterium_async._cli._parser import COMMANDS, PROG, build_parser
from magisterium_async._version import __version__


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


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"{PROG} {__version__}"


@pytest.mark.parametrize(
    "argv", [[], ["search"], ["bogus"], ["task"], ["search", "x", "--timeout", "soon"]]
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == ExitCode.USAGE
    assert f"{PROG}" in capsys.readouterr().err


def test_common_options_are_taken_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--emulator", "search", "grace"])
    after = parser.parse_args(["search", "grace", "--json", "--emulator"])
    assert (before.json, before.emulator) == (after.json, after.emulator) == (True, True)
