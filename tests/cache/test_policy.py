"""The one table: what is kept, how long, what is shared; and which inputs name a day."""

from __future__ import annotations

import pytest

from magisterium_async import DEFAULT_CACHE_POLICY, CachePolicy, CacheRule
from magisterium_async._cache import names_a_day_absolutely
from magisterium_async._models import DataPart, TextPart

DAY = 86400.0
IDEMPOTENT = {
    "document_fetch",
    "document_search",
    "liturgical_readings",
    "saints_of_the_day",
    "saint_lookup",
    "person_lookup",
    "pope_lookup",
    "diocese_lookup",
    "diocese_statistics_lookup",
}


def test_the_defaults_keep_what_stays_true_and_share_every_idempotent_skill() -> None:
    policy = DEFAULT_CACHE_POLICY
    assert {s for s, r in policy.rules.items() if r.coalesce} == IDEMPOTENT
    assert policy.rule("catholic_qa") == CacheRule(fresh=None, coalesce=False)
    assert policy.rule("document_fetch").fresh == 30 * DAY
    assert policy.rule("liturgical_readings").fresh == 30 * DAY
    assert policy.rule("saints_of_the_day").dated
    assert policy.rule("document_search").fresh == 3600
    assert all(policy.rule(s).fresh == DAY for s in IDEMPOTENT if s.endswith("_lookup"))
    assert policy.rule("document_search").fresh < policy.rule("document_fetch").fresh  # type: ignore[operator]
    assert policy.not_found == 600
    assert policy.rule("a_skill_of_tomorrow") == CacheRule()  # unknown: neither


def test_with_rule_changes_only_what_it_is_given_and_leaves_the_policy_as_it_was() -> None:
    policy = CachePolicy()
    asked = policy.with_rule("catholic_qa", fresh=3600)
    assert asked.rule("catholic_qa") == CacheRule(fresh=3600, coalesce=False)
    shared = asked.with_rule("catholic_qa", coalesce=True)
    assert shared.rule("catholic_qa") == CacheRule(fresh=3600, coalesce=True)
    assert policy.rule("catholic_qa").fresh is None
    off = policy.with_rule("document_search", fresh=None)
    assert off.rule("document_search") == CacheRule(fresh=None, coalesce=True)
    with pytest.raises(TypeError):
        policy.rules["x"] = CacheRule()  # type: ignore[index]


@pytest.mark.parametrize(
    "bad",
    [
        {"not_found": 0},
        {"not_found": float("inf")},
        {"max_entries": 0},
        {"max_bytes": 1.5},
        {"max_entries": True},
        {"rules": {"document_fetch": 3600}},
    ],
)
def test_values_that_cannot_be_right_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        CachePolicy(**bad)  # type: ignore[arg-type]


def test_a_rule_refuses_a_freshness_that_is_not_a_positive_number() -> None:
    for bad in (0, -1, float("nan"), "1h"):
        with pytest.raises((ValueError, TypeError), match="fresh"):
            CacheRule(fresh=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("parts", "absolute"),
    [
        ([DataPart(data={"date": "2026-12-25"})], True),
        ([TextPart(text="2026-12-25")], True),
        ([TextPart(text=" 2026-12-25 ")], True),
        ([TextPart(text="today")], False),
        ([TextPart(text="next Sunday")], False),
        ([TextPart(text="2026-02-30")], False),  # not a day
        ([TextPart(text="2026-12-25 and tomorrow")], False),
        ([DataPart(data={"date": "2026-12-25", "offset": 1})], False),
        ([TextPart(text="2026-12-25"), TextPart(text="x")], False),
    ],
)
def test_which_inputs_name_their_day_whatever_day_it_is(parts: list, absolute: bool) -> None:
    assert names_a_day_absolutely(parts) is absolute
