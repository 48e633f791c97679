"""``python -m magisterium_async``: the same command line as ``magisterium-async``."""

from magisterium_async._cli import main

raise SystemExit(main())
