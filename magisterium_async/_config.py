"""Configuration: small immutable value objects with their module-level defaults, the
environment variables the library reads, and the checks every setting's number passes.

Numbers a user passes in are checked the same way everywhere: :class:`TypeError` when it
is not a number at all (``True`` is not one, though Python counts it as an ``int``),
:class:`ValueError` when it is out of range (NaN always is), the message naming the
argument and echoing the value.

Each ``MAGISTERIUM_*`` variable stands in for its argument (or the command line's option)
when that is not given, as ``docs/usage.md`` (Configuration) tabulates; an empty or blank
variable counts as unset, and a value is read without its surrounding whitespace.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

# Number checks: each returns the value, or raises naming it.


def number(name: str, value: object) -> float:
    """``value`` as a float if it is an int or a float (not a bool), else ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int past every float
        raise ValueError(f"{name} must be a number a float can hold, got a larger int") from None


def positive_number(name: str, value: object, *, infinite: bool = False) -> float:
    """``value`` if it is a number above 0 (``math.inf`` only when ``infinite``)."""
    checked = number(name, value)
    if math.isnan(checked) or checked <= 0 or (math.isinf(checked) and not infinite):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return checked


def non_negative_number(name: str, value: object, *, infinite: bool = False) -> float:
    """``value`` if it is a number of at least 0 (``math.inf`` only when ``infinite``)."""
    checked = number(name, value)
    if math.isnan(checked) or checked < 0 or (math.isinf(checked) and not infinite):
        finite = "" if infinite else " and finite"
        raise ValueError(f"{name} must be a number >= 0{finite}, got {value!r}")
    return checked


def fraction(name: str, value: object) -> float:
    """``value`` if it is a number from 0 to 1, both included (a probability, a share)."""
    checked = number(name, value)
    if not 0.0 <= checked <= 1.0:  # NaN compares false, so it is refused too
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
    return checked


def whole_number(name: str, value: object, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum`` (and at most
    ``maximum``, if given)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}")
    return value


def boolean(name: str, value: object) -> bool:
    """``value`` if it is a bool: ``"no"`` or ``0`` for a flag is a mistake, not False."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


PoolName = Literal["default", "expensive"]
"""The service's two quota pools: ``catholic_qa`` draws on ``expensive``, the others on
``default``."""

DEFAULT_BASE_URL = "https://www.magisterium.com/api/v1/a2a"
DEFAULT_MAX_RETRIES = 2
MAX_RETRIES_CEILING = 100
"""The most retries of transient failures one call may be given: 100 tries of a server
that is down, at the backoff's 8 s cap, take about 13 minutes; a number beyond that is a
slip, and a call must end."""
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The largest answer the client reads, decompressed: 64 MiB (the longest documents of the
service are a few MiB)."""


