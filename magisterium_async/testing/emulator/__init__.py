"""The offline emulator of the service: its HTTP app, JSON-RPC, dialects, limits and faults.

:mod:`._server` runs it (:class:`Emulator`); :mod:`._app` is the aiohttp application;
:mod:`._service` the service behind the endpoint (auth, dispatch, quota, tasks);
:mod:`._jsonrpc`, :mod:`._wire` and :mod:`._v1` read and write the wire in A2A 0.3 and
1.0; :mod:`._card` the agent card; :mod:`._limits` the server-side quota; :mod:`._faults`
scripted and random faults; :mod:`._stats` what it saw. ``oauth/`` is its authorization
server, ``content/`` what its skills answer with. Users import from
``magisterium_async.testing``.
"""
