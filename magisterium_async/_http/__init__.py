"""HTTP and the A2A wire: everything between a call the client built and the network.

- :mod:`._base`: the seam, :class:`HTTPTransport` and :class:`HTTPRequest`, the real one
  over aiohttp and the proxies it goes through; every body read within
  ``max_response_bytes``.
- :mod:`._jsonrpc`: the JSON-RPC envelope and :class:`JSONRPCClient`: a request out, a
  result or a mapped error back.
- :mod:`._dialect`: the A2A dialects (today's 0.3 and 1.0), as one table of differences,
  and the one an agent card offers.
- :mod:`._card`: the agent card: where it lives, reading it, keeping it.

Nothing here retries (the call does) or waits for quota (the engine does).
"""

from magisterium_async._http._base import (
    ACCEPT_ENCODING,
    AiohttpTransport,
    HTTPRequest,
    HTTPTransport,
    Proxies,
    check_base_url,
    read_body,
)
from magisterium_async._http._card import CardReader, max_age
from magisterium_async._http._dialect import V03, V10, Dialect, offered
from magisterium_async._http._jsonrpc import (
    JSONRPCClient,
    decode_response,
    endpoint,
    raise_alone,
)

__all__ = [
    "ACCEPT_ENCODING",
    "V03",
    "V10",
    "AiohttpTransport",
    "CardReader",
    "Dialect",
    "HTTPRequest",
    "HTTPTransport",
    "JSONRPCClient",
    "Proxies",
    "check_base_url",
    "decode_response",
    "endpoint",
    "max_age",
    "offered",
    "raise_alone",
    "read_body",
]
