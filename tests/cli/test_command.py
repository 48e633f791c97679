"""Commands registered once: each parses to itself and takes the shared options."""

from __future__ import annotations

import argparse

import pytest

from magisterium_async._cli import build_parser, main
from magisterium_async._cli._command import Command, Group, Invocation, add_commands
from magisterium_async._cli._output import Output
from magisterium_async._cli._parser import COMMANDS

# The arguments each command needs to parse.
_ARGUMENTS = {
    "ask": ["what"],
    "search": ["grace"],
    "fetch": ["1"],
    "task get": ["t"],
    "task cancel": ["t"],
    "rebuild": ["docs.jsonl.state.sqlite"],
    **{name: ["Pius X"] for name in ("saint-lookup", "person-lookup", "pope-lookup")},
    **{name: ["Westminster"] for name in ("diocese-lookup", "diocese-statistics-lookup")},
}


def _commands() -> list[Command]:
    return [entry for entry in COMMANDS if isinstance(entry, Command)]


@pytest.mark.parametrize("command", _commands(), ids=lambda c: c.name)
def test_every_command_parses_to_itself_with_the_common_options(command: Command) -> None:
    words = [*command.name.split(), *_ARGUMENTS.get(command.name, [])]
    args = build_parser().parse_args([*words, "--json"])
    assert args.command is command
    assert args.json is True
    assert hasattr(args, "emulator") is True  # the main parser's default, at least
    if command.connects:
        assert build_parser().parse_args([*words, "--emulator"]).emulator is True
    else:
        with pytest.raises(SystemExit):
            build_parser().parse_args([*words, "--emulator"])


def test_a_command_of_two_words_lives_under_its_group() -> None:
    ran: list[argparse.Namespace] = []

    async def run(invocation: Invocation) -> int:
        ran.append(invocation.args)
        return 0

    parser = argparse.ArgumentParser()
    status = Command("auth status", "what is signed in", run, connects=False)
    add_commands(parser, [Group("auth", "sign in and out"), status])
    args = parser.parse_args(["auth", "status"])
    assert args.command is status
    with pytest.raises(SystemExit):
        parser.parse_args(["auth"])  # a group alone is not a command


def test_main_runs_the_parsed_command_with_its_output_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Output] = []

    async def run(invocation: Invocation) -> int:
        seen.append(invocation.output)
        return 7

    command = Command("probe", "a test command", run, connects=False)
    monkeypatch.setattr("magisterium_async._cli._parser.COMMANDS", (command,))
    assert main(["probe", "--json"]) == 7
    assert seen == [Output(json=True)]
