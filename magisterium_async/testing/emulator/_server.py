"""Running the emulator on a port: in the current event loop, a background thread, or blocking."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

from aiohttp import web

from magisterium_async.testing.emulator._app import A2A_PATH, SERVICE, create_app
from magisterium_async.testing.emulator._card import CARD_PATH
from magisterium_async.testing.emulator._config import EmulatorConfig
from magisterium_async.testing.emulator._faults import Fault
from magisterium_async.testing.emulator._stats import Arrival, Stats
from magisterium_async.testing.emulator.oauth._records import Access
from magisterium_async.testing.emulator.oauth._routes import METADATA_PATH, check_oauth_faults
from magisterium_async.testing.emulator.oauth._server import OAuthServer

__all__ = ["Emulator", "run_emulator"]


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


class Emulator:
    """The emulator listening on ``host:port`` (port ``0``: a free one).

    Use it as ``async with Emulator(config) as emu:`` in async code, or as a plain
    ``with Emulator(config) as emu:`` to run it on an event loop in a background thread.
    """

    def __init__(
        self, config: EmulatorConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int from 0 to 65535, got {port!r}")
        self.config = config if config is not None else EmulatorConfig()
        self.app = create_app(self.config)
        self._service = self.app[SERVICE]
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        where = self.origin if self._port is not None else "not started"
        return f"<Emulator {where}>"

    async def start(self) -> Emulator:
        """Start listening; returns ``self``."""
        if self._runner is not None:
            raise RuntimeError("the emulator is already running")
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        sock = _bind(self._host, self._requested_port)
        try:
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._port = sock.getsockname()[1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Emulator:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __enter__(self) -> Emulator:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="magisterium-emulator", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result()
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            raise
        self._loop, self._thread = loop, thread
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            self._loop = self._thread = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        if self._port is None:
            raise RuntimeError("the emulator has not been started")
        return self._port

    @property
    def origin(self) -> str:
        """``http://host:port``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The JSON-RPC endpoint, to give a client as its ``base_url``."""
        return self.origin + A2A_PATH

    @property
    def card_url(self) -> str:
        """Where the agent card is served, and only there: ``/.well-known/agent.json`` for
        the service's protocol (0.2.6), ``/.well-known/agent-card.json`` for 0.3 and 1.0."""
        return self.origin + CARD_PATH[self.config.protocol]

    @property
    def issuer(self) -> str:
        """The OAuth issuer: the origin, where the authorization server lives."""
        return self.origin

    @property
    def oauth_metadata_url(self) -> str:
        """Where the authorization-server metadata (RFC 8414) is served."""
        return self.origin + METADATA_PATH

    @property
    def oauth(self) -> OAuthServer:
        """The authorization server: its clients and tokens, and ways for a test to
        revoke or expire them (:meth:`OAuthServer.revoke_tokens`,
        :meth:`OAuthServer.expire_access_tokens`, ...)."""
        return self._service.oauth

    @property
    def token(self) -> str:
        """The first token on a paid plan (``"emu-token"`` by default)."""
        return self.config.default_token

    @property
    def stats(self) -> Stats:
        """Counters by method, skill and outcome."""
        return self._service.stats

    @property
    def arrivals(self) -> list[Arrival]:
        """Every request in arrival order (when ``record_arrivals`` is on)."""
        return self._service.arrivals

    @property
    def pending_faults(self) -> int:
        """Scripted faults not yet used."""
        return self._service.faults.pending

    def script(self, *faults: Fault, method: str | None = None, skill: str | None = None) -> None:
        """The next requests (matching ``method`` / ``skill`` when given) get ``faults``,
        one each, in order; then normal service resumes.

        ``method`` may also name an OAuth endpoint (``"oauth/token"``, ``"oauth/revoke"``,
        ``"oauth/register"``, ``"oauth/authorize"``, ``"oauth/metadata"``); those meet only
        faults scripted for them by name, of the HTTP kinds (latency, HTTP errors, drops,
        truncated or malformed bodies)."""
        if method is not None and method.startswith("oauth/"):
            check_oauth_faults(method, faults)
        self._service.faults.script(*faults, method=method, skill=skill)

    def clear_script(self) -> None:
        """Drop the scripted faults not yet used."""
        self._service.faults.clear()

    def reset_stats(self) -> None:
        """Forget counters and arrivals."""
        self._service.stats.reset()
        self._service.arrivals.clear()

    def reset_limits(self) -> None:
        """Refill every quota."""
        self._service.limiter.reset()

    def spend_quota(
        self, pool: str = "default", count: int = 1, *, token: str | None = None
    ) -> int:
        """Spend quota as the user's MCP calls would (the service shares one quota between
        MCP and A2A); returns how many of the ``count`` calls the quota admitted. Any
        OAuth-issued ``token`` spends the quota every OAuth token shares."""
        if pool not in ("default", "expensive"):
            raise ValueError('pool must be "default" or "expensive"')
        access = self._service.access(token if token is not None else self.token)
        key = access.quota_key if isinstance(access, Access) else str(token)
        limiter = self._service.limiter
        return sum(limiter.acquire(key, pool) is None for _ in range(count))


def run_emulator(
    config: EmulatorConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    on_start: Callable[[Emulator], None] | None = None,
) -> None:
    """Serve until interrupted (Ctrl-C). Prints nothing; ``on_start`` gets the running
    :class:`Emulator` (its ``base_url`` and ``token``) once it listens."""

    async def serve() -> None:
        async with Emulator(config, host=host, port=port) as emulator:
            if on_start is not None:
                on_start(emulator)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
