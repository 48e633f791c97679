"""Tests of the cache and shared calls, mirroring magisterium_async/_cache/."""
