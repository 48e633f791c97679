"""How a command gets its client: the token, the base URL, the quota, or the emulator."""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from magisterium_async._auth import credentials_location
from magisterium_async._cli._errors import CliError, ExitCode, cli_words
from magisterium_async._cli._local_emulator import local_emulator
from magisterium_async._config import (
    CREDENTIALS_ENV,
    DEFAULT_TIMEOUTS,
    TOKEN_ENV,
    RateLimits,
    Timeouts,
    token_from_env,
)

if TYPE_CHECKING:  # the client, and the network stack with it, load when a command runs
    from magisterium_async._client import AsyncMagisterium
    from magisterium_async._events import PoolEvent
    from magisterium_async._http._dialect import ProtocolVersion
    from magisterium_async.testing.emulator._config import Protocol as EmulatorProtocol

__all__ = ["ClientOptions", "check_options", "emulator_quota", "open_client", "read_token"]

MAX_TOKEN_FILE = 64 * 1024  # a token is a few hundred bytes, a few KiB at most
NO_TOKEN = (
    f"no API token: sign in with `magisterium-async login`, or set {TOKEN_ENV} "
    f"(export {TOKEN_ENV}=<your token>) or pass --token-file PATH; add --emulator to "
    "try everything offline"
)


@dataclass(frozen=True)
class ClientOptions:
    """The client's settings, as the common options gave them."""

    token_file: str | None = None
    credentials: str | None = None
    """The sign-in file of ``login`` (``--credentials``)."""
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
    """Share the client's quota through this Redis (``harvest --redis``)."""


def read_token(token_file: str | None, credentials: str | None = None) -> str | None:
    """The token from ``token_file``, else ``$MAGISTERIUM_TOKEN``; ``None`` when the stored
    sign-in is to be used; :class:`CliError` if there is none of the three (the order of
    :mod:`.._config`)."""
    if token_file is None:
        token = token_from_env()
        if token:
            return token
        location = credentials_location(credentials)  # a Redis store: read at the first call
        if isinstance(location, Path) and not location.exists():
            if credentials is None and not os.environ.get(CREDENTIALS_ENV):
                raise CliError(NO_TOKEN, ExitCode.AUTH)
            named = "--credentials" if credentials is not None else f"${CREDENTIALS_ENV}"
            raise CliError(
                f"no API token: no credentials file at {location} ({named}); sign in with "
                f"`magisterium-async login --credentials {shlex.quote(str(location))}`, or "
                f"set {TOKEN_ENV} or pass --token-file PATH",
                ExitCode.AUTH,
            )
        return None
    try:
        with open(token_file, "rb") as file:
            # A cap, not the whole file: ``--token-file /dev/zero`` must not fill memory.
            data = file.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise CliError(
            f"cannot read the token file {token_file}: {exc.strerror or exc}", ExitCode.AUTH
        ) from None
    if len(data) > MAX_TOKEN_FILE:
        raise CliError(
            f"the token file {token_file} holds more than {MAX_TOKEN_FILE // 1024} KiB: a "
            "token is a few hundred bytes; give --token-file the file that holds only it",
            ExitCode.AUTH,
        )
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CliError(
            f"the token file {token_file} is not UTF-8 text: give --token-file the file "
            "that holds only the token",
            ExitCode.AUTH,
        ) from None
    if not token:
        raise CliError(f"the token file {token_file} is empty", ExitCode.AUTH)
    if any(c in token for c in "\r\n"):
        raise CliError(
            f"the token file {token_file} must hold the token on one line", ExitCode.AUTH
        )
    return token


def check_options(options: ClientOptions) -> None:
    """:class:`CliError` for options that contradict each other (``--emulator`` ones)."""
    if not options.emulator:
        if options.synthetic is not None or options.emulator_limits:
            raise CliError("--synthetic and --emulator-limits need --emulator", ExitCode.USAGE)
    elif options.base_url is not None or options.token_file is not None:
        raise CliError(
            "--emulator runs its own server: drop --base-url and --token-file", ExitCode.USAGE
        )


def emulator_quota(options: ClientOptions) -> RateLimits:
    """The client's quota against ``--emulator``: lifted, unless ``--emulator-limits``."""
    return options.quota or (
        RateLimits.pro() if options.emulator_limits else RateLimits.unlimited()
    )


OnEvent = Callable[["PoolEvent"], None]


def _no_token_needed() -> str:
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

    timeout = DEFAULT_TIMEOUTS if options.timeout is None else Timeouts.of(options.timeout)
    shared = None
    if options.redis is not None:
        shared = SharedQuota(options.redis)
    try:
        return AsyncMagisterium(
            token,
            base_url=base_url,
            rate_limits=quota,
            timeout=timeout,
            max_retries=options.max_retries,
            shared_quota=shared,
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


def _emulator_protocol(protocol: ProtocolVersion) -> EmulatorProtocol:
    """The dialect ``--emulator`` serves for ``--protocol``: the one asked for, else the
    service's own (0.2.6)."""
    return "0.2.6" if protocol == "auto" else protocol


async def _wrong_protocol(client: AsyncMagisterium, protocol: str, error: Exception) -> CliError:
    """The refusal of a call in the dialect ``--protocol`` named, which the server did not
    understand: what its agent card offers (read once, unmetered), and how to go on."""
    from magisterium_async._errors import MagisteriumError
    from magisterium_async._http._dialect import offered

    try:
        card = await client.agent_card()
    except MagisteriumError as exc:
        offers = f"its agent card could not be read either ({exc})"
        way = "check --base-url, or drop --protocol"
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
    """A client for the command, closed on leaving; with ``emulator``, an emulator too;
    ``on_event`` hears its scheduler's events. ``sends=False``: a client that sends
    nothing (``quota`` without a shared quota), so no token is read or needed.

    The real service gets ``options.quota``, else ``$MAGISTERIUM_QUOTA``, else the Pro
    plan's (the client's own fallbacks). The in-process emulator lifts
    its limits and the client's, unless ``emulator_limits`` asks for the Pro plan on both.
    """
    from magisterium_async._errors import MethodNotFoundError, VersionNotSupportedError

    check_options(options)
    if not options.emulator:
        token = read_token(options.token_file, options.credentials) if sends else _no_token_needed
        async with _client(options, token, options.base_url, options.quota, on_event) as client:
            try:
                yield client
            except (MethodNotFoundError, VersionNotSupportedError) as exc:
                if options.protocol == "auto":
                    raise
                raise await _wrong_protocol(client, options.protocol, exc) from exc
        return
    emulator = local_emulator(
        limits=options.emulator_limits,
        synthetic=options.synthetic,
        protocol=_emulator_protocol(options.protocol),
    )
    quota = emulator_quota(options)
    async with (
        emulator,
        _client(options, emulator.token, emulator.base_url, quota, on_event) as client,
    ):
        yield client
