"""How a command gets its client: the token, the base URL, the quota, or the emulator.

The library reads what it reads by itself (``$MAGISTERIUM_TOKEN``, the stored sign-in,
``$MAGISTERIUM_BASE_URL``, ``$MAGISTERIUM_QUOTA``, ``$MAGISTERIUM_CACHE``) and names the
variable when a value cannot be right; the command line adds only what it alone knows:
the token file, and the emulator of ``--emulator``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from magisterium_async._cli._errors import CliError, ExitCode, cli_words
from magisterium_async._cli._local_emulator import local_emulator
from magisterium_async._config import (
    CACHE_ENV,
    CREDENTIALS_ENV,
    DEFAULT_TIMEOUTS,
    REDIS_URL_ENV,
    RateLimits,
    Timeouts,
)
from magisterium_async._errors import MagisteriumError
from magisterium_async._files import aread_text
from magisterium_async._redis import RedisUnavailable, looks_like_redis

if TYPE_CHECKING:  # the client, and the network stack with it, load when a command runs
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._events import PoolEvent
    from magisterium_async._http._dialect import ProtocolVersion

__all__ = ["ClientOptions", "OnEvent", "check_redis", "emulator_quota", "open_client"]

OnEvent = Callable[["PoolEvent"], None]
MAX_TOKEN = 64 * 1024  # a token is a few hundred bytes, a few KiB at most
REDIS_CHECK_TIMEOUT = 5.0  # seconds a Redis named has to answer the check before a command


@dataclass(frozen=True)
class ClientOptions:
    """The client's settings, as the connection options gave them."""

    token_file: str | None = None
    credentials: str | None = None
    """The sign-in of ``login`` (``--credentials``): a file or a Redis URL."""
    base_url: str | None = None
    proxy: str | None = None
    """``--proxy``; without it the environment's proxies, except for ``--emulator``."""
    quota: RateLimits | None = None
    cache: str | None = None
    """``--cache``: ``memory``, a file, or a Redis URL (``AsyncMagisterium(cache=)``)."""
    timeout: float | None = None
    max_retries: int = 2
    protocol: ProtocolVersion = "auto"
    """``--protocol``: the A2A dialect the client speaks."""
    emulator: bool = False
    emulator_limits: bool = False
    synthetic: int | None = None
    redis: str | None = None
    """Share the client's quota through this Redis (``--redis`` of harvest and quota)."""


def emulator_quota(options: ClientOptions) -> RateLimits:
    """The client's quota against ``--emulator``: lifted, unless ``--emulator-limits``."""
    return options.quota or (
        RateLimits.pro() if options.emulator_limits else RateLimits.unlimited()
    )


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


async def check_redis(options: ClientOptions) -> None:
    """Ask each Redis the options or the environment name (the shared quota, the cache,
    the sign-in) once, before anything is made: a refusal (the password, an ACL, TLS) is
    a :class:`CliError` saying so, exit 2, whatever the command. One that does not answer
    is left to its feature's fallback (the cache is bypassed, the quota is this
    process's), which says so."""
    from magisterium_async._redis import check_redis as ask

    named = (
        (options.redis, "--redis", REDIS_URL_ENV),
        (options.cache, "--cache", CACHE_ENV),
        (options.credentials, "--credentials", CREDENTIALS_ENV),
    )
    for given, flag, variable in named:
        from_env = os.environ.get(variable, "").strip()
        url = given or from_env
        if url and looks_like_redis(url):
            what = f"${variable}" if url == from_env else flag
            with suppress(RedisUnavailable):
                await ask(url, REDIS_CHECK_TIMEOUT, error=_usage_error, what=what)


def _usage_error(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE)


def _sends_nothing() -> str:
    """The token of a client that sends nothing (``quota`` without a shared quota)."""
    raise CliError("this command sends nothing to the service: it needs no token")


