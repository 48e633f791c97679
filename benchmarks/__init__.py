"""Benchmarks: where magisterium_async stands against the alternatives.

``python -m benchmarks`` runs them all (about 8 minutes on 2 cores) and writes
``benchmarks/results/`` (results.md, results.json, chart.png); ``--quick`` is the smoke run
CI uses. Every server runs in a process of its own on 127.0.0.1, and every comparison runs
its clients side by side in one run: read the ratios, absolute times drift.

- ``bench_decode``: one answer decoded, this SDK (msgspec) vs a2a-sdk 0.3 (pydantic) vs
  a2a-sdk 1.3's v0.3 compat path, each competitor in its own virtualenv (``_envs``);
- ``bench_client``: client CPU and requests/s, vs raw aiohttp, httpx and the a2a-sdk client;
- ``bench_quota``: 429s and wall time against a fixed-window server (four scenarios), vs
  botocore's adaptive retry mode and a naive retry-after loop;
- ``bench_harvest``: peak RSS of a harvest of 1k to 100k documents.
"""
