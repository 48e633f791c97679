"""How a command gets its client, from its parsed arguments: the token, the server, the
quota, the Redis it names, or the in-process emulator of ``--emulator``.

The library reads the rest by itself (``$MAGISTERIUM_TOKEN``, the stored sign-in,
``$MAGISTERIUM_BASE_URL``, ``$MAGISTERIUM_CACHE``) and names the variable when a value
cannot be right; the command line adds what it alone knows: the token file, the Redis
check, the emulator (:mod:`magisterium_async.testing`, imported only when asked for).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import TYPE_CHECKING

from magisterium_async._cli._errors import CliError, ExitCode
from magisterium_async._config import (
    CACHE_ENV,
    CREDENTIALS_ENV,
    DEFAULT_TIMEOUTS,
    REDIS_URL_ENV,
    RateLimits,
    Timeouts,
    from_env,
    quota_from_env,
)
from magisterium_async._errors import MagisteriumError
from magisterium_async._files import aread_text
from magisterium_async._redis import RedisUnavailable, looks_like_redis

if TYPE_CHECKING:  # the client, and the network stack with it, load when a command runs
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._events import OnEvent
    from magisterium_async.testing import Corpus

__all__ = ["check_redis", "corpus", "open_client", "quota_of"]

MAX_TOKEN = 64 * 1024  # a token is a few hundred bytes, a few KiB at most
REDIS_CHECK_TIMEOUT = 5.0  # seconds a Redis named has to answer, before anything is made


def quota_of(args: argparse.Namespace) -> RateLimits:
    """The quota the command's client keeps: ``--quota``; with ``--emulator``, none (the
    Pro plan's with ``--emulator-limits``); else ``$MAGISTERIUM_QUOTA``, else the Pro
    plan's."""
    if args.quota is not None:
        return args.quota  # type: ignore[no-any-return]
    if args.emulator:
        return RateLimits.pro() if args.emulator_limits else RateLimits.unlimited()
    return quota_from_env() or RateLimits.pro()


async def _read_token(path: str) -> str:
    """The token in the file at ``path``, read as every file a user names is (a FIFO
    such as ``<(pass show x)`` too, a byte-order mark and CRLF line ends dropped)."""
    try:
        token = (await aread_text(path, what="the token file")).strip()
    except MagisteriumError as exc:
        raise CliError(str(exc), ExitCode.AUTH) from None
    if len(token) > MAX_TOKEN:
        problem = f"holds more than {MAX_TOKEN // 1024} KiB: a token is a few hundred bytes"
    elif not token:
        problem = "is empty"
    elif "\n" in token:
        problem = f"holds {token.count(chr(10)) + 1} lines: a token is one"
    elif not (token.isascii() and token.isprintable()):
        problem = "holds a character no token has (a control character, or one not ASCII)"
    else:
        return token
    raise CliError(
        f"the token file {path} {problem}; give --token-file the file that holds only the token",
        ExitCode.AUTH,
    )


def corpus(synthetic: int | None, seed: int) -> Corpus:
    """An emulator's corpus: ``synthetic`` generated documents (under ``seed``), else the
    bundled one."""
    from magisterium_async.testing import BundledCorpus, SyntheticCorpus

    return SyntheticCorpus(synthetic, seed) if synthetic else BundledCorpus()


async def check_redis(*named: tuple[str | None, str, str]) -> None:
    """Ask each Redis named (its URL from a flag or a variable) once, before anything is
    made: a refusal (the password, an ACL, TLS) is exit 2 saying so, whatever the
    command; one that does not answer is left to its feature's fallback, which says so."""
    from magisterium_async._redis import check_redis as check

    for given, flag, variable in named:
        env = from_env(variable)
        url = given or env
        if url and looks_like_redis(url):
            what = f"${variable}" if url == env else flag
            with suppress(RedisUnavailable):
                await check(url, REDIS_CHECK_TIMEOUT, error=CliError, what=what)


def _sends_nothing() -> str:
    """The token of a client that sends nothing (``quota`` without a shared quota)."""
    raise CliError("this command sends nothing to the service: it needs no token", ExitCode.ERROR)


