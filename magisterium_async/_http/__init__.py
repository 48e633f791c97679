"""HTTP and the A2A wire: everything between a call the client built and the network.

- :mod:`._base`: the seam, :class:`HTTPTransport` and :class:`HTTPRequest`, and the real
  one over aiohttp; every answer's body read within ``max_response_bytes``.
- :mod:`._proxy`: which proxy a request goes through (the user's, or the environment's).
- :mod:`._jsonrpc`: the JSON-RPC envelope: a request out, a Task or a mapped error back.
- :mod:`._dialect` and :mod:`._v1`: the A2A dialects (today's 0.3 and 1.0), and the
  negotiation that picks one from the agent card.
- :mod:`._card`: the agent card: where it lives, reading it, keeping it while it may be
  kept.

Nothing here retries (the call path does) or waits for quota (the scheduler does).
"""
