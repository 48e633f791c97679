"""Tests of the harvest command, mirroring magisterium_async/_cli/harvest/."""
