"""The command line's arguments, as users type them: every command reachable with the
shared options before or after its name, ``--help`` saying what users need, and every
bad value refused naming its flag and saying what is wrong with it (exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import magisterium_async
from magisterium_async._cli import build_parser, main
from magisterium_async._version import __version__
from tests.cli.helpers import cli

PROG = "magisterium-async"


def _commands() -> list[list[str]]:
    """Every command's words, as ``--help`` lists them (``task get`` under ``task``)."""
    parser = build_parser()
    found: list[list[str]] = []

    def walk(parser: object, words: list[str]) -> None:
        actions = getattr(parser, "_actions", [])
        subs = [a for a in actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs and words:
            found.append(words)
        for sub in subs:
            for name, child in sub.choices.items():
                walk(child, [*words, name])

    walk(parser, [])
    return found


def test_every_command_has_its_help_and_takes_the_shared_options_anywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = _commands()
    names = {" ".join(words) for words in commands}
    assert {"ask", "search", "fetch", "harvest", "emulator", "task get", "card", "quota"} <= names
    for words in commands:
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*words, "--help"])
        assert exited.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: {PROG} {' '.join(words)} ")
    before = build_parser().parse_args(["--json", "--emulator", "search", "grace"])
    after = build_parser().parse_args(["search", "grace", "--json", "--emulator"])
    neither = build_parser().parse_args(["search", "grace"])
    assert (before.json, before.emulator) == (after.json, after.emulator) == (True, True)
    assert (neither.json, neither.emulator) == (False, False)


def test_help_lists_the_commands_the_exit_codes_and_every_variable_the_library_reads() -> None:
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
    assert "error naming its variable (exit 2)" in run.out
    for word in ("ask", "search", "fetch", "readings", "saints", "task", "harvest", "emulator"):
        assert f"    {word}" in run.out
    for code in (0, 2, 3, 7, 130, 143):
        assert re.search(rf"^  {code} +\w", run.out, re.M), code


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"{PROG} {__version__}"


