"""Tests of the testing tools and the emulator, mirroring magisterium_async/testing/."""
