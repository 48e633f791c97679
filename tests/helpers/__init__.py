"""Helpers the tests share: fakes, servers and builders (no test file imports another)."""