@pytest.mark.parametrize(
    "argv", [[], ["search"], ["bogus"], ["task"], ["search", "x", "--timeout", "soon"]]
)
def test_bad_arguments_print_the_usage_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:  # whoever parses without main() exits 2 too
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {PROG}") and "error: " in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "search"],
        ["search", "--json"],
        ["--json", "bogus"],
        ["--json", "search", "x", "--timeout", "soon"],
        ["search", "x", "--timeout", "0", "--json"],
        ["--j", "task"],  # a prefix argparse takes for --json
    ],
)
def test_under_json_a_usage_error_is_one_json_object_wherever_json_stands(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    record = json.loads(line)
    assert record["exit_code"] == 2 and set(record) == {"error", "exit_code"}
    assert record["error"] and "usage:" not in record["error"]


def test_json_after_a_double_dash_is_a_word_not_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["search", "--bogus", "--", "--json"]) == 2
    assert capsys.readouterr().err.startswith("usage: ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        # Not finite: said so, never "must be > 0" (#50, 9).
        (
            ["search", "x", "--timeout", "inf"],
            "argument --timeout: expected a finite number, got inf",
        ),
        (
            ["search", "x", "--timeout", "nan"],
            "argument --timeout: expected a finite number, got nan",
        ),
        (["search", "x", "--timeout", "1e400"], "argument --timeout: expected a finite number"),
        (["search", "x", "--timeout", "0"], "argument --timeout: must be > 0, got 0"),
        (["search", "x", "--timeout", "soon"], "argument --timeout: expected a number, got 'soon'"),
        # A value that starts with a minus is the option's value, judged as such.
        (["search", "x", "--timeout", "-3s"], "argument --timeout: expected a number, got '-3s'"),
        (["search", "x", "--timeout", "-3"], "argument --timeout: must be > 0, got -3"),
        (["search", "x", "--quota", "-1/2"], "argument --quota: expected DEFAULT/EXPENSIVE"),
        (["--json", "harvest", "-q", "x", "--quota", "-1/2/60"], "got '-1/2/60'"),
        (
            ["search", "x", "--max-retries", "-1"],
            "argument --max-retries: must be a whole number from 0 to 100",
        ),
        (
            ["search", "x", "--max-retries", "1" + "0" * 30],
            "must be a whole number from 0 to 100, got 1000",
        ),
        (["search", "x", "--max-retries", "1.5"], "must be a whole number from 0 to 100, got 1.5"),
        (["search", "x", "--synthetic", "0"], "argument --synthetic: must be > 0, got 0"),
        (["search", "x", "--timeout", "9" * 80 + "s"], "(81 characters)"),
        (["task", "list", "--page-size", "0"], "argument --page-size: must be >= 1, got 0"),
        (["emulator", "--latency", "5,1"], "argument --latency: expected S or LOW,HIGH with LOW"),
        (["emulator", "--latency", "x"], "argument --latency: expected a number, got 'x'"),
        (["emulator", "--latency", "1,2,3"], "argument --latency: expected S or LOW,HIGH"),
        (["emulator", "--latency", "-1"], "argument --latency: must be >= 0, got -1"),
        (["emulator", "--qa-latency", "inf"], "argument --qa-latency: expected a finite number"),
        (["emulator", "--period", "1e999"], "argument --period: expected a finite number"),
        (["emulator", "--period", "nan"], "argument --period: expected a finite number, got nan"),
        (["emulator", "--default-limit", "-5"], "argument --default-limit: must be > 0, got -5"),
        (["emulator", "--expensive-limit", "0"], "argument --expensive-limit: must be > 0, got 0"),
        (["emulator", "--token-lifetime", "-1"], "argument --token-lifetime: must be > 0, got -1"),
        (
            ["emulator", "--port", "x"],
            "argument --port: must be a whole number from 0 to 65535, got x",
        ),
        # Bound as is, 99999 would listen on 34463 (the port modulo 65536) and say so.
        (
            ["emulator", "--port", "99999"],
            "argument --port: must be a whole number from 0 to 65535, got 99999",
        ),
        (
            ["emulator", "--port", "-1"],
            "argument --port: must be a whole number from 0 to 65535, got -1",
        ),
        (
            ["emulator", "--error-rate", "x"],
            "argument --error-rate: must be a number from 0 to 1, got x",
        ),
        (
            ["emulator", "--drop-rate", "2"],
            "argument --drop-rate: must be a number from 0 to 1, got 2",
        ),
        (["emulator", "--seed", "1.5"], "argument --seed: expected a whole number, got '1.5'"),
        (["emulator", "--token", " "], "argument --token: must not be empty or blank"),
        # Flags that are right alone and wrong together: said with the flags' names.
        (["emulator", "--error-rate", "0.6", "--drop-rate", "0.6"], "must add up to at most 1"),
        (["emulator", "--default-limit", "0.5"], "--default-limit must be >= 1 for a sliding"),
    ],
)
def test_a_bad_value_names_its_flag_and_what_is_wrong(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert "expected one argument" not in err and "invalid" not in err  # no "invalid _port"
    assert len(err.split("error: ")[-1]) < 400  # what was typed is quoted, cut to a bound


def test_a_negative_number_a_question_or_anything_after_a_double_dash_stays_a_word() -> None:
    parser = build_parser()
    assert parser.parse_args(["search", "--emulator", "-5"]).words == ["-5"]
    asked = parser.parse_args(["ask", "--emulator", "-3 reasons for hope?"])
    assert asked.words == ["-3 reasons for hope?"]
    assert parser.parse_args(["search", "--", "--quota", "-1/2"]).words == ["--quota", "-1/2"]


def test_a_query_that_starts_with_a_minus_is_the_value_of_its_option(tmp_path: Path) -> None:
    out = str(tmp_path / "docs.jsonl")
    run = cli("harvest", "--emulator", "-q", "-1/2", "--out", out, "--dry-run", "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["searches"] == ["-1/2"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["search", "grace", "--emulator", "--redis", "redis://:S3cret1@127.0.0.1:6392/0"],
            "unrecognized arguments: --redis redis://:***@127.0.0.1:6392/0",
        ),
        (
            ["--redis", "redis://:S3cret1@127.0.0.1:6392/0", "harvest", "q.txt", "-o", "g.jsonl"],
            "argument COMMAND: invalid choice: 'redis://:***@127.0.0.1:6392/0'",
        ),
        (
            ["search", "grace", "--redis=rediss://u:S3cret1@h:1/0?password=S3cret1", "-x"],
            "unrecognized arguments: --redis=rediss://u:***@h:1/0?password=*** -x",
        ),
        (
            ["search", "grace", "--redis", "rediss://u:S3cret1 with a space@h:1/0"],
            "unrecognized arguments: --redis rediss://u:***@h:1/0",
        ),
        (
            ["search", "grace", "--protocol", "redis://:S3cret1'q@h/0"],
            "argument --protocol: invalid choice: 'redis://:***@h/0'",
        ),
        (
            ["search", "grace", "--protocol=unix://:S3cret1 @/tmp/r.sock"],
            "argument --protocol: invalid choice: 'unix://:***@/tmp/r.sock'",
        ),
        (
            ["search", "grace", "--json=redis://:S3cret1@h"],
            "argument --json: ignored explicit argument 'redis://:***@h'",
        ),
        (["search", "grace", "--pro=redis://:S3cret1@h"], "ambiguous option: --pro=... could"),
        # A token, never given on the command line, is refused unsaid, wherever it stands.
        (["search", "grace", "--token", "S3cret1"], "argument --token: a token is not given"),
        (["--token=S3cret1", "search", "grace"], "give it by --token-file PATH or $MAGISTERIUM"),
        (["search", "grace", "--tok=S3cret1"], "ambiguous option: --tok=... could match"),
        (["login", "--token", "S3cret1"], "argument --token: a token is not given"),
        (["rebuild", "s.sqlite", "--token=S3cret1"], "give it by $MAGISTERIUM_TOKEN"),
    ],
)
def test_a_usage_error_names_the_argument_never_a_password_or_token_typed(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err, captured.err
    assert "S3cret1" not in captured.err
    assert main(["--json", *argv]) == 2
    record = json.loads(capsys.readouterr().err)
    assert says in record["error"] and "S3cret1" not in record["error"]


def test_the_user_s_lines_with_a_password_say_it_masked() -> None:
    for argv in (
        ["search", "grace", "--emulator", "--redis", "redis://:wrongpw@127.0.0.1:6392/0"],
        ["--redis", "redis://:wrongpw@127.0.0.1:6392/0", "harvest", "q.txt", "--emulator"],
    ):
        run = cli(*argv)
        assert run.code == 2 and run.out == "" and "redis://:***@127.0.0.1:6392/0" in run.err
        assert "wrongpw" not in run.err
