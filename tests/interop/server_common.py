"""The part of the a2a-sdk test servers that does not depend on a2a-sdk's version.

Run under an interop virtualenv (uvicorn is there, not in the project's). A server binds
127.0.0.1 on a free port, prints ``PORT <n>`` on stdout, and serves until its stdin closes
(so it never outlives the test session that started it) or it gets SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

RPC_PATH = "/api/v1/a2a"


def parse_args(*, v1_only: bool = False) -> argparse.Namespace:
    """``--token``, and ``--v1-only`` where the server offers it (``v1_only``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--token", required=True, help="the bearer token POSTs must carry")
    if v1_only:
        parser.add_argument(
            "--v1-only", action="store_true", help="serve A2A 1.0 alone (no v0.3 compat)"
        )
    return parser.parse_args()


class RequireBearer:
    """ASGI middleware: a POST without ``Authorization: Bearer <token>`` gets HTTP 401.

    a2a-sdk servers check no token themselves; this proves the client sent one.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != self.expected:
                body = b'{"detail": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def endpoint(port: int) -> str:
    """The JSON-RPC endpoint's URL, as the server's card names it."""
    return f"http://127.0.0.1:{port}{RPC_PATH}"


def serve(app_for: Callable[[int], Any], token: str) -> None:
    """Serve ``app_for(port)`` (behind :class:`RequireBearer`) on a free 127.0.0.1 port."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    app = app_for(sock.getsockname()[1])
    config = uvicorn.Config(RequireBearer(app, token), log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    def stop_when_stdin_closes() -> None:
        sys.stdin.buffer.read()
        server.should_exit = True

    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
