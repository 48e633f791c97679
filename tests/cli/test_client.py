"""How a command gets its client: the token (file, environment, stored sign-in), options
that contradict each other, the quota against the emulator, and the client itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import magisterium_async as m
from magisterium_async._cli._client import (
    MAX_TOKEN_FILE,
    ClientOptions,
    check_options,
    emulator_quota,
    open_client,
    read_token,
)
from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._config import TOKEN_ENV
from magisterium_async.testing import Emulator, EmulatorConfig
from tests.cli.helpers import cli
from tests.helpers.credentials import credentials, save_credentials


@pytest.fixture(autouse=True)
def _no_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv("MAGISTERIUM_BASE_URL", raising=False)


def test_a_token_file_wins_and_is_read_stripped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "sk-from-env")
    token_file = tmp_path / "token"
    token_file.write_text("  sk-from-file\n", encoding="utf-8")
    assert read_token(str(token_file)) == "sk-from-file"


def test_then_the_environment_then_the_stored_sign_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, " sk-from-env ")
    assert read_token(None) == "sk-from-env"
    monkeypatch.setenv(TOKEN_ENV, "   ")  # blank: no token
    stored = tmp_path / "credentials.json"
    save_credentials(stored, credentials())
    assert read_token(None, str(stored)) is None  # the client reads the sign-in


def test_a_credentials_file_named_and_missing_is_said_in_the_command_lines_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "mine.json"
    with pytest.raises(CliError) as caught:
        read_token(None, str(missing))
    assert caught.value.code == ExitCode.AUTH
    text = str(caught.value)
    assert f"no credentials file at {missing} (--credentials)" in text
    assert f"`magisterium-async login --credentials {missing}`" in text
    assert "credentials=" not in text
    monkeypatch.setenv("MAGISTERIUM_CREDENTIALS", str(missing))
    with pytest.raises(CliError, match=r"\(\$MAGISTERIUM_CREDENTIALS\)"):
        read_token(None)


def test_no_token_at_all_says_every_way_to_give_one() -> None:
    with pytest.raises(CliError) as caught:
        read_token(None)
    assert caught.value.code == ExitCode.AUTH
    for way in ("magisterium-async login", TOKEN_ENV, "--token-file", "--emulator"):
        assert way in str(caught.value)


def test_an_unusable_token_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(CliError, match=f"cannot read the token file {missing}") as caught:
        read_token(str(missing))
    assert caught.value.code == ExitCode.AUTH
    two_lines = tmp_path / "two"
    two_lines.write_text("sk-one\nsk-two\n", encoding="utf-8")
    with pytest.raises(CliError, match="must hold the token on one line") as caught:
        read_token(str(two_lines))
    assert "sk-one" not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (ClientOptions(synthetic=10), "need --emulator"),
        (ClientOptions(emulator_limits=True), "need --emulator"),
        (ClientOptions(emulator=True, base_url="https://x.example"), "drop --base-url"),
        (ClientOptions(emulator=True, token_file="t"), "drop --base-url and --token-file"),
    ],
)
def test_contradicting_options_are_usage_errors(options: ClientOptions, message: str) -> None:
    with pytest.raises(CliError, match=message) as caught:
        check_options(options)
    assert caught.value.code == ExitCode.USAGE


def test_the_emulator_quota_is_lifted_unless_asked_for() -> None:
    assert emulator_quota(ClientOptions(emulator=True)) == m.RateLimits.unlimited()
    limited = ClientOptions(emulator=True, emulator_limits=True)
    assert emulator_quota(limited) == m.RateLimits.pro()
    given = m.RateLimits(5, 1)
    assert emulator_quota(ClientOptions(emulator=True, quota=given)) is given


async def test_the_service_gets_the_pro_quota_and_the_options(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("sk-test\n", encoding="utf-8")
    options = ClientOptions(token_file=str(token_file), timeout=7.0, max_retries=5)
    async with open_client(options) as client:
        assert client.base_url == "https://www.magisterium.com/api/v1/a2a"
        assert client.rate_limits == m.RateLimits.pro()
        assert client.timeouts == m.Timeouts.of(7.0)
        assert "sk-test" not in repr(client)


async def test_a_base_url_the_token_must_not_travel_to_is_a_usage_error(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("sk-test\n", encoding="utf-8")
    options = ClientOptions(token_file=str(token_file), base_url="http://example.com/a2a")
    with pytest.raises(CliError) as caught:
        async with open_client(options):
            pass
    assert caught.value.code == ExitCode.USAGE


async def test_with_the_emulator_the_client_talks_to_one_of_its_own() -> None:
    async with open_client(ClientOptions(emulator=True, synthetic=200)) as client:
        assert client.base_url.startswith("http://127.0.0.1:")
        assert client.rate_limits == m.RateLimits.unlimited()
        results = await client.search("grace")
        assert results and all(result.id for result in results)


def test_a_long_token_on_one_line_is_read_and_a_longer_file_is_not(tmp_path: Path) -> None:
    token = "sk-" + "a" * 8000  # a large JWT is a few KiB
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n", encoding="utf-8")
    assert read_token(str(token_file)) == token
    token_file.write_text("a" * (MAX_TOKEN_FILE + 1), encoding="utf-8")
    with pytest.raises(CliError, match="holds more than 64 KiB") as caught:
        read_token(str(token_file))
    assert caught.value.code == ExitCode.AUTH


async def test_the_service_gets_the_quota_of_the_environment_unless_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("sk-test\n", encoding="utf-8")
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "unlimited")
    async with open_client(ClientOptions(token_file=str(token_file))) as client:
        assert client.rate_limits == m.RateLimits.unlimited()
    given = ClientOptions(token_file=str(token_file), quota=m.RateLimits(5, 1))
    async with open_client(given) as client:
        assert client.rate_limits == m.RateLimits(5, 1)
    monkeypatch.setenv("MAGISTERIUM_QUOTA", "lots")
    with pytest.raises(CliError, match=r"\$MAGISTERIUM_QUOTA is not a quota") as caught:
        async with open_client(ClientOptions(token_file=str(token_file))):
            pass
    assert caught.value.code == ExitCode.USAGE


async def test_cache_gives_the_client_its_cache(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    async with open_client(ClientOptions(emulator=True, cache=str(path))) as client:
        await client.search("grace")
        await client.search("grace")
        assert client.cache_stats.hits == 1
    assert path.exists()


def test_cache_is_a_connection_option_of_the_command_line() -> None:
    from magisterium_async._cli._parser import build_parser

    args = build_parser().parse_args(["--cache", "memory", "search", "grace"])
    assert args.cache == "memory"


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
                in (run.err)
            )
