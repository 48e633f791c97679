"""Tests of the rate-limit engine, mirroring magisterium_async/_ratelimit/."""
