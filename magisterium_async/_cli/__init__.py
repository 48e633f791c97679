"""``magisterium-async``: the command line of the SDK (also ``python -m magisterium_async``).

One command per skill (``ask``, ``search``, ``fetch``, ``readings``, ``saints``), the
protocol's task calls (``task get|cancel``), ``harvest`` for bulk downloads and
``emulator`` to serve the offline emulator. Every client command takes ``--emulator`` to
run against an in-process emulator: no token, no network.

The package, by concern: :mod:`._app` runs a command and maps errors to exit codes;
:mod:`._parser` registers the commands (:mod:`._command` says what a command is);
:mod:`._options` declares the shared options; :mod:`._output` prints for people or, with
``--json``, for programs; :mod:`._client` opens the client. The commands:
:mod:`._skills`, :mod:`._tasks`, :mod:`._emulator`, and the ``harvest`` command in
:mod:`.harvest`.
"""

from magisterium_async._cli._app import main
from magisterium_async._cli._parser import build_parser

__all__ = ["build_parser", "main"]