@dataclass(frozen=True)
class RateLimits:
    """Requests allowed per ``period`` seconds in each of the service's two quota pools.

    ``catholic_qa`` draws on ``expensive``; every other skill on ``default``; ``tasks/get``
    and ``tasks/cancel`` on neither. No interval of ``period`` seconds holds more than the
    configured number of request starts in a pool, so a client configured to its plan's
    quota never trips it with its own traffic.

    ``default_concurrency`` / ``expensive_concurrency`` cap the requests in flight per pool
    (``None``: only ``max_concurrency`` applies; the service caps only the rate).
    ``adaptive`` lets a pool lower its rate to what the server allowed after a 429 (the
    quota is shared with the user's MCP calls, or the numbers are wrong) and probe back up
    once 429s stop. ``safety_margin`` (seconds, default ``min(0.02 * period, 1)``) widens
    the window against jitter between the client's clock and the server's.

    Presets: :meth:`pro`, :meth:`organization`; :meth:`unlimited` for the emulator and for
    Enterprise quotas you have no number for.
    """

    default: float
    expensive: float
    _: KW_ONLY
    period: float = 60.0
    default_concurrency: int | None = None
    expensive_concurrency: int | None = None
    adaptive: bool = True
    safety_margin: float | None = None

    def __post_init__(self) -> None:
        for name in ("default", "expensive"):
            value = positive_number(name, getattr(self, name), infinite=True)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "period", positive_number("period", self.period))
        for name in ("default_concurrency", "expensive_concurrency"):
            if getattr(self, name) is not None:
                whole_number(name, getattr(self, name))
        boolean("adaptive", self.adaptive)
        if self.safety_margin is not None:
            non_negative_number("safety_margin", self.safety_margin)

    @classmethod
    def pro(cls) -> RateLimits:
        """The Pro plan: 15 requests a minute by default, 2 a minute for ``catholic_qa``."""
        return cls(15, 2, period=60.0)

    @classmethod
    def organization(cls) -> RateLimits:
        """The Organization plan: the same numbers as Pro."""
        return cls(15, 2, period=60.0)

    @classmethod
    def unlimited(cls, *, concurrency: int | None = None) -> RateLimits:
        """No rate limit in either pool (the emulator, or a quota you manage elsewhere).

        ``concurrency`` caps each pool's requests in flight; by default only the client's
        ``max_concurrency`` applies, also to ``catholic_qa``.
        """
        return cls(
            math.inf,
            math.inf,
            default_concurrency=concurrency,
            expensive_concurrency=concurrency,
            adaptive=False,
        )

    @property
    def margin(self) -> float:
        """The safety margin in force: ``safety_margin``, or ``min(0.02 * period, 1)``."""
        if self.safety_margin is not None:
            return self.safety_margin
        return min(0.02 * self.period, 1.0)

    def window_for(self, pool: str) -> tuple[int, float]:
        """``pool``'s limit as whole starts per window: ``(starts, seconds)``.

        A limit below 1 per period is 1 per a longer window (0.5 a minute: 1 per 2
        minutes); ``(0, period)`` when the pool is unlimited.
        """
        limit = self.limit_for(pool)
        if math.isinf(limit):
            return 0, self.period
        if limit < 1:
            return 1, self.period / limit
        return math.floor(limit), self.period

    def limit_for(self, pool: str) -> float:
        """The configured number of requests per period for ``pool`` (a :class:`PoolName`)."""
        return self.expensive if pool == "expensive" else self.default

    def concurrency_for(self, pool: str) -> int | None:
        """The configured in-flight cap for ``pool``, or ``None``."""
        return self.expensive_concurrency if pool == "expensive" else self.default_concurrency


