"""Tests of batches and the harvest, mirroring magisterium_async/_harvest/."""
