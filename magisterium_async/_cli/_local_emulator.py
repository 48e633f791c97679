"""The in-process emulator behind ``--emulator``, and the corpus an emulator serves.

The emulator lives in :mod:`magisterium_async.testing` (it needs aiohttp's server); it is
imported inside these functions, only when a command asks for it. Opening a client
(:mod:`._client`) reaches the emulator here, and so does the ``emulator`` command
(:mod:`._emulator`): neither imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magisterium_async.testing import Corpus, Emulator
    from magisterium_async.testing.emulator._config import Protocol

__all__ = ["corpus", "local_emulator"]


def corpus(synthetic: int | None, seed: int) -> Corpus:
    """``synthetic`` generated documents (under ``seed``), else the bundled corpus."""
    from magisterium_async.testing import BundledCorpus, SyntheticCorpus

    return SyntheticCorpus(synthetic, seed) if synthetic else BundledCorpus()


def local_emulator(limits: bool, synthetic: int | None, protocol: Protocol) -> Emulator:
    """An emulator for ``--emulator`` on a free loopback port, its limits lifted unless
    ``limits`` (the Pro plan's), speaking ``protocol`` (``"0.2.6"``: the service's)."""
    from magisterium_async.testing import Emulator, EmulatorConfig, RateLimitConfig

    config = EmulatorConfig(
        rate_limits=RateLimitConfig.pro() if limits else None,
        corpus=corpus(synthetic, 0),
        protocol=protocol,
    )
    return Emulator(config, host="127.0.0.1", port=0)