@dataclass(frozen=True)
class Timeouts:
    """Seconds a single request may take, end to end, by kind of call.

    ``catholic_qa`` runs an LLM pipeline that takes seconds to minutes, so its default is
    far longer than the others'. ``connect`` bounds opening the connection alone.
    """

    default: float = 30.0
    expensive: float = 300.0
    connect: float = 10.0

    def __post_init__(self) -> None:
        for name in ("default", "expensive", "connect"):
            object.__setattr__(self, name, positive_number(name, getattr(self, name)))

    @classmethod
    def of(cls, value: float | Timeouts) -> Timeouts:
        """A ``Timeouts`` from a user's ``timeout=``: one number applies to every call."""
        if isinstance(value, Timeouts):
            return value
        seconds = positive_number("timeout", value)
        return cls(default=seconds, expensive=seconds, connect=min(seconds, cls.connect))

    def for_pool(self, pool: str | None) -> float:
        """The timeout for a request in ``pool`` (``None``: a task call)."""
        return self.expensive if pool == "expensive" else self.default


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures and 429s are retried, and how long one call may take.

    Connection errors, timeouts, HTTP 5xx and -32603 are retried up to ``max_retries``
    times (at most 100: a call must end), after ``min(initial_backoff * 2**n,
    max_backoff)`` with jitter; a ``catholic_qa`` call that timed out only with
    ``retry_expensive_timeouts`` (it may have run and spent the scarce expensive quota).

    A 429 waits the service's ``retryAfter`` (or ``Retry-After``; ``fallback_retry_after``
    when it gave none), at least ``min_retry_after * 2**n`` for the call's n-th 429 (never
    a hot loop) and at most ``max_retry_after``, or longer while its pool is paused. 429s
    spend no retry; once one call's waits pass ``rate_limit_budget`` seconds its
    :class:`RateLimitError` is raised (17 requests at most with the defaults).

    ``total_timeout`` (``None``: no bound) is the deadline of a call as a whole (its wait
    for the pool, every attempt and every wait): past it the call is cancelled and raises
    :class:`APITimeoutError`, and a 429 whose wait would pass it is raised at once.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 120.0
    fallback_retry_after: float = 5.0
    rate_limit_budget: float = 900.0
    retry_expensive_timeouts: bool = False
    min_retry_after: float = 0.1
    total_timeout: float | None = None

    def __post_init__(self) -> None:
        whole_number("max_retries", self.max_retries, minimum=0, maximum=MAX_RETRIES_CEILING)
        boolean("retry_expensive_timeouts", self.retry_expensive_timeouts)
        if self.total_timeout is not None:
            positive_number("total_timeout", self.total_timeout, infinite=True)
        for name in (
            "initial_backoff",
            "max_backoff",
            "max_retry_after",
            "fallback_retry_after",
            "min_retry_after",
        ):
            positive_number(name, getattr(self, name))
        positive_number("rate_limit_budget", self.rate_limit_budget, infinite=True)
        if self.min_retry_after > self.max_retry_after:
            raise ValueError(
                f"min_retry_after ({self.min_retry_after!r}) must not exceed "
                f"max_retry_after ({self.max_retry_after!r})"
            )

    def backoff(self, attempt: int, jitter: float) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based); ``jitter`` in [0, 1)."""
        base = min(self.initial_backoff * 2.0**attempt, self.max_backoff)
        return base * (1.0 - 0.25 * jitter)

    def rate_limit_wait(self, retry_after: float | None, earlier: int) -> float:
        """The wait a 429 asks for, as this policy takes it: ``retry_after`` (or
        ``fallback_retry_after`` when the service gave none), at least ``min_retry_after *
        2**earlier`` (``earlier``: the call's 429s before this one) and at most
        ``max_retry_after``."""
        wait = self.fallback_retry_after if retry_after is None else retry_after
        floor = self.min_retry_after * 2.0 ** min(earlier, 64)
        return float(min(max(wait, floor), self.max_retry_after))


DEFAULT_TIMEOUTS = Timeouts()
DEFAULT_RETRY_POLICY = RetryPolicy()


ProtocolVersion = Literal["auto", "0.3", "1.0"]
"""What ``AsyncMagisterium(protocol=)`` takes: ``"auto"`` (find it from the agent card),
``"0.3"`` (the service's dialect today) or ``"1.0"``."""
PROTOCOLS: tuple[ProtocolVersion, ...] = get_args(ProtocolVersion)

Priority = Literal["interactive", "bulk"]
"""A call's place in its pool's line: a waiting ``"interactive"`` call starts before every
waiting ``"bulk"`` one (see :meth:`AsyncMagisterium.with_options`)."""


class NotGiven:
    """The type of :data:`NOT_GIVEN`: an option ``with_options`` was not asked to change.

    ``None`` cannot say "keep" there, because ``None`` is a value: it takes the default
    back (``fairness_key=None``: no key), as in the OpenAI SDK.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN: Final = NotGiven()
"""``with_options(timeout=NOT_GIVEN)``, the default of each option: keep this client's."""


# The cache's policy ------------------------------------------------------------------

_HOUR = 3600.0
_DAY = 24 * _HOUR


@dataclass(frozen=True)
class CacheRule:
    """How one skill's answers are kept and shared.

    Arguments:
        fresh: seconds an answer stays fresh in the cache; ``None``: never cached.
        coalesce: whether identical calls in flight share one request.
        dated: the input names a day; one named relative to today ("today", "next
            Sunday") is fresh only until the end of the local day it was asked on.
    """

    fresh: float | None = None
    coalesce: bool = False
    dated: bool = False

    def __post_init__(self) -> None:
        if self.fresh is not None:
            positive_number("fresh", self.fresh)


DEFAULT_RULES: Mapping[str, CacheRule] = MappingProxyType(
    {
        # An LLM answer: expensive, on the small quota, and not the same twice. Asking
        # again is asking for another answer, so it is neither kept nor shared by default.
        "catholic_qa": CacheRule(fresh=None, coalesce=False),
        # A document by its id does not change.
        "document_fetch": CacheRule(fresh=30 * _DAY, coalesce=True),
        # The index grows: a search's hits may change, so they are kept for an hour.
        "document_search": CacheRule(fresh=_HOUR, coalesce=True),
        # The readings and the martyrology of a given date do not change.
        "liturgical_readings": CacheRule(fresh=30 * _DAY, coalesce=True, dated=True),
        "saints_of_the_day": CacheRule(fresh=30 * _DAY, coalesce=True, dated=True),
        # Directory records (people, dioceses, their statistics) are updated now and then.
        "saint_lookup": CacheRule(fresh=_DAY, coalesce=True),
        "person_lookup": CacheRule(fresh=_DAY, coalesce=True),
        "pope_lookup": CacheRule(fresh=_DAY, coalesce=True),
        "diocese_lookup": CacheRule(fresh=_DAY, coalesce=True),
        "diocese_statistics_lookup": CacheRule(fresh=_DAY, coalesce=True),
    }
)
"""Every skill's rule by id: the one place that says what is cached, how long, and what
is coalesced."""

_NOT_CACHED = CacheRule()


@dataclass(frozen=True)
class CachePolicy:
    """What the client keeps and shares: a rule per skill, and the bounds of its cache.

    Arguments:
        rules: a :class:`CacheRule` per skill id (default :data:`DEFAULT_RULES`); a
            skill not named is neither cached nor coalesced.
        not_found: seconds a "nothing found" answer is kept (it may be found later).
        max_entries: answers the cache holds at most (memory and disk); the least
            recently used go first.
        max_bytes: bytes of answers the cache holds at most (memory and disk).

    A Redis cache keeps each answer for its time and leaves the bound to the server's
    ``maxmemory`` and ``maxmemory-policy``. Failures are never kept.
    """

    rules: Mapping[str, CacheRule] = field(default_factory=lambda: DEFAULT_RULES)
    not_found: float = 600.0
    max_entries: int = 10_000
    max_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        rules = dict(self.rules)
        for skill_id, rule in rules.items():
            if not isinstance(rule, CacheRule):
                raise TypeError(
                    f"rules[{skill_id!r}] must be a CacheRule, not {type(rule).__name__}"
                )
        object.__setattr__(self, "rules", MappingProxyType(rules))
        positive_number("not_found", self.not_found)
        whole_number("max_entries", self.max_entries)
        whole_number("max_bytes", self.max_bytes)

    def rule(self, skill_id: str) -> CacheRule:
        """The rule of ``skill_id``: not cached, not coalesced when the table lacks it."""
        return self.rules.get(skill_id, _NOT_CACHED)

    def with_rule(
        self,
        skill_id: str,
        *,
        fresh: float | NotGiven | None = NOT_GIVEN,
        coalesce: bool | NotGiven = NOT_GIVEN,
        dated: bool | NotGiven = NOT_GIVEN,
    ) -> CachePolicy:
        """This policy with ``skill_id``'s rule changed where an argument is given.

        Arguments:
            skill_id: the skill whose rule changes (or is added).
            fresh: seconds its answers stay fresh; ``None``: not cached.
            coalesce: whether identical calls in flight share one request.
            dated: whether its input names a day (see :class:`CacheRule`).

        ``CachePolicy().with_rule("catholic_qa", fresh=3600, coalesce=True)`` keeps
        ``catholic_qa`` answers for an hour.
        """
        given: dict[str, Any] = {"fresh": fresh, "coalesce": coalesce, "dated": dated}
        rule = replace(
            self.rule(skill_id), **{k: v for k, v in given.items() if not isinstance(v, NotGiven)}
        )
        return replace(self, rules={**self.rules, skill_id: rule})


DEFAULT_CACHE_POLICY = CachePolicy()
"""The policy of a client given none."""


@dataclass(frozen=True)
class CallOptions:
    """Everything a call may change on shared connections and pools, as one value that
    travels whole from the client (or a view ``with_options`` made) to the call loop.

    Arguments:
        timeouts: seconds per request, by pool (a number: the same for every call).
        retry: how failures and 429s are retried, and the call's total deadline.
        cache: what is kept and shared (a ``CachePolicy``).
        protocol: the A2A dialect spoken: ``"auto"``, ``"0.3"`` or ``"1.0"``.
        priority: the call's place in its pool's line: ``"interactive"`` or ``"bulk"``.
        fairness_key: whom the call serves (``None``: nobody in particular).
    """

    timeouts: Timeouts = DEFAULT_TIMEOUTS
    retry: RetryPolicy = DEFAULT_RETRY_POLICY
    cache: CachePolicy = DEFAULT_CACHE_POLICY
    protocol: ProtocolVersion = "auto"
    priority: Priority = "interactive"
    fairness_key: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeouts", Timeouts.of(self.timeouts))
        for name, argument, kind in _TYPED:
            if not isinstance(getattr(self, name), kind):
                given = type(getattr(self, name)).__name__
                raise TypeError(f"{argument} must be {kind.__name__} or None, not {given}")
        for name, allowed in (("protocol", PROTOCOLS), ("priority", get_args(Priority))):
            if getattr(self, name) not in allowed:
                given = getattr(self, name)
                raise ValueError(f"{name} must be one of {list(allowed)}, got {given!r}")
        if self.fairness_key is not None and not isinstance(self.fairness_key, str):
            name = type(self.fairness_key).__name__
            raise TypeError(f"fairness_key must be a str or None, not {name}")

    def changed(self, **given: Any) -> CallOptions:
        """These options, each given one changed, by the client's arguments' names
        (``timeout``, ``max_retries``, ``retry_policy``, ``cache_policy``, ``protocol``,
        ``priority``, ``fairness_key``): ``NOT_GIVEN`` keeps an option, ``None`` takes its
        default back. ``max_retries`` applies to the retry policy, the one given with it
        or else this one's."""
        changes: dict[str, Any] = {}
        for argument, value in given.items():
            name = _FIELDS.get(argument, argument)
            if not isinstance(value, NotGiven) and argument != "max_retries":
                changes[name] = _DEFAULTS[name] if value is None else value
        options = replace(self, **changes)
        retries = given.get("max_retries", NOT_GIVEN)
        if isinstance(retries, NotGiven):
            return options
        retries = DEFAULT_MAX_RETRIES if retries is None else retries
        # RetryPolicy checks it (type and range), naming max_retries.
        return replace(options, retry=replace(options.retry, max_retries=retries))


# The client's argument for each option, where its name differs, and each one's default.
_FIELDS = {"timeout": "timeouts", "retry_policy": "retry", "cache_policy": "cache"}
_TYPED = (("retry", "retry_policy", RetryPolicy), ("cache", "cache_policy", CachePolicy))
_DEFAULTS = {f.name: f.default for f in fields(CallOptions)}


# The environment --------------------------------------------------------------------

TOKEN_ENV = "MAGISTERIUM_TOKEN"
CREDENTIALS_ENV = "MAGISTERIUM_CREDENTIALS"
BASE_URL_ENV = "MAGISTERIUM_BASE_URL"
REDIS_URL_ENV = "MAGISTERIUM_REDIS_URL"
LOG_ENV = "MAGISTERIUM_LOG"
CACHE_ENV = "MAGISTERIUM_CACHE"


def from_env(name: str) -> str | None:
    """``$name`` without surrounding whitespace; ``None`` when it is unset or blank (the
    one rule for every ``MAGISTERIUM_*`` variable)."""
    return os.environ.get(name, "").strip() or None


QUOTA_ENV = "MAGISTERIUM_QUOTA"
"""The quota the client allows itself when ``rate_limits=`` is not given (``--quota``'s
syntax); unset, the Pro plan's."""

_QUOTA_SYNTAX = "DEFAULT/EXPENSIVE[/PERIOD] (like 15/2 or 15/2/60) or unlimited"


def parse_quota(text: str) -> RateLimits:
    """A quota in the command line's words: ``DEFAULT/EXPENSIVE[/PERIOD]`` or ``unlimited``.

    ``15/2`` is the Pro plan (15 requests a minute for every skill but ``catholic_qa``, 2
    for it); ``15/2/60`` says the period (seconds, default 60). ``ValueError`` for anything
    else, its message giving the syntax.

    Arguments:
        text: the quota, as ``--quota`` and ``$MAGISTERIUM_QUOTA`` take it.
    """
    cleaned = text.strip()
    if cleaned.lower() == "unlimited":
        return RateLimits.unlimited()
    try:
        numbers = [float(part) for part in cleaned.split("/")]
        # float() reads "inf" and "1e309" as infinity: a pool would be unlimited unsaid.
        if len(numbers) in (2, 3) and all(math.isfinite(number) for number in numbers):
            period = numbers[2] if len(numbers) == 3 else 60.0
            return RateLimits(numbers[0], numbers[1], period=period)
    except ValueError:
        pass
    raise ValueError(f"expected {_QUOTA_SYNTAX}, got {text!r}")


def quota_from_env() -> RateLimits | None:
    """``$MAGISTERIUM_QUOTA`` as :class:`RateLimits`, or ``None`` when it is unset or blank.

    A value that is not a quota is a ``ValueError`` naming the variable.
    """
    text = from_env(QUOTA_ENV)
    if text is None:
        return None
    try:
        return parse_quota(text)
    except ValueError as exc:
        raise ValueError(f"${QUOTA_ENV} is not a quota: {exc}") from None
