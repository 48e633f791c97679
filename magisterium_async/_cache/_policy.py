"""What is kept, for how long, and what is shared while in flight: the one table.

:data:`DEFAULT_RULES` is the table, a :class:`CacheRule` per skill; :class:`CachePolicy`
holds it with the bounds of the store. A skill the table does not name is neither cached
nor coalesced. The rules are pure: no clock, no store.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from magisterium_async._models import DataPart, Part, TextPart

__all__ = [
    "DEFAULT_CACHE_POLICY",
    "DEFAULT_RULES",
    "CachePolicy",
    "CacheRule",
    "names_a_day_absolutely",
]

_HOUR = 3600.0
_DAY = 24 * _HOUR


def _positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")


@dataclasses.dataclass(frozen=True)
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
            _positive("fresh", self.fresh)


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


class _Unchanged(enum.Enum):
    """The default of :meth:`CachePolicy.with_rule`'s arguments: the rule's value stays."""

    KEEP = "keep"


_KEEP = _Unchanged.KEEP


@dataclasses.dataclass(frozen=True)
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

    rules: Mapping[str, CacheRule] = dataclasses.field(default_factory=lambda: DEFAULT_RULES)
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
        _positive("not_found", self.not_found)
        for name in ("max_entries", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, not {value!r}")

    def rule(self, skill_id: str) -> CacheRule:
        """The rule of ``skill_id``: not cached, not coalesced when the table lacks it."""
        return self.rules.get(skill_id, _NOT_CACHED)

    def with_rule(
        self,
        skill_id: str,
        *,
        fresh: float | _Unchanged | None = _KEEP,
        coalesce: bool | _Unchanged = _KEEP,
        dated: bool | _Unchanged = _KEEP,
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
        old = self.rule(skill_id)
        new = CacheRule(
            fresh=old.fresh if isinstance(fresh, _Unchanged) else fresh,
            coalesce=old.coalesce if isinstance(coalesce, _Unchanged) else coalesce,
            dated=old.dated if isinstance(dated, _Unchanged) else dated,
        )
        return dataclasses.replace(self, rules={**self.rules, skill_id: new})


DEFAULT_CACHE_POLICY = CachePolicy()
"""The policy of a client given none."""


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def names_a_day_absolutely(parts: Sequence[Part]) -> bool:
    """Whether a dated skill's input names its day whatever day it is asked on.

    A ``{"date": ...}`` data part, or a text that is a ``YYYY-MM-DD`` date, does;
    anything else ("today", "next Sunday", "Christmas") may name another day tomorrow.
    """
    if len(parts) != 1:
        return False
    part = parts[0]
    if isinstance(part, DataPart):
        return isinstance(part.data.get("date"), str) and len(part.data) == 1
    if isinstance(part, TextPart):
        text = part.text.strip()
        if _ISO_DAY.fullmatch(text) is None:
            return False
        try:
            dt.date.fromisoformat(text)
        except ValueError:
            return False
        return True
    return False
