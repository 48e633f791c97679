"""``magisterium-async``: the command line of the SDK (also ``python -m magisterium_async``).

One command per skill, the protocol's task calls, ``harvest`` and ``rebuild`` for bulk
downloads, ``quota``, ``card``, the sign-in (``login``, ``logout``, ``auth status``) and
``emulator``. Every command that talks to the service takes ``--emulator`` to run against
an in-process emulator: no token, no network.

The package, by concern: :mod:`._app` registers the commands, parses and runs one, and
maps errors to exit codes (:mod:`._errors`); :mod:`._command` says what a command is
and declares the options they share; :mod:`._client` opens the client; :mod:`._output`
prints for people or, with ``--json``, for programs; :mod:`._status` says what a call
waits for. The commands: :mod:`._calls`, :mod:`._emulator`, :mod:`._auth`, :mod:`.harvest`.
"""

from magisterium_async._cli._app import build_parser, main

__all__ = ["build_parser", "main"]
