"""Offline emulator of the Magisterium service, for tests, benchmarks and demos.

It implements the service's published contract: the JSON-RPC methods
``message/send``, ``tasks/get`` and ``tasks/cancel`` at ``/api/v1/a2a``, the five skills
of the contract over a bundled corpus of real Church documents (or a
:class:`SyntheticCorpus` of any size) and the five lookup skills the service also lists
(``saint_lookup``, ``pope_lookup``, ...; their artifacts invented here, as the service
does not state them), bearer-token auth with plans, per-token rate limits, CORS preflight
and the agent card, an OAuth 2.0 authorization server issuing expiring tokens
(``emu.oauth``);
plus deterministic fault injection and counters for tests to assert on. It speaks the
service's dialect (A2A 0.2.6, its card to the letter) unless told another:
``EmulatorConfig(protocol="0.3")`` serves A2A 0.3's card, ``protocol="1.0"`` A2A 1.0
(``SendMessage``, ``GetTask``, ``CancelTask``, ``ListTasks``)::

    async with Emulator(EmulatorConfig(rate_limits=None)) as emu:
        client = AsyncMagisterium(token=emu.token, base_url=emu.base_url)
        emu.script(Fault.http_502(), Fault.drop())   # the next two requests fail
        ...
        assert emu.stats.count(skill="document_search", outcome="ok") == 1

A skill fails on purpose (its task ends ``failed``) when the first text part starts with
``__fail__`` (``"__fail__: reason"`` sets the reason), or through ``Fault.task_failed()``.

:class:`VirtualClock` runs the client's rate-limit pools, retries and timeouts in virtual
time (``AsyncMagisterium(clock=VirtualClock())``): it jumps to the next deadline whenever
the loop is idle, so minute-scale quotas finish in milliseconds.
:class:`MockTransport` answers the client's requests from a function, with no socket
(``AsyncMagisterium(transport=MockTransport(handler))``), for unit tests of decoding and
errors.
"""

from magisterium_async.testing._clock import VirtualClock
from magisterium_async.testing._mock import MockRequest, MockResponse, MockTransport
from magisterium_async.testing.emulator._app import create_app
from magisterium_async.testing.emulator._config import (
    Algorithm,
    EmulatorConfig,
    FaultConfig,
    Plan,
    RateLimitConfig,
)
from magisterium_async.testing.emulator._faults import Fault, FaultKind
from magisterium_async.testing.emulator._server import Emulator, run_emulator
from magisterium_async.testing.emulator._stats import OUTCOMES, Arrival, Stats, max_in_window
from magisterium_async.testing.emulator.content._corpus import (
    BundledCorpus,
    Corpus,
    CorpusDocument,
    Listing,
    SearchHit,
)
from magisterium_async.testing.emulator.content._skills import FAIL_PREFIX
from magisterium_async.testing.emulator.content._synthetic import SyntheticCorpus
from magisterium_async.testing.emulator.oauth._clients import OAuthClient
from magisterium_async.testing.emulator.oauth._records import OAuthCounts
from magisterium_async.testing.emulator.oauth._server import OAuthServer

__all__ = [
    "FAIL_PREFIX",
    "OUTCOMES",
    "Algorithm",
    "Arrival",
    "BundledCorpus",
    "Corpus",
    "CorpusDocument",
    "Emulator",
    "EmulatorConfig",
    "Fault",
    "FaultConfig",
    "FaultKind",
    "Listing",
    "MockRequest",
    "MockResponse",
    "MockTransport",
    "OAuthClient",
    "OAuthCounts",
    "OAuthServer",
    "Plan",
    "RateLimitConfig",
    "SearchHit",
    "Stats",
    "SyntheticCorpus",
    "VirtualClock",
    "create_app",
    "max_in_window",
    "run_emulator",
]
