"""The ``harvest`` and ``rebuild`` commands: one process, queries in, every document they
find out as JSON Lines; and that output written again from the harvest's state.

:mod:`._command` declares the harvest's arguments and help; :mod:`._plan` checks them
before any file is made; :mod:`._run` runs the harvest (the library's,
:mod:`magisterium_async._harvest`); :mod:`._report` computes and words its figures (the
live status line and the summary); :mod:`._dry_run` and :mod:`._rebuild` are the others.
"""