async def _wrong_protocol(client: AsyncMagisterium, protocol: str, error: Exception) -> CliError:
    """The refusal of a call in the dialect ``--protocol`` named, which the server did not
    understand: what its agent card offers (read once, unmetered), and how to go on."""
    try:
        version = await client.card_protocol()
    except MagisteriumError as exc:
        offers, way = f"its agent card could not be read either ({exc})", "check --base-url"
    else:
        card = await client.agent_card()
        said = f", protocolVersion {card.protocol_version}" if card.protocol_version else ""
        offers = f"its agent card offers A2A {version}{said}"
        way = f"drop --protocol (auto speaks what the card offers) or give --protocol {version}"
        if version == protocol:
            way = "check --base-url: the card and the endpoint disagree"
    return CliError(
        f"{error}: the server does not understand A2A {protocol}, the dialect --protocol "
        f"{protocol} sends; {offers}: {way}",
    )


@asynccontextmanager
async def open_client(
    args: argparse.Namespace, on_event: OnEvent | None = None, *, sends: bool = True
) -> AsyncIterator[AsyncMagisterium]:
    """The command's client, from its connection options, closed on leaving.

    Arguments:
        args: the parsed command line. With ``--emulator`` an in-process emulator is
            started for the client; else the token is ``--token-file``'s, else the
            library's (the environment, the stored sign-in). A command that takes
            ``--redis`` shares its quota through it (else ``$MAGISTERIUM_REDIS_URL``).
        on_event: hears the client's events (the status line).
        sends: ``False`` for a client that sends nothing (``quota`` without a shared
            quota): no token is read or needed.
    """
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._errors import MethodNotFoundError, VersionNotSupportedError
    from magisterium_async._events import unheard
    from magisterium_async._ratelimit import SharedQuota

    if args.emulator and (args.base_url is not None or args.token_file is not None):
        raise CliError("--emulator runs its own server: drop --base-url and --token-file")
    if not args.emulator and (args.synthetic is not None or args.emulator_limits):
        raise CliError("--synthetic and --emulator-limits need --emulator")
    redis = (
        (args.redis or from_env(REDIS_URL_ENV)) if "redis" in args else None
    )  # only where it is taken
    named = [
        (args.cache, "--cache", CACHE_ENV),
        (args.credentials, "--credentials", CREDENTIALS_ENV),
    ]
    await check_redis(*named, *([(redis, "--redis", REDIS_URL_ENV)] if redis else []))
    async with AsyncExitStack() as stack:
        token: str | Callable[[], str] | None = None if sends else _sends_nothing
        base_url = args.base_url
        if args.emulator:  # on a free loopback port, its limits lifted unless asked for
            from magisterium_async.testing import Emulator, EmulatorConfig, RateLimitConfig

            config = EmulatorConfig(
                rate_limits=RateLimitConfig.pro() if args.emulator_limits else None,
                corpus=corpus(args.synthetic, 0),
                protocol="0.2.6" if args.protocol == "auto" else args.protocol,
            )
            emulator = await stack.enter_async_context(Emulator(config))
            token, base_url = emulator.token, emulator.base_url
        elif args.token_file is not None and sends:
            token = await _read_token(args.token_file)
        # A value it refuses is a ValueError, said in the command line's words by main().
        client = AsyncMagisterium(
            token,
            base_url=base_url,
            rate_limits=quota_of(args),
            timeout=DEFAULT_TIMEOUTS if args.timeout is None else Timeouts.of(args.timeout),
            max_retries=args.max_retries,
            shared_quota=None if redis is None else SharedQuota(redis),
            cache=args.cache,
            credentials=args.credentials if token is None else None,
            proxy=args.proxy,
            # The command line tells its waits itself (the status line, the
            # harvest's progress): its client hears the events, so the library's log
            # keeps a long wait at INFO (-v), and --json keeps stderr to one object.
            on_event=on_event or unheard,
            protocol=args.protocol,
            # The in-process emulator is this host: no environment proxy reaches it.
            trust_env=not args.emulator,
        )
        await stack.enter_async_context(client)
        try:
            yield client
        except (MethodNotFoundError, VersionNotSupportedError) as exc:
            if args.protocol == "auto":
                raise
            raise await _wrong_protocol(client, args.protocol, exc) from exc
