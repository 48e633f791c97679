"""Tests of HTTP and the A2A wire, mirroring magisterium_async/_http/."""
