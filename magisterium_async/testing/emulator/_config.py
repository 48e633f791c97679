"""The emulator's configuration: small immutable value objects with the service's defaults."""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from magisterium_async._clock import Clock, LoopClock
from magisterium_async._config import fraction, non_negative_number, positive_number, whole_number

if TYPE_CHECKING:
    from magisterium_async.testing.emulator.content._corpus import Corpus

__all__ = [
    "PAID_PLANS",
    "PROTOCOLS",
    "Algorithm",
    "EmulatorConfig",
    "FaultConfig",
    "Plan",
    "Protocol",
    "RateLimitConfig",
]

Algorithm = Literal["fixed", "sliding", "token_bucket"]
Plan = Literal["free", "pro", "organization", "enterprise"]
PAID_PLANS = frozenset({"pro", "organization", "enterprise"})
_PLANS = PAID_PLANS | {"free"}
_ALGORITHMS = frozenset({"fixed", "sliding", "token_bucket"})
Protocol = Literal["0.2.6", "0.3", "1.0"]
PROTOCOLS: tuple[Protocol, ...] = ("0.2.6", "0.3", "1.0")


@dataclass(frozen=True)
class RateLimitConfig:
    """Requests each token may make per ``period`` seconds, in each quota pool.

    ``default`` covers ``document_search``, ``document_fetch``, ``liturgical_readings`` and
    ``saints_of_the_day``; ``expensive`` covers ``catholic_qa``. ``None`` or ``math.inf``
    lifts a pool's limit. The defaults are the Pro plan (15 and 2 a minute).

    ``algorithm`` picks how a window is counted:

    - ``"sliding"`` (default, the strictest): no interval of ``period`` seconds admits
      more than the limit. A client that keeps to it here keeps to any of the others.
    - ``"fixed"``: counters reset at multiples of ``period`` on the clock, so up to twice
      the limit can pass within one period that straddles a boundary.
    - ``"token_bucket"``: a bucket of ``limit`` tokens, full at first, refilled at
      ``limit / period`` per second.

    Rejected requests spend nothing. ``retry_after_rounding`` is ``"ceil"`` (whole seconds,
    sent as an integer) or ``"exact"`` (sent as a float, millisecond precision).
    ``retry_after_header`` also sends the wait as an HTTP ``Retry-After`` header, which the
    service's contract does not promise.
    """

    default: float | None = 15
    expensive: float | None = 2
    period: float = 60.0
    algorithm: Algorithm = "sliding"
    retry_after_rounding: Literal["ceil", "exact"] = "ceil"
    retry_after_header: bool = False

    def __post_init__(self) -> None:
        for name in ("default", "expensive"):
            value = getattr(self, name)
            if value is not None:
                positive_number(name, value, infinite=True)
                if self.algorithm != "token_bucket" and value < 1:
                    raise ValueError(f"{name} must be >= 1 for a {self.algorithm} window")
        positive_number("period", self.period)
        if self.algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(_ALGORITHMS)}")
        if self.retry_after_rounding not in ("ceil", "exact"):
            raise ValueError('retry_after_rounding must be "ceil" or "exact"')

    @classmethod
    def pro(cls, *, algorithm: Algorithm = "sliding") -> RateLimitConfig:
        """The Pro plan: 15 requests a minute by default, 2 a minute for ``catholic_qa``."""
        return cls(15, 2, period=60.0, algorithm=algorithm)

    @classmethod
    def unlimited(cls) -> RateLimitConfig:
        """No limit in either pool."""
        return cls(None, None)

    def limit_for(self, pool: str) -> float | None:
        """The limit of ``pool`` (``"default"`` or ``"expensive"``); ``None`` when lifted."""
        value = self.expensive if pool == "expensive" else self.default
        return None if value is None or math.isinf(value) else value


