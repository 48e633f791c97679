"""A small forward HTTP proxy on 127.0.0.1, for the proxy tests: what a corporate one does.

It takes absolute-URI requests (``POST http://host:port/path HTTP/1.1``), sends them on in
origin form and relays the answer (one request a connection: it answers with
``Connection: close``), and ``CONNECT host:port``, which it tunnels (or answers 502 when the
host cannot be reached). Every request is recorded in :attr:`ForwardProxy.seen`; with
``credentials`` it answers 407 to a request without the matching ``Proxy-Authorization``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["ForwardProxy", "Seen"]

_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Seen:
    """One request the proxy received: ``method`` and ``target`` as on its request line."""

    method: str
    target: str
    proxy_authorization: str | None


@dataclass
class ForwardProxy:
    credentials: tuple[str, str] | None = None
    seen: list[Seen] = field(default_factory=list)
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    def _authorized(self, header: str | None) -> bool:
        if self.credentials is None:
            return True
        expected = base64.b64encode(":".join(self.credentials).encode()).decode()
        return header == f"Basic {expected}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            auth = headers.get("proxy-authorization")
            self.seen.append(Seen(method, target, auth))
            if not self._authorized(auth):
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\n'
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
            elif method == "CONNECT":
                await self._tunnel(target, reader, writer)
            else:
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                await self._forward(method, target, lines[1:], body, writer)
            await writer.drain()
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _forward(
        self, method: str, target: str, lines: list[str], body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        url = urlsplit(target)
        try:
            up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        path = url.path or "/"
        kept = [
            line
            for line in lines
            if line and not line.lower().startswith(("proxy-", "connection:", "keep-alive:"))
        ]
        request = [f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""]
        up_writer.write("\r\n".join(request).encode("latin-1") + body)
        await up_writer.drain()
        while chunk := await up_reader.read(_LIMIT):
            writer.write(chunk)
        up_writer.close()

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port = target.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port)), 5
            )
        except (OSError, ValueError, asyncio.TimeoutError):
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while chunk := await src.read(_LIMIT):
                    dst.write(chunk)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
