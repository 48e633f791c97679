"""Tests of signing in, mirroring magisterium_async/_auth/."""