@dataclass(frozen=True)
class FaultConfig:
    """Random faults, deterministic under ``seed``.

    Each request that matches ``methods`` and ``skills`` (``None``: all) draws its fault from
    the ``seed``-ed stream in arrival order, so the same sequence of requests meets the same
    faults. At most one fault per request; the rates are probabilities and must add up to
    at most 1:

    - ``error_rate``: an HTTP 5xx from a proxy, half ``502`` (HTML body), half ``503``;
    - ``drop_rate``: the connection is closed without an answer;
    - ``truncate_rate``: the answer's body is cut short mid-stream;
    - ``malformed_rate``: an HTTP 200 whose body is not valid JSON;
    - ``rate_limit_rate``: a 429 / -32003 whatever the quota says, with ``retryAfter``
      ``rate_limit_retry_after`` (the quota shared with the user's MCP calls);
    - ``internal_error_rate``: a JSON-RPC -32603 "Internal error" with HTTP 200;
    - ``task_failure_rate``: the skill raises, so the task ends ``failed``.

    ``latency`` delays every matching answer: a fixed number of seconds or a ``(low, high)``
    range drawn uniformly.
    """

    seed: int = 0
    latency: float | tuple[float, float] = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    truncate_rate: float = 0.0
    malformed_rate: float = 0.0
    rate_limit_rate: float = 0.0
    rate_limit_retry_after: float = 1.0
    internal_error_rate: float = 0.0
    task_failure_rate: float = 0.0
    methods: frozenset[str] | None = None
    skills: frozenset[str] | None = None

    def __post_init__(self) -> None:
        rates = self.rates()
        for name, value in rates:
            fraction(name, value)
        if sum(value for _, value in rates) > 1.0 + 1e-9:
            raise ValueError("fault rates must add up to at most 1")
        if isinstance(self.latency, tuple):
            low, high = self.latency
            non_negative_number("latency", low, infinite=True)
            non_negative_number("latency", high, infinite=True)
            if high < low:
                raise ValueError("latency range must be (low, high) with low <= high")
        else:
            non_negative_number("latency", self.latency, infinite=True)
        non_negative_number("rate_limit_retry_after", self.rate_limit_retry_after, infinite=True)
        for name in ("methods", "skills"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, frozenset):
                object.__setattr__(self, name, frozenset(value))

    def describe(self) -> str:
        """The faults in words, as the ``emulator`` command's banner says them."""
        words = {
            "error_rate": "HTTP 502/503",
            "drop_rate": "connections dropped",
            "truncate_rate": "bodies cut short",
            "malformed_rate": "bodies not JSON",
            "rate_limit_rate": f"429s (retryAfter {self.rate_limit_retry_after:g} s)",
            "internal_error_rate": "JSON-RPC -32603",
            "task_failure_rate": "tasks failed",
        }
        faults = [f"{words[name]} on {rate:.0%}" for name, rate in self.rates() if rate]
        parts = [f"{', '.join(faults)} of requests"] if faults else []
        if isinstance(self.latency, tuple):
            parts.append(f"{self.latency[0]:g}-{self.latency[1]:g} s added to every answer")
        elif self.latency:
            parts.append(f"{self.latency:g} s added to every answer")
        if not parts:
            return "none"
        scope = [
            f"{what} {', '.join(sorted(names))}"
            for what, names in (("methods", self.methods), ("skills", self.skills))
            if names is not None
        ]
        where = f", only on {' and '.join(scope)}" if scope else ""
        return f"{'; '.join(parts)} (seed {self.seed}){where}"

    def rates(self) -> list[tuple[str, float]]:
        """The fault kinds with their rates, in the order they are drawn."""
        return [
            ("error_rate", self.error_rate),
            ("drop_rate", self.drop_rate),
            ("truncate_rate", self.truncate_rate),
            ("malformed_rate", self.malformed_rate),
            ("rate_limit_rate", self.rate_limit_rate),
            ("internal_error_rate", self.internal_error_rate),
            ("task_failure_rate", self.task_failure_rate),
        ]


