"""The in-process emulator behind ``--emulator``: on loopback, on a free port, its limits
lifted unless asked for, serving the bundled corpus or a synthetic one."""

from __future__ import annotations

from magisterium_async._cli._local_emulator import corpus, local_emulator
from magisterium_async.testing import BundledCorpus, RateLimitConfig, SyntheticCorpus


def test_the_bundled_corpus_unless_a_synthetic_size_is_given() -> None:
    assert isinstance(corpus(None, 0), BundledCorpus)
    synthetic = corpus(50, 7)
    assert isinstance(synthetic, SyntheticCorpus) and len(synthetic) == 50
    assert [d.id for d in synthetic.search("grace", 5)] == [
        d.id for d in corpus(50, 7).search("grace", 5)
    ]  # the same seed serves the same documents


async def test_it_listens_on_a_free_loopback_port_with_limits_lifted() -> None:
    async with local_emulator(limits=False, synthetic=None) as emulator:
        assert emulator.base_url.startswith("http://127.0.0.1:")
        assert emulator.port > 0
        assert emulator.config.rate_limits is None
        assert isinstance(emulator.config.corpus, BundledCorpus)


async def test_with_limits_it_enforces_the_pro_plan() -> None:
    emulator = local_emulator(limits=True, synthetic=10)
    assert emulator.config.rate_limits == RateLimitConfig.pro()
    assert isinstance(emulator.config.corpus, SyntheticCorpus)
