"""The rate-limit engine's wind tunnel: a matrix of scenarios in virtual time.

``python -m benchmarks.tunnel`` runs every group of :func:`scenarios.matrix` (about 460
scenarios, three seeds each) through the SDK's public API on a ``VirtualClock``, against a
server that keeps the quota as fixed windows, sliding windows or a token bucket, and
prints each group's p50, p95 and worst against its floor (issue #48's table). Virtual time
is deterministic, so ``tests/ratelimit/test_tunnel.py`` asserts the same floors.
"""
