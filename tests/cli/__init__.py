"""Tests of the command line, mirroring magisterium_async/_cli/."""
