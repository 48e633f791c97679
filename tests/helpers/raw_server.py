"""A server that answers fixed bytes, and the chain of an exception: for tests that an
error never carries a secret."""

from __future__ import annotations

import asyncio


class RawServer:
    """A TCP server on 127.0.0.1 that answers every request with fixed bytes.

    Arguments:
        answer: the bytes sent back, status line and headers included.
    """

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/api/v1/a2a"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            writer.write(self.answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception its causes and contexts reach, each once.

    Arguments:
        exc: where the chain starts.
    """
    seen: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        item = stack.pop()
        if item is None or any(item is s for s in seen):
            continue
        seen.append(item)
        stack += [item.__cause__, item.__context__]
    return seen