def _client(
    options: ClientOptions,
    token: str | Callable[[], str] | None,
    base_url: str | None,
    quota: RateLimits | None,
    on_event: OnEvent | None,
) -> AsyncMagisterium:
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._events import unheard
    from magisterium_async._ratelimit import SharedQuota

    try:
        return AsyncMagisterium(
            token,
            base_url=base_url,
            rate_limits=quota,
            timeout=DEFAULT_TIMEOUTS if options.timeout is None else Timeouts.of(options.timeout),
            max_retries=options.max_retries,
            shared_quota=None if options.redis is None else SharedQuota(options.redis),
            cache=options.cache,
            credentials=options.credentials if token is None else None,
            proxy=options.proxy,
            # The command line tells its waits itself (the status line, the harvest's
            # progress): its client hears the events, so the library's log keeps a long
            # wait at INFO (``-v``), and ``--json`` keeps stderr to one object.
            on_event=on_event or unheard,
            protocol=options.protocol,
            # The in-process emulator is this host: no environment proxy can reach it.
            trust_env=not options.emulator,
        )
    except ValueError as exc:
        raise CliError(cli_words(str(exc)), ExitCode.USAGE) from None


async def _wrong_protocol(client: AsyncMagisterium, protocol: str, error: Exception) -> CliError:
    """The refusal of a call in the dialect ``--protocol`` named, which the server did not
    understand: what its agent card offers (read once, unmetered), and how to go on."""
    from magisterium_async._http._dialect import offered

    try:
        card = await client.agent_card()
    except MagisteriumError as exc:
        offers, way = f"its agent card could not be read either ({exc})", "check --base-url"
    else:
        version = offered(card, client.base_url).version
        said = f", protocolVersion {card.protocol_version}" if card.protocol_version else ""
        offers = f"its agent card offers A2A {version}{said}"
        way = f"drop --protocol (auto speaks what the card offers) or give --protocol {version}"
        if version == protocol:
            way = "check --base-url: the card and the endpoint disagree"
    return CliError(
        f"{error}: the server does not understand A2A {protocol}, the dialect --protocol "
        f"{protocol} sends; {offers}: {way}",
        ExitCode.USAGE,
    )


@asynccontextmanager
async def open_client(
    options: ClientOptions, on_event: OnEvent | None = None, *, sends: bool = True
) -> AsyncIterator[AsyncMagisterium]:
    """A client for the command, closed on leaving.

    Arguments:
        options: the connection options; with ``emulator``, an in-process emulator is
            started for the client (its limits and the client's lifted, unless
            ``emulator_limits``), else the token is ``token_file``'s, else the library's.
        on_event: hears the client's events (the status line).
        sends: ``False`` for a client that sends nothing (``quota`` without a shared
            quota): no token is read or needed.
    """
    from magisterium_async._errors import MethodNotFoundError, VersionNotSupportedError

    if options.emulator and (options.base_url is not None or options.token_file is not None):
        raise CliError(
            "--emulator runs its own server: drop --base-url and --token-file", ExitCode.USAGE
        )
    if not options.emulator and (options.synthetic is not None or options.emulator_limits):
        raise CliError("--synthetic and --emulator-limits need --emulator", ExitCode.USAGE)
    await check_redis(options)
    async with AsyncExitStack() as stack:
        token: str | Callable[[], str] | None = None if sends else _sends_nothing
        base_url, quota = options.base_url, options.quota
        if options.emulator:
            emulator = local_emulator(
                limits=options.emulator_limits,
                synthetic=options.synthetic,
                protocol="0.2.6" if options.protocol == "auto" else options.protocol,
            )
            await stack.enter_async_context(emulator)
            token, base_url, quota = emulator.token, emulator.base_url, emulator_quota(options)
        elif options.token_file is not None and sends:
            token = await _read_token(options.token_file)
        client = await stack.enter_async_context(_client(options, token, base_url, quota, on_event))
        try:
            yield client
        except (MethodNotFoundError, VersionNotSupportedError) as exc:
            if options.protocol == "auto":
                raise
            raise await _wrong_protocol(client, options.protocol, exc) from exc
