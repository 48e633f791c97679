"""HTTP and the A2A wire: everything between a call the client built and the network.

- :mod:`._base`: the seam, :class:`HTTPTransport` and :class:`HTTPRequest`, and the real
  one over aiohttp; every answer's body read within ``max_response_bytes``.
- :mod:`._proxy`: which proxy a request goes through (the user's, or the environment's).
- :mod:`._jsonrpc`: the JSON-RPC envelope and :class:`JSONRPCClient`: a request out, a
  Task or a mapped error back.
- :mod:`._dialect` and :mod:`._v1`: the A2A dialects (today's 0.3 and 1.0).
- :mod:`._card`: the agent card (where it lives, reading it, keeping it) and the
  negotiation that picks a dialect from it.

Nothing here retries (the call does) or waits for quota (the engine does).
"""

from magisterium_async._http._base import (
    ACCEPT_ENCODING,
    AiohttpTransport,
    HTTPRequest,
    HTTPTransport,
    RawResponse,
    check_base_url,
    read_body,
)
from magisterium_async._http._card import CardReader, Negotiation, max_age
from magisterium_async._http._dialect import V03, V10, Dialect, offered
from magisterium_async._http._jsonrpc import JSONRPCClient, decode_response, endpoint
from magisterium_async._http._proxy import Proxies

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
    "Negotiation",
    "Proxies",
    "RawResponse",
    "check_base_url",
    "decode_response",
    "endpoint",
    "max_age",
    "offered",
    "read_body",
]