def _default_tokens() -> Mapping[str, Plan]:
    return {"emu-token": "pro"}


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything the emulator can be told.

    - ``tokens``: bearer token → plan. A ``"free"`` token is answered -32005 (HTTP 403);
      any other plan is served. These fixed tokens never expire; tokens the emulator's
      OAuth server issues are accepted too, until they expire or are revoked. Unknown,
      expired, revoked or missing tokens get -32004 (HTTP 401).
    - ``rate_limits``: per token and pool; ``None`` lifts them entirely.
    - ``faults``: random fault injection; ``None`` for none (scripted faults still work).
    - ``qa_latency``: seconds ``catholic_qa`` takes before answering.
    - ``corpus``: what the document skills serve; ``None`` for the bundled corpus of real
      documents, or a :class:`SyntheticCorpus` for benchmarks.
    - ``max_results``: the most results ``document_search`` returns.
    - ``task_ttl``: seconds a task stays retrievable by ``tasks/get``.
    - ``max_tasks``: the most tasks kept (oldest dropped first); ``None``: no cap.
    - ``clock``: the :class:`~magisterium_async.Clock` whose ``now()`` times rate limits,
      task expiry, OAuth lifetimes and arrivals (default :class:`LoopClock`); pass the
      :class:`VirtualClock` the client uses to move both in one virtual time.
    - ``today``: the date ``today`` means to the calendar skills.
    - ``record_arrivals``: keep the list of arrivals (counters are always kept).
    - ``token_lifetime``: seconds an OAuth access token lives on ``clock`` (its
      ``expires_in``); ``refresh_token_lifetime``: seconds a refresh token lives, ``None``
      for as long as it is not used or revoked; ``oauth_plan``: the plan OAuth-issued
      tokens are served with; ``rotate_refresh_tokens``: each refresh gives a new refresh
      token and spends the old one (else the refresh token is kept and refresh answers
      leave it out); ``offer_revocation``: the RFC 7009 endpoint exists and the metadata
      names it.
    - ``skill_pools``: skill id → ``"default"`` or ``"expensive"``, overriding the pool a
      skill draws on (the service does not state the pool of its five lookup skills; the
      emulator puts them in ``"default"``).
    - ``protocol``: the A2A dialect it speaks. ``"0.2.6"`` (the default) is the service's
      own, card included (``protocolVersion`` 0.2.6); ``"0.3"`` the same JSON-RPC with
      A2A 0.3's card; ``"1.0"`` A2A 1.0 (``SendMessage``, ``GetTask``, ``CancelTask``,
      ``ListTasks``; parts by field, ``TASK_STATE_*``, the ``A2A-Version`` header; a card
      with ``supportedInterfaces``) and nothing else, with the service's own error codes.
    """

    tokens: Mapping[str, Plan] = field(default_factory=_default_tokens)
    rate_limits: RateLimitConfig | None = field(default_factory=RateLimitConfig)
    faults: FaultConfig | None = None
    qa_latency: float = 0.0
    corpus: Corpus | None = None
    max_results: int = 10
    task_ttl: float = 86400.0
    max_tasks: int | None = None
    clock: Clock = field(default_factory=LoopClock)
    today: Callable[[], datetime.date] = datetime.date.today
    record_arrivals: bool = True
    token_lifetime: float = 3600.0
    refresh_token_lifetime: float | None = None
    oauth_plan: Plan = "pro"
    rotate_refresh_tokens: bool = True
    offer_revocation: bool = True
    skill_pools: Mapping[str, Literal["default", "expensive"]] = field(default_factory=dict)
    protocol: Protocol = "0.2.6"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"unknown protocol {self.protocol!r}; expected one of {list(PROTOCOLS)}"
            )
        non_negative_number("qa_latency", self.qa_latency, infinite=True)
        positive_number("token_lifetime", self.token_lifetime)
        if self.refresh_token_lifetime is not None:
            positive_number("refresh_token_lifetime", self.refresh_token_lifetime, infinite=True)
        if self.oauth_plan not in _PLANS:
            raise ValueError(
                f"unknown oauth_plan {self.oauth_plan!r}; expected one of {sorted(_PLANS)}"
            )
        positive_number("task_ttl", self.task_ttl, infinite=True)
        whole_number("max_results", self.max_results)
        if self.max_tasks is not None:
            whole_number("max_tasks", self.max_tasks)
        if not callable(getattr(self.clock, "now", None)):
            raise TypeError(
                "clock must be a Clock (an object with now() and sleep(), such as "
                f"VirtualClock() or LoopClock()), not {type(self.clock).__name__}"
            )
        tokens = dict(self.tokens)
        for token, plan in tokens.items():
            if not isinstance(token, str) or not token:
                raise ValueError("tokens must be non-empty strings")
            if plan not in _PLANS:
                raise ValueError(f"unknown plan {plan!r}; expected one of {sorted(_PLANS)}")
        object.__setattr__(self, "tokens", tokens)
        pools = dict(self.skill_pools)
        for skill, pool in pools.items():
            if pool not in ("default", "expensive"):
                raise ValueError(f'skill_pools[{skill!r}] must be "default" or "expensive"')
        object.__setattr__(self, "skill_pools", pools)

    @property
    def default_token(self) -> str:
        """The first token on a paid plan: what a well-behaved client should send."""
        for token, plan in self.tokens.items():
            if plan in PAID_PLANS:
                return token
        raise LookupError("the emulator config has no token on a paid plan")
