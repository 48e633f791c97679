"""What a command is, and the options commands share, each declared once.

A :class:`Command` is registered once (:data:`._app.COMMANDS`). Its parser gets the
common options and, when it talks to the service, the connection options; both go on the
main parser too, with real defaults, and on each command's with ``SUPPRESS``, so an option
works before or after the command's name (a value given after it wins). Running the
command line is ``args.command.run(args, output)``, for every command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magisterium_async._cli._client import open_client
from magisterium_async._cli._errors import CliError, describe, exit_code_for
from magisterium_async._cli._output import Output
from magisterium_async._cli._status import Watch, status_line
from magisterium_async._config import MAX_RETRIES_CEILING, parse_quota
from magisterium_async._errors import MagisteriumError, is_transient

if TYPE_CHECKING:
    from magisterium_async._client import AsyncMagisterium

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["Command", "Run", "add_commands", "add_options", "add_redis_option", "number"]

Run = Callable[[argparse.Namespace, Output], Coroutine[Any, Any, int]]


@dataclass(frozen=True)
class Command:
    """A command of the command line.

    Attributes:
        name: its words after ``magisterium-async``: ``"search"``, or ``"task get"`` under
            the group ``task``.
        help: what it does, one line.
        run: runs it with the parsed arguments and the output they chose; the exit code.
        arguments: adds its own arguments to its parser.
        connects: whether it talks to the service (it then takes the connection options).
        epilog: more help, after the options.
    """

    name: str
    help: str
    run: Run
    arguments: Callable[[argparse.ArgumentParser], object] | None = None
    connects: bool = True
    epilog: str | None = None


def with_client(
    run: Callable[[argparse.Namespace, Output, AsyncMagisterium], Awaitable[int]],
    label: str,
    pool: str = "default",
) -> Run:
    """``run`` given a client opened from the connection options, its one call watched:
    on a terminal a status line says what it waits for (``label``: what the command does;
    ``pool``: the call's), and a failure after retries says how many requests it sent."""

    async def connected(args: argparse.Namespace, output: Output) -> int:
        watch = Watch(label, pool)
        async with open_client(args, watch.on_event) as client:
            watch.attach(client)
            try:
                async with status_line(watch.text, changed=watch.changed):
                    return await run(args, output, client)
            except MagisteriumError as exc:
                if watch.attempts <= 1 or not is_transient(exc):
                    raise
                raise CliError(describe(exc, watch.attempts), exit_code_for(exc)) from exc

    return connected


def add_commands(
    parser: argparse.ArgumentParser, commands: Sequence[Command], groups: Mapping[str, str]
) -> None:
    """Add ``commands`` (in the order of ``--help``) to ``parser``; a command named
    ``"group word"`` goes under its group, described by ``groups``."""
    _refuse_token(parser)
    top: Subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    under: dict[str, Subparsers] = {}
    for command in commands:
        head, _, word = command.name.rpartition(" ")
        if head and head not in under:
            group = top.add_parser(head, help=groups[head], description=groups[head])
            under[head] = group.add_subparsers(
                dest=f"{head}_action", metavar="ACTION", required=True
            )
        sub = (under[head] if head else top).add_parser(
            word,
            help=command.help,
            description=command.help,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_options(sub, connects=command.connects, suppress=True)
        if command.arguments is not None:
            command.arguments(sub)
        _refuse_token(sub)
        sub.set_defaults(command=command)


def _refuse_token(parser: argparse.ArgumentParser) -> None:
    """``--token`` refused on ``parser``, unless it takes one of its own (the emulator's):
    else argparse takes it for ``--token-file`` and says the token as a missing file, or
    quotes it among the unrecognized arguments."""
    if "--token" not in parser._option_string_actions:  # no public way to ask
        parser.add_argument("--token", nargs="?", action=_NoToken, help=argparse.SUPPRESS)


def number(
    kind: type[int] | type[float] = float,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    above: bool = False,
) -> Callable[[str], Any]:
    """An argument type: a finite number of ``kind`` from ``low`` to ``high`` (more than
    ``low`` when ``above``); argparse prefixes its refusal with the flag's name. Between
    two bounds, every refusal names them."""
    what = "a whole number" if kind is int else "a number"
    between = f"{what} from {low:g} to {high:g}" if math.isfinite(low + high) else None

    def parse(text: str) -> int | float:
        shown = text if len(text) <= 50 else f"{text[:50]}… ({len(text):,} characters)"
        try:
            value = kind(text)
        except ValueError:
            if between:
                raise argparse.ArgumentTypeError(f"must be {between}, got {shown}") from None
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {shown}")
        if value < low or value > high or (above and value == low):
            bound = between or (
                f"<= {high:g}" if value > high else f"{'>' if above else '>='} {low:g}"
            )
            raise argparse.ArgumentTypeError(f"must be {bound}, got {shown}")
        return value

    return parse


def _quota(text: str) -> Any:
    """``--quota``: ``DEFAULT/EXPENSIVE[/PERIOD]`` or ``unlimited``."""
    try:
        return parse_quota(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_REDIS_FORMS = "redis://, rediss://, unix://, redis+cluster://, redis+sentinel://"


class _NoToken(argparse.Action):
    """``--token``: refused, its value never shown; a token is not given on the command
    line, which the shell's history and ``ps`` show."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        way = "--token-file PATH or " if "--token-file" in parser._option_string_actions else ""
        raise argparse.ArgumentError(
            self,
            "a token is not given on the command line, where the shell's history and ps "
            f"show it: give it by {way}$MAGISTERIUM_TOKEN",
        )


def add_options(parser: argparse.ArgumentParser, *, connects: bool, suppress: bool) -> None:
    """The options of every command, and, when it ``connects`` to the service (or to
    ``--emulator``), the connection options; their defaults ``SUPPRESS`` on a command's
    parser (the main parser's stand unless given after the command's name)."""

    def option(group: Any, *flags: str, default: object = None, **kwargs: Any) -> None:
        group.add_argument(*flags, default=argparse.SUPPRESS if suppress else default, **kwargs)

    option(
        parser,
        "--json",
        action="store_true",
        default=False,
        help="machine output: JSON (results on stdout, summaries on stderr)",
    )
    option(
        parser,
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="say retries, rate limits, sign-in refreshes and waits on stderr (-vv: every "
        "request too); $MAGISTERIUM_LOG=info|debug does the same",
    )
    option(
        parser,
        "--credentials",
        metavar="PATH|URL",
        help=f"where `login` keeps the sign-in: a file, or a Redis URL ({_REDIS_FORMS}) shared "
        "by many hosts (default: $MAGISTERIUM_CREDENTIALS, then the user config dir)",
    )
    if not connects:
        return
    group = parser.add_argument_group("connection")
    option(
        group,
        "--token-file",
        metavar="PATH",
        help="read the token from PATH instead of $MAGISTERIUM_TOKEN",
    )
    option(
        group,
        "--base-url",
        metavar="URL",
        help="the A2A endpoint (default: $MAGISTERIUM_BASE_URL, then the service)",
    )
    option(
        group,
        "--proxy",
        metavar="URL",
        help="send every request through this http(s):// proxy (default: $HTTPS_PROXY / "
        "$HTTP_PROXY, but $NO_PROXY); a password is safer there than here, seen by all",
    )
    option(
        group,
        "--quota",
        type=_quota,
        metavar="D/E[/PERIOD]",
        help="requests per period (60 s) the client allows itself in the default and the "
        "expensive pool, or 'unlimited' (default: $MAGISTERIUM_QUOTA, then the Pro plan, 15/2)",
    )
    option(
        group,
        "--cache",
        metavar="memory|PATH|URL",
        help="keep answers (not ask's): 'memory', a file kept between runs, or a Redis URL "
        f"({_REDIS_FORMS}) shared by every process naming it (default: $MAGISTERIUM_CACHE)",
    )
    option(
        group,
        "--timeout",
        type=number(float, 0, above=True),
        metavar="SECONDS",
        help="per request (default: 30, and 300 for ask)",
    )
    option(
        group,
        "--max-retries",
        type=number(int, 0, MAX_RETRIES_CEILING),
        metavar="N",
        default=2,
        help="retries of transient failures per call (default: 2)",
    )
    option(
        group,
        "--protocol",
        choices=("auto", "0.3", "1.0"),
        default="auto",
        help="the A2A dialect to speak: auto (default: the one the agent card offers), or "
        "0.3 or 1.0 alone",
    )
    offline = parser.add_argument_group("offline")
    option(
        offline,
        "--emulator",
        action="store_true",
        default=False,
        help="run against an in-process emulator: no token, no network, limits lifted",
    )
    option(
        offline,
        "--emulator-limits",
        action="store_true",
        default=False,
        help="with --emulator: enforce the Pro plan's quota (15/2 a minute), client and server",
    )
    option(
        offline,
        "--synthetic",
        type=number(int, 0, above=True),
        metavar="N",
        help="with --emulator: serve N synthetic documents instead of the bundled corpus",
    )


def add_redis_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--redis URL``: the Redis through which processes share the token's quota (``what``
    the command does with it)."""
    parser.add_argument(
        "--redis",
        metavar="URL",
        help=f"{what} (default: $MAGISTERIUM_REDIS_URL; needs pip install "
        "'magisterium-async[redis]')",
    )
