"""The ``harvest`` command: one process, queries in, every document they find out as JSON
Lines.

:mod:`._command` declares its arguments and help; :mod:`._plan` checks them before anything
starts; :mod:`._run` runs the harvest (the library's, :mod:`magisterium_async._harvest`);
:mod:`._tally` computes its figures and :mod:`._summary` words them (the live status line
and the summary at the end).
"""
